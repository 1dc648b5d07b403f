"""The staffing budget's queueing model, checked against published Erlang C values, and the budget on a history."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.recovery_histories import build_history
from workflows import metrics, staffing


@pytest.mark.parametrize(("agents", "erlangs", "published"), [
    # M/M/c textbook value (Gross & Harris, Fundamentals of Queueing Theory): c = 3, a = 2 -> 4/9.
    (3, 2.0, 4 / 9),
    # Read off the Erlang C curve in the classic exercise "120 customers an hour, 3 minutes each,
    # 10 assistants": the probability of waiting is "about 0.10".
    (10, 6.0, 0.1013),
    # Call Centre Helper, "Erlang C Formula – Made Simple": 10 erlangs on 11 agents -> Pw = 68.21 %.
    (11, 10.0, 0.6821),
])
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
