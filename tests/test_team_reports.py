"""The TPM pages per team: the staffing budget is each team's own Erlang C (its checkpoints, its members
as the operators who worked, since teams do not share operators), and the breach review filters and
breaks down by team."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_checkpoint, make_overdue_checkpoint, make_user, make_workflow
from tests.test_team_routing import make_team
from workflows import metrics, staffing, tasks
from workflows.models import RoutingRule


def _two_teams(alice, bob, *, opening=make_checkpoint):
    billing, trust = make_team("Billing", alice), make_team("Trust", bob)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    RoutingRule.objects.create(team=trust, workflow_kind="abuse")
    refunds = [opening(make_workflow(kind="refund")) for _ in range(4)]
    abuse = [opening(make_workflow(kind="abuse"))]
    for checkpoint in refunds:
        checkpoint.claim(by=alice)
    abuse[0].claim(by=bob)
    return billing, trust, refunds, abuse


@pytest.fixture
def two_teams(db, alice, bob):
    """Two teams and their checkpoints, opened now and claimed."""
    return _two_teams(alice, bob)


@pytest.fixture
def two_overdue_teams(db, alice, bob):
    """The same, opened hours ago: their deadlines have passed, so a sweep at now breaches them today or earlier."""
    return _two_teams(alice, bob, opening=make_overdue_checkpoint)


def test_each_team_gets_its_own_staffing_budget(two_teams):
    now = timezone.now()
    whole = staffing.budget(metrics.Filters.last(7))
    billing = staffing.budget(metrics.Filters.last(7, team="billing"))
    trust = staffing.budget(metrics.Filters.last(7, team="trust"))
    cell = (now.weekday(), now.hour)
    arrivals = [b.cells[cell[0]][cell[1]].arrivals_per_hour for b in (whole, billing, trust)]
    assert arrivals == [pytest.approx(5.0), pytest.approx(4.0), pytest.approx(1.0)]
    worked = [b.cells[cell[0]][cell[1]].worked for b in (whole, billing, trust)]
    assert worked == [pytest.approx(2.0), pytest.approx(1.0), pytest.approx(1.0)]  # alice in billing, bob in trust


def test_the_staffing_page_offers_and_applies_the_team(client, two_teams, tess):
    client.force_login(tess)
    page = client.get(reverse("staffing") + "?team=trust")
    assert page.status_code == 200 and b'data-testid="staffing-team"' in page.content
    assert page.context["team"].slug == "trust" and page.context["filters"].team == "trust"
    assert client.get(reverse("staffing") + "?team=<nope>").context["filters"].team == ""  # unknown: all


def test_the_breach_review_filters_and_breaks_down_by_team(client, two_overdue_teams, tess):
    _, _, refunds, abuse = two_overdue_teams
    tasks.sweep_clocks(max(c.due_at for c in [*refunds, *abuse]) + timedelta(minutes=1))  # all five breach
    client.force_login(tess)
    page = client.get(reverse("breach_review") + "?team=billing")
    assert {c.pk for c in page.context["rows"]} == {c.pk for c in refunds}
    assert {c.pk for c in client.get(reverse("breach_review") + "?team=trust").context["rows"]} == {abuse[0].pk}
    everything = client.get(reverse("breach_review"))
    assert len(everything.context["rows"]) == 5
    chart = str(everything.context["charts"]["by_team"])
    assert "billing" in chart and "trust" in chart
    assert b'data-testid="breach-team"' in everything.content


def test_a_user_outside_every_team_counts_for_no_team(two_teams):
    carol = make_user("carol")
    make_checkpoint(make_workflow(kind="refund")).claim(by=carol)
    now = timezone.now()
    billing = staffing.budget(metrics.Filters.last(7, team="billing"))
    assert billing.cells[now.weekday()][now.hour].worked == pytest.approx(1.0)  # alice only, not carol
