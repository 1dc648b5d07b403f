"""A worker whose clock runs ahead (issue 14) judges leases, backoffs, SLA deadlines, silence and replay
deadlines on the database's clock, as every other process does: it takes no live lease, its own leases
last as configured, and it breaches, pauses and fails nothing early.

time_machine moves this process's clock only; PostgreSQL's (and SQLite's, read from the operating
system) stays put, which is exactly a worker skewed against the rest of the deployment. Every instant
a test sets is relative to ``database_now()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
import time_machine
from django.db import transaction
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows import rollups, tasks
from workflows.clock import database_now
from workflows.models import (
    Channel,
    Checkpoint,
    Decider,
    Decision,
    Delivery,
    Notification,
    ReplayRun,
    RollupState,
    Workflow,
)

SKEW = timedelta(minutes=10)  # longer than a delivery lease (60 s), shorter than the silence limit (15 min)


@contextmanager
def skewed_worker() -> Iterator[None]:
    """This process's clock 10 minutes ahead of the database's, and ticking."""
    with time_machine.travel(database_now() + SKEW, tick=True):
        assert timezone.now() - database_now() > SKEW - timedelta(seconds=5)
        yield


@pytest.fixture
def clocks(settings):
    settings.DELIVERY_LEASE_SECONDS = 60
    settings.DELIVERY_BACKOFF_SECONDS = 2.0
    settings.NOTIFY_TIMEOUT_SECONDS = 10.0
    settings.AGENT_SILENCE_SECONDS = 900
    return settings


@pytest.fixture
def decision(db, receiver, alice, clocks):
    agent, _ = make_agent("support-bot", resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    return Decider(checkpoint).decide(by=alice, action="resume", instructions="Write the note.", money_confirmed=True)


def seconds_after(start, seconds):
    return start + timedelta(seconds=seconds)


def test_a_skewed_worker_does_not_reclaim_a_live_delivery_lease(decision, receiver):
    assert decision.start_attempt()  # an honest worker is delivering it
    with skewed_worker():
        assert tasks.reclaim_stuck_deliveries() == 0
        assert tasks.deliver_decision(decision.pk) == "skipped"  # its message for the same decision stands back
    decision.refresh_from_db()
    assert decision.status == Decision.Status.RUNNING and decision.attempts == 1
    assert receiver.deliveries == []  # no second attempt while the first is running

    Decision.objects.filter(pk=decision.pk).update(lease_expires_at=database_now() - timedelta(seconds=1))
    with skewed_worker():
        assert tasks.reclaim_stuck_deliveries() == 1  # really expired: reclaimed
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED


def test_a_skewed_workers_lease_and_backoff_last_as_configured_in_database_time(decision, clocks, monkeypatch):
    with skewed_worker():
        before = database_now()
        assert decision.start_attempt()
        after = database_now()
    assert seconds_after(before, 60) <= decision.lease_expires_at <= seconds_after(after, 60)

    with skewed_worker():
        before = database_now()
        assert decision.mark_attempt_failed("agent down")
        after = database_now()
    decision.refresh_from_db()
    assert decision.attempts == 1 and decision.status == Decision.Status.QUEUED
    assert seconds_after(before, 2) <= decision.next_attempt_at <= seconds_after(after, 2)  # first backoff: 2 s

    sent = []
    monkeypatch.setattr(tasks.deliver_decision, "apply_async", lambda args, **kw: sent.append(args[0]))
    Decision.objects.filter(pk=decision.pk).update(next_attempt_at=database_now())
    with skewed_worker():
        before = database_now()
        assert tasks.relay_outbox() == 1
        after = database_now()
    decision.refresh_from_db()
    assert seconds_after(before, 60) <= decision.next_attempt_at <= seconds_after(after, 60)
    assert sent == [decision.pk]


def test_a_skewed_worker_does_not_take_a_live_notification_lease_and_takes_its_own_for_30_seconds(db, clocks):
    user = make_user("nina")
    channel = Channel.objects.create(kind="webhook", user=user, url="http://127.0.0.1:9/hook")
    with transaction.atomic():
        [note] = Notification.send(
            kind="sla_breached",
            title="Decision target breached",
            checkpoint=make_checkpoint(),
            users=[user],
            key="skew",
        )
    delivery = Delivery.objects.get(notification=note, channel=channel)
    before = database_now()
    assert delivery.start_attempt()  # an honest worker is sending it
    after = database_now()
    assert seconds_after(before, 30) <= delivery.lease_expires_at <= seconds_after(after, 30)
    with skewed_worker():
        assert not Delivery.objects.get(pk=delivery.pk).start_attempt()
        assert tasks.relay_notifications() == 0

    Delivery.objects.filter(pk=delivery.pk).update(lease_expires_at=database_now() - timedelta(seconds=1))
    with skewed_worker():
        before = database_now()
        assert Delivery.objects.get(pk=delivery.pk).start_attempt()
        after = database_now()
    delivery.refresh_from_db()
    assert delivery.attempts == 2
    assert seconds_after(before, 30) <= delivery.lease_expires_at <= seconds_after(after, 30)


def test_a_skewed_sweep_warns_and_breaches_an_sla_clock_only_when_it_is_due_in_database_time(db, clocks):
    checkpoint = make_checkpoint()
    now = database_now()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        claim_warn_at=now + timedelta(minutes=3),
        claim_due_at=now + timedelta(minutes=4),
        warn_at=now + timedelta(minutes=5),
        due_at=now + timedelta(minutes=8),
    )
    with skewed_worker():
        counts = tasks.sweep_clocks()
    assert counts == dict.fromkeys(counts, 0)  # every deadline is minutes away on the shared clock
    checkpoint.refresh_from_db()
    assert checkpoint.warned_at is None and checkpoint.breached_at is None
    assert checkpoint.claim_warned_at is None and checkpoint.claim_breached_at is None

    now = database_now()
    due = now - timedelta(seconds=1)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(warn_at=now - timedelta(minutes=3), due_at=due)
    with skewed_worker():
        counts = tasks.sweep_clocks()
    assert (counts["warnings"], counts["breaches"]) == (1, 1)
    checkpoint.refresh_from_db()
    assert checkpoint.breached_at == due  # stamped at its due time, not at the worker's clock


def test_a_skewed_sweep_pauses_only_a_workflow_silent_in_database_time(db, clocks):
    workflow = make_worked_example()
    Workflow.objects.filter(pk=workflow.pk).update(last_activity_at=database_now() - timedelta(minutes=10))
    with skewed_worker():
        assert tasks.pause_silent_workflows() == 0  # 10 of its 15 minutes: still talking, for the database
    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.RUNNING

    Workflow.objects.filter(pk=workflow.pk).update(last_activity_at=database_now() - timedelta(minutes=16))
    with skewed_worker():
        before = database_now()
        assert tasks.pause_silent_workflows() == 1
        after = database_now()
    checkpoint = Checkpoint.objects.get(workflow=workflow)
    assert before <= checkpoint.opened_at <= after  # its SLA clocks start on the shared clock too
    assert checkpoint.due_at - checkpoint.opened_at == timedelta(seconds=checkpoint.sla["decision_target"])


def test_a_skewed_sweep_fails_a_replay_only_past_its_deadline_in_database_time(runtime, olga, clocks):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    run.start()  # accepted by the runtime, results not in yet
    ReplayRun.objects.filter(pk=run.pk).update(
        deadline_at=database_now() + timedelta(minutes=5), requested_at=database_now()
    )
    with skewed_worker():
        assert tasks.settle_replays() == (0, 0)
    run.refresh_from_db()
    assert run.status == ReplayRun.Status.RUNNING

    ReplayRun.objects.filter(pk=run.pk).update(deadline_at=database_now() - timedelta(seconds=1))
    with skewed_worker():
        assert tasks.settle_replays() == (1, 0)
    run.refresh_from_db()
    assert run.status == ReplayRun.Status.FAILED


def test_a_skewed_workers_delivery_stamps_the_workflows_last_activity_at_database_time(decision, clocks):
    with skewed_worker():
        before = database_now()
        assert tasks.deliver_decision(decision.pk) == "delivered"
        after = database_now()
    decision.refresh_from_db()
    workflow = Workflow.objects.get(pk=decision.checkpoint.workflow_id)
    assert workflow.status == Workflow.Status.RUNNING
    # Silence is measured from here: 10 minutes ahead, the workflow would look alive 10 minutes too long.
    assert before <= workflow.last_activity_at <= after
    assert before <= decision.finished_at <= after


def test_a_skewed_rollers_watermark_is_the_database_time(db):
    for roll in ("the first (rebuild)", "the next (recent)"):
        with skewed_worker():
            before = database_now()
            tasks.roll_figures()
            after = database_now()
        # Activity after the watermark is rolled again; 10 minutes ahead, it would skip what came meanwhile.
        rolled_since = RollupState.objects.get().rolled_since
        assert before - rollups.IN_FLIGHT <= rolled_since <= after - rollups.IN_FLIGHT, roll


def test_the_periodic_sweep_on_a_skewed_worker_changes_nothing_that_is_not_due(decision, receiver):
    assert decision.start_attempt()  # an honest worker is delivering it
    checkpoint = make_checkpoint()
    running = make_worked_example()
    now = database_now()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        warn_at=now + timedelta(minutes=5), due_at=now + timedelta(minutes=8)
    )
    Workflow.objects.filter(pk=running.pk).update(last_activity_at=now - timedelta(minutes=10))
    with skewed_worker():
        result = tasks.sweep()
    assert (result["relayed"], result["reclaimed"], result["silent"], result["replays"], result["notifications"]) == (
        0,
        0,
        0,
        (0, 0),
        0,
    )
    assert result["sla"] == dict.fromkeys(result["sla"], 0)
    decision.refresh_from_db()
    assert decision.status == Decision.Status.RUNNING and decision.attempts == 1
    assert receiver.deliveries == []
