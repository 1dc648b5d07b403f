"""Scheduled drills start once per occurrence, and a drill takes no more than its N runs, with racers on PostgreSQL."""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tests.apitools import AgentApi, api_agent
from tests.helpers import run_together
from workflows.models import Drill, Event, Workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RACERS = 8


def race(calls: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Any) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as exc:  # surfaced below: a thread must not fail silently
            errors.append(exc)
        finally:
            connection.close()

    threads = run_together([functools.partial(run, i, call) for i, call in enumerate(calls)], timeout=120)
    assert not any(t.is_alive() for t in threads), "a racer hung"
    assert not errors, errors
    return results


def scheduled_drill(bot: AgentApi, **kwargs: Any) -> Drill:
    drill = Drill.objects.create(
        agent=bot.agent, name="crash", fault=Drill.Fault.CRASH_AFTER_STEP, **{"runs": 3, **kwargs}
    )
    assert drill.schedule(timezone.now() - timedelta(seconds=1))
    return drill


def test_beat_processes_racing_start_a_scheduled_drill_once():
    bot = api_agent("racer")
    bot.agent.advertise(["drill"])
    drill = scheduled_drill(bot)
    started = race([Drill.start_due for _ in range(RACERS)])
    assert sum(started) == 1, started
    assert Event.objects.filter(subject=f"drill:{drill.pk}", verb=Event.Verb.DRILL_STARTED).count() == 1
    drill.refresh_from_db()
    assert drill.status == Drill.Status.RUNNING and drill.next_run_at is None


def test_new_workflows_racing_for_the_last_places_take_exactly_n():
    bot = api_agent("racer")
    bot.agent.advertise(["drill"])
    drill = scheduled_drill(bot, runs=3)
    assert Drill.start_due() == 1
    clients = [AgentApi(bot.agent, bot.token) for _ in range(RACERS)]
    race([functools.partial(c.create_workflow, f"T-{i}") for i, c in enumerate(clients)])
    assert Workflow.objects.count() == RACERS
    assert Workflow.objects.filter(drill=drill).count() == 3
    drill.refresh_from_db()
    assert drill.picked == 3


def test_beat_processes_racing_start_each_occurrence_of_a_weekly_drill_once():
    bot = api_agent("racer")
    bot.agent.advertise(["drill"])
    now = timezone.now()
    drill = Drill.objects.create(
        agent=bot.agent,
        name="weekly crash",
        fault=Drill.Fault.CRASH_AFTER_STEP,
        runs=3,
        repeat_weekday=now.weekday(),
        repeat_at=(now - timedelta(minutes=5)).time(),
    )
    assert drill.schedule()
    due = now - timedelta(minutes=1)  # this week's occurrence has come (the rule scheduled next week's)
    Drill.objects.filter(pk=drill.pk).update(next_run_at=due)

    started = race([Drill.start_due for _ in range(RACERS)])

    assert sum(started) == 1, started
    [occurrence] = drill.occurrences.all()
    assert occurrence.status == Drill.Status.RUNNING and occurrence.occurrence_at == due
    drill.refresh_from_db()
    assert drill.status == Drill.Status.SCHEDULED and drill.next_run_at == drill.next_runs(after=now, count=1)[0]
    assert drill.next_run_at > now  # the rule moved on to next week's
    assert race([Drill.start_due for _ in range(RACERS)]) == [0] * RACERS  # nothing more is due
    assert Event.objects.filter(verb=Event.Verb.DRILL_STARTED).count() == 1
