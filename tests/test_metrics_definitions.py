"""Each recovery figure of workflows.metrics, on a history driven through the API and decisions."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.recovery_histories import build_history
from workflows import metrics, sla_figures, timings, trends
from workflows.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(alice, bob, adam):
    started = timezone.now()
    cases = build_history(operator=alice, other=bob, owner=adam)
    return started, cases


def behind(figure: str) -> set[str]:
    return set(metrics.workflows_behind(metrics.Filters.last(), figure).values_list("external_id", flat=True))


def test_degraded_means_a_checkpoint_or_a_failure_and_straight_runs_are_launches_only(history):
    assert behind("degraded") == {
        "clean",
        "duplicate",
        "lost-refund",
        "lost-promise",
        "blank",
        "silent",
        "handoff",
        "waiting",
    }
    summary = metrics.summary(metrics.Filters.last())
    assert summary.launches == 9
    assert summary.counts["degraded"] == 8
    assert behind("launches") >= {"straight", "clean"}


def test_a_blank_state_failure_is_the_one_degradation_without_a_checkpoint(history):
    assert behind("blank_failure") == {"blank"}
    share = metrics.summary(metrics.Filters.last())["preserved_checkpoint"]
    assert (share.part, share.whole) == (7, 8)


def test_a_refused_duplicate_effect_is_recorded_and_spoils_the_resume(history):
    event = Event.objects.get(verb=Event.Verb.EFFECT_DUPLICATE_REFUSED)
    assert event.workflow.external_id == "duplicate"
    assert event.data["idempotency_key"] == "duplicate:refund" and event.data["recorded_seq"] == 3
    assert event.actor_agent.name == "support-bot"
    assert behind("duplicate_attempt") == {"duplicate"}
    assert metrics.duplicate_effect_attempts(metrics.Filters.last()).count() == 1


def test_an_unconfirmed_unknown_effect_and_an_unkept_promise_are_lost_effects(history):
    assert behind("lost_effect") == {"lost-refund", "lost-promise"}


def test_resumed_without_data_loss_counts_clean_completions_of_settled_degraded_workflows(history):
    share = metrics.summary(metrics.Filters.last())["resumed_without_data_loss"]
    assert behind("resumed") == {"clean", "duplicate", "lost-refund", "lost-promise"}
    assert behind("resumed_without_data_loss:met") == {"clean"}
    # Settled: all but "waiting" (still paused) count in the denominator.
    assert (share.part, share.whole) == (1, 7)
    assert behind("in_flight") == {"waiting"}


def test_a_handoff_to_another_operator_is_not_a_return_to_the_same_owner(history):
    share = metrics.summary(metrics.Filters.last())["same_owner"]
    assert behind("continued") == {"clean", "duplicate", "lost-refund", "lost-promise", "handoff"}
    assert behind("owner_changed") == {"handoff"}
    assert (share.part, share.whole) == (4, 5)


def test_completed_after_interruption_counts_settled_degraded_workflows_that_completed(history):
    share = metrics.summary(metrics.Filters.last())["completed_after_interruption"]
    assert behind("completed_after_interruption:missed") == {"blank", "silent"}
    assert (share.part, share.whole) == (5, 7)


def test_timings_decisions_and_breaches_come_from_the_recorded_clocks(history):
    started, _cases = history
    elapsed = (timezone.now() - started).total_seconds()
    filters = metrics.Filters.last()
    claim, decision = timings.time_to_claim(filters), timings.time_to_decision(filters)
    assert claim.count == 6 and decision.count == 6  # "waiting" is neither claimed nor decided
    assert 0 <= claim.median <= claim.p90 <= elapsed
    assert claim.median <= decision.median <= decision.p90 <= elapsed
    assert timings.interruption_to_completion(filters).count == 5
    assert sla_figures.decisions_by_action_and_outcome(filters) == {
        ("abort", "succeeded"): 1,
        ("handoff", "succeeded"): 1,
        ("resume", "succeeded"): 4,
    }
    rate = sla_figures.breach_rate(filters)
    assert (rate.breached, rate.opened) == (0, 7)  # "blank" never opened one


def test_filters_narrow_every_figure_and_the_previous_period_is_empty(history):
    by_reason = metrics.Filters.last(reason="provider_change")
    assert set(metrics.degraded(by_reason).values_list("external_id", flat=True)) == {"handoff"}
    assert metrics.summary(by_reason)["same_owner"].part == 0
    assert metrics.summary(metrics.Filters.last(agent="nobody")).counts["degraded"] == 0
    assert metrics.summary(metrics.Filters.last().previous()).counts["degraded"] == 0
    rows = {row.value: row.degraded for row in trends.breakdown(metrics.Filters.last(), "reason")}
    assert rows == {"model_timeout": 3, "tool_error": 1, "other": 1, "provider_change": 1, "rate_limit": 1}


def test_the_series_places_launches_resumes_and_degradations_on_their_day(history):
    filters = metrics.Filters.last(7)
    series = trends.series(filters, "day")
    assert len(series.buckets) == 7 and series.buckets[-1] == filters.end
    assert series.launches[-1] == 9 and sum(series.launches) == 9
    assert series.resumes[-1] == 4
    assert series.degraded[-1] == 8
    assert series.shares["preserved_checkpoint"][-1] == pytest.approx(7 / 8)
    assert series.shares["preserved_checkpoint"][0] is None  # nothing degraded that day


def test_percentiles_are_nearest_rank():
    assert timings.percentile([], 90) is None
    assert timings.percentile([5.0], 90) == 5.0
    assert timings.percentile([float(n) for n in range(1, 11)], 90) == 9.0
    assert timings.percentile([float(n) for n in range(1, 101)], 50) == 50.0


def test_filters_read_from_a_url_survive_bad_input():
    today = timezone.now().date()
    filters = metrics.Filters.from_query({"start": "not-a-date", "end": "2026-01-10", "kind": " refund "}, today=today)
    assert filters.end.isoformat() == "2026-01-10" and filters.kind == "refund"
    swapped = metrics.Filters.from_query({"start": "2026-02-10", "end": "2026-02-01"})
    assert (swapped.start.isoformat(), swapped.end.isoformat()) == ("2026-02-01", "2026-02-10")
    assert swapped.previous().end.isoformat() == "2026-01-31" and swapped.previous().days == 10


def test_a_promise_repeated_after_the_message_is_still_kept(alice):
    """An agent restarted after notifying the customer re-runs its model step: the same promise, already kept."""
    from tests.apitools import api_agent
    from tests.recovery_histories import Fleet, notify

    fleet = Fleet(api_agent("restarted-bot"), alice)
    wf = fleet.start("repeat")
    fleet.decide(fleet.pause(wf))
    fleet.api.report(wf, **notify(4, "repeat:message"))
    fleet.api.report(wf, 5, "decide_refund", "model", output={"decision": "refund"}, promise="refund within 5 days")
    fleet.api.finish(wf, "completed")
    assert behind("lost_effect") == set()
    fleet2 = Fleet(api_agent("forgetful-bot"), alice)
    wf = fleet2.start("new-promise")
    fleet2.decide(fleet2.pause(wf))
    fleet2.api.report(wf, **notify(4, "new-promise:message"))
    fleet2.api.report(wf, 5, "decide_refund", "model", output={}, promise="a voucher next week")
    fleet2.api.finish(wf, "completed")
    assert behind("lost_effect") == {"new-promise"}
