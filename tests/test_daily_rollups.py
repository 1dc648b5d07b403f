"""The daily rollups behind the resume dashboard and readiness: the same figures as the live definitions.

Histories are built through the API and decisions (tests/recovery_histories.py); the rollups are
rolled by the beat task or the rebuild command, then every figure read from them is compared with
``workflows.metrics`` computing it from every row, for the same period and filters.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from tests.apitools import api_agent
from tests.helpers import squeezed
from tests.recovery_histories import Fleet, build_history
from workflows import metrics, readiness, rollups, sla_figures, tasks, timings, trends
from workflows.models import DailyRollup, RollupState
from workflows.rollups import rolling

pytestmark = pytest.mark.django_db

FILTERS: list[dict[str, Any]] = [
    {},
    {"reason": "model_timeout"},
    {"reason": "provider_change"},
    {"agent": "support-bot"},
    {"kind": "refund"},
    {"runbook": "refund-model-timeout"},
    {"reason": "model_timeout", "runbook": "refund-model-timeout"},
    {"agent": "nobody"},
]


@pytest.fixture(autouse=True)
def nothing_in_flight(monkeypatch):
    # A roll normally looks back two minutes for transactions still open when it started; a test's
    # whole history is younger than that, and would read as touched (live) for ever.
    monkeypatch.setattr(rolling, "IN_FLIGHT", timedelta(0))


@pytest.fixture
def history(alice, bob, adam):
    return build_history(operator=alice, other=bob, owner=adam)


def stored_rows() -> set[tuple]:
    return {
        (
            r.day,
            r.agent,
            r.kind,
            r.reason,
            r.runbook,
            tuple(sorted(r.counts.items())),
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in r.timings.items())),
        )
        for r in DailyRollup.objects.all()
    }


def close(approx: float | None, exact: float | None) -> bool:
    if exact is None:
        return approx is None
    return approx is not None and abs(approx - exact) <= 0.0101 * exact + rollups.BUCKET_FLOOR


def assert_same_figures(filters: metrics.Filters) -> None:
    rolled = rollups.Figures(filters)
    live, mine = metrics.summary(filters), rolled.summary()
    assert mine.counts == live.counts, filters
    assert (mine.launches, mine.resumes) == (live.launches, live.resumes), filters
    assert {s: (v.part, v.whole) for s, v in mine.shares.items()} == {
        s: (v.part, v.whole) for s, v in live.shares.items()
    }
    for grain in metrics.GRANULARITIES:
        assert rolled.series(grain) == trends.series(filters, grain), (filters, grain)
    for dimension in metrics.DIMENSIONS:
        assert [
            (r.value, r.filters, r.degraded, {s: (v.part, v.whole) for s, v in r.shares.items()})
            for r in rolled.breakdown(dimension)
        ] == [
            (r.value, r.filters, r.degraded, {s: (v.part, v.whole) for s, v in r.shares.items()})
            for r in trends.breakdown(filters, dimension)
        ], (filters, dimension)
    assert rolled.breach_rate() == sla_figures.breach_rate(filters)
    assert rolled.decisions_by_action_and_outcome() == sla_figures.decisions_by_action_and_outcome(filters)
    for approx, exact in zip(
        rolled.timings(),
        (
            timings.time_to_claim(filters),
            timings.time_to_decision(filters),
            timings.interruption_to_completion(filters),
        ),
        strict=True,
    ):
        assert approx.label == exact.label and approx.count == exact.count
        assert close(approx.median, exact.median) and close(approx.p90, exact.p90), (approx, exact)
    # Drill-down: the rollups' count of each set is the number of workflows the live list holds.
    for figure in metrics.SETS:
        assert mine.counts[figure] == metrics.workflows_behind(filters, figure).count(), (filters, figure)


def test_rolled_figures_equal_the_live_definitions_for_every_filter(history):
    tasks.roll_figures()
    today = metrics.Filters.last()
    assert rollups.live_days(today.start, today.end) == set()  # every day is read from the rollups
    assert DailyRollup.objects.filter(day=today.end).exists()
    for narrowed in FILTERS:
        assert_same_figures(metrics.Filters.last(**narrowed))
    assert_same_figures(metrics.Filters.last(7))
    assert_same_figures(metrics.Filters.last().previous())


def test_readiness_from_the_rollups_equals_readiness_computed_live(history):
    tasks.roll_figures()
    narrowings: list[dict[str, Any]] = [{}, {"kind": "refund"}, {"reason": "model_timeout"}, {"agent": "nobody"}]
    for narrowed in narrowings:
        filters = metrics.Filters.last(**narrowed)
        rolled, live = readiness.review(filters), readiness.review(filters, live=True)
        assert [r.kind for r in rolled] == [r.kind for r in live]
        for a, b in zip(rolled, live, strict=True):
            assert (
                a.launched,
                a.degraded,
                a.interruptions,
                a.effects,
                a.tool_outputs,
                a.verified_outputs,
                a.promises,
                a.counts,
            ) == (
                b.launched,
                b.degraded,
                b.interruptions,
                b.effects,
                b.tool_outputs,
                b.verified_outputs,
                b.promises,
                b.counts,
            )
            assert [(s.reason, s.checkpoints, s.runbook) for s in a.reasons] == [
                (s.reason, s.checkpoints, s.runbook) for s in b.reasons
            ]
            assert close(a.median_decision_seconds, b.median_decision_seconds)
            assert (a.findings, a.verdict) == (b.findings, b.verdict)


def test_rolling_a_day_twice_gives_the_same_rows(history):
    today = metrics.Filters.last().end
    rollups.roll_day(today)
    first = stored_rows()
    assert first
    rollups.roll_day(today)
    assert stored_rows() == first
    call_command("rebuild_rollups", "--quiet", stdout=io.StringIO())
    assert stored_rows() == first


def test_a_late_completion_is_rolled_again_by_the_beat_task(alice):
    fleet = Fleet(api_agent("late-bot"), alice)
    wf = fleet.start("late")
    checkpoint = fleet.pause(wf)
    tasks.roll_figures()
    filters = metrics.Filters.last()
    day = checkpoint.opened_at.date()

    def stored(name: str) -> int:
        return DailyRollup.objects.get(day=day, agent="late-bot", kind="refund", reason="*", runbook="*").counts.get(
            name, 0
        )

    assert stored("in_flight") == 1 and stored("completed_after_interruption:met") == 0
    # The resume completes after its day was rolled: the page computes that day live until the next roll.
    fleet.decide(checkpoint)
    fleet.complete(wf)
    assert day in rollups.live_days(filters.start, filters.end)
    assert rollups.Figures(filters).summary().counts["completed_after_interruption:met"] == 1
    assert stored("completed_after_interruption:met") == 0  # the stored row is stale ...
    assert tasks.roll_figures() >= 1  # ... until the beat re-rolls the touched day
    assert stored("completed_after_interruption:met") == 1 and stored("in_flight") == 0
    assert rollups.live_days(filters.start, filters.end) == set()
    assert_same_figures(filters)


def test_the_beat_rolls_the_figures_every_minute_by_default():
    entry = settings.CELERY_BEAT_SCHEDULE["roll-figures"]
    assert entry["task"] == "workflows.tasks.roll_figures"
    assert entry["schedule"] == settings.ROLLUP_INTERVAL_SECONDS == 60


def test_the_rebuild_command_rolls_a_range_and_refuses_a_bad_one(history):
    from django.core.management.base import CommandError

    out = io.StringIO()
    call_command("rebuild_rollups", stdout=out)
    today = metrics.Filters.last().end
    assert f"{today}:" in out.getvalue() and "rolled" in out.getvalue()
    state = RollupState.objects.get()
    assert state.last_day == today and state.first_day <= today
    DailyRollup.objects.filter(day=today).delete()
    call_command(
        "rebuild_rollups", "--start", today.isoformat(), "--end", today.isoformat(), "--quiet", stdout=io.StringIO()
    )
    assert DailyRollup.objects.filter(day=today).exists()
    assert_same_figures(metrics.Filters.last())
    with pytest.raises(CommandError, match="not a date"):
        call_command("rebuild_rollups", "--start", "yesterday")
    with pytest.raises(CommandError, match="after"):
        call_command("rebuild_rollups", "--start", "2026-02-02", "--end", "2026-02-01")


def test_days_never_rolled_are_computed_live_and_agree(history):
    assert not RollupState.objects.exists()
    filters = metrics.Filters.last()
    assert rollups.live_days(filters.start, filters.end) == set(rollups.days_in(filters.start, filters.end))
    assert_same_figures(filters)


def test_the_dashboard_and_a_drill_down_read_the_rollups(history, tess):
    tasks.roll_figures()
    client = Client()
    client.force_login(tess)
    page = squeezed(client.get("/resumes/").content.decode())
    assert "1 of 7" in page and "4</a> of 5" in page
    drill = squeezed(client.get("/resumes/workflows/?figure=lost_effect").content.decode())
    assert drill.count('data-testid="drill-row"') == 2 and "2 workflows" in drill
    ready = squeezed(client.get("/readiness/").content.decode())
    assert "`refund`: no runbook for reason `provider_change`" in ready


def test_histogram_buckets_are_within_one_percent():
    for seconds in (0.0, 0.0005, 0.002, 1.0, 59.9, 3600.0, 86_400 * 30.0):
        value = rollups.bucket_value(rollups.bucket_of(seconds))
        assert abs(value - seconds) <= 0.01 * seconds + rollups.BUCKET_FLOOR
    timing = rollups.ApproxTiming("t", {rollups.bucket_of(s): 1 for s in (10.0, 20.0, 30.0, 40.0)})
    assert timing.count == 4
    assert close(timing.median, 25.0) and close(timing.p90, 40.0)


@pytest.mark.postgres
def test_while_one_worker_rolls_the_figures_another_leaves_it_to_the_next_tick(history):
    import psycopg

    from tests.stack import database_url

    with psycopg.connect(database_url(), autocommit=True) as other_worker:  # a roll in progress elsewhere
        other_worker.execute("SELECT pg_advisory_lock(%s)", [rollups.ROLL_LOCK])
        assert tasks.roll_figures() == 0
        assert not DailyRollup.objects.exists() and not RollupState.objects.exists()
        other_worker.execute("SELECT pg_advisory_unlock(%s)", [rollups.ROLL_LOCK])
    assert tasks.roll_figures() >= 1
    assert DailyRollup.objects.exists()
    with psycopg.connect(database_url(), autocommit=True) as other_worker:  # this roll let the lock go
        assert other_worker.execute("SELECT pg_try_advisory_lock(%s)", [rollups.ROLL_LOCK]).fetchone()[0]
