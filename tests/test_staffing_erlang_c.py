"""The staffing budget's queueing model, checked against published Erlang C values, and the budget on a history."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.recovery_histories import build_history
from workflows import metrics, staffing


@pytest.mark.parametrize(
    ("agents", "erlangs", "published"),
    [
        # M/M/c textbook value (Gross & Harris, Fundamentals of Queueing Theory): c = 3, a = 2 -> 4/9.
        (3, 2.0, 4 / 9),
        # Read off the Erlang C curve in the classic exercise "120 customers an hour, 3 minutes each,
        # 10 assistants": the probability of waiting is "about 0.10".
        (10, 6.0, 0.1013),
        # Call Centre Helper, "Erlang C Formula – Made Simple": 10 erlangs on 11 agents -> Pw = 68.21 %.
        (11, 10.0, 0.6821),
    ],
)
def test_the_probability_of_waiting_matches_published_tables(agents, erlangs, published):
    assert staffing.erlang_c(agents, erlangs) == pytest.approx(published, abs=5e-4)


def test_the_worked_staffing_examples_need_the_published_head_counts():
    # Call Centre Helper: 200 calls an hour (100 per half hour), 180 s handling, 80 % in 20 s -> 14 agents.
    assert staffing.agents_needed(200, 180, 20, level=0.8) == 14
    assert staffing.service_level(14, 10.0, 180, 20) == pytest.approx(0.888, abs=1e-3)
    # Wolfram ErlangC application: 30 calls an hour, 5 minutes each, 90 % not delayed at all -> 6 people.
    assert staffing.agents_needed(30, 300, 0, level=0.9) == 6


def test_an_overloaded_or_idle_queue_is_handled_at_the_edges():
    assert staffing.erlang_c(5, 5.0) == 1.0 and staffing.service_level(5, 5.0, 60, 60) == 0.0
    assert staffing.erlang_c(5, 0.0) == 0.0 and staffing.agents_needed(0, 60, 60) == 0
    assert staffing.agents_needed(3600, 1, 60) >= 2  # one erlang needs more than one operator


@pytest.mark.django_db
def test_the_budget_counts_recorded_arrivals_handling_and_the_operators_who_worked(alice, bob, adam):
    build_history(operator=alice, other=bob, owner=adam)
    filters = metrics.Filters.last(7)
    budget = staffing.budget(filters)
    now = timezone.now()
    cell = budget.cells[now.weekday()][now.hour]
    # Seven checkpoints opened this hour (every case but the blank failure), once in a 7-day period.
    assert cell.arrivals_per_hour == pytest.approx(7.0)
    assert budget.handled == 6 and budget.handle_seconds is not None and budget.handle_seconds >= 0
    assert cell.worked == pytest.approx(1.0)  # alice did all the claiming and deciding
    assert cell.needed >= 1
    assert cell.under_staffed == (cell.worked < cell.needed)
    # The runbook's policy (15-minute decision target) for model timeouts, the 30-minute default for the rest.
    policies = {p.name: (p.decision_target, p.arrivals) for p in budget.policies}
    assert policies.pop("default (no policy)") == (1800, 4)
    assert list(policies.values()) == [(900, 3)]
    assert sum(c.arrivals_per_hour for row in budget.cells for c in row) == pytest.approx(7.0)


@pytest.mark.django_db
@pytest.mark.parametrize("open_now", [True, False])
def test_hours_outside_a_policys_business_calendar_need_no_operator_for_it(alice, open_now):
    from tests.apitools import api_agent
    from tests.helpers import make_runbook
    from tests.recovery_histories import Fleet
    from workflows.models import BusinessCalendar, SLAPolicy

    now = timezone.now()
    # Open all day on today's weekday only, or all day on another weekday only.
    weekday = now.weekday() if open_now else (now.weekday() + 3) % 7
    calendar = BusinessCalendar.objects.create(
        name="office", time_zone="UTC", weekdays=[weekday], opens="00:00", closes="00:00"
    )
    policy = SLAPolicy.objects.create(name="office hours", decision_target_minutes=30, calendar=calendar)
    make_runbook(slug="refund-office", workflow_kind="refund", reason="model_timeout", policy=policy)
    fleet = Fleet(api_agent("office-bot"), alice)
    for n in range(3):
        fleet.decide(fleet.pause(fleet.start(f"office-{n}")))
    budget = staffing.budget(metrics.Filters.last(7))
    cell = budget.cells[now.weekday()][now.hour]
    assert cell.arrivals_per_hour == pytest.approx(3.0)  # they arrived either way
    [office] = budget.policies
    calendar.refresh_from_db()
    assert office.calendar == calendar.describe()
    if open_now:
        assert cell.needed >= 1 and office.peak_needed == cell.needed
    else:  # the clock waits for the calendar: nobody is needed for it now, and the hour is not under-staffed
        assert cell.needed == 0 and not cell.under_staffed and office.peak_needed == 0
        assert (now.weekday(), now.hour) not in budget.under_staffed
