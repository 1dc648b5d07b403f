"""The incident figures on the resume dashboard and at /metrics: how many incidents, their time to recover
(median and p90), and the share of checkpoints that arrived inside one — one definition
(workflows/incident_figures.py) read by both, on seeded data."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_worked_example, squeezed
from workflows import incident_figures, metrics
from workflows.models import Checkpoint, Decider, Incident

pytestmark = pytest.mark.django_db


def _incident(agent_name, n, *, recover_after=None, by):
    """``n`` members of one signature; with ``recover_after`` minutes, every member is decided (abort) and
    resolved that long after the first arrival."""
    agent = make_agent(agent_name)[0]
    agent.incident_threshold = n
    agent.save()
    members = [
        make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail=f"502 for T-{i}")
        for i in range(n)
    ]
    incident = Incident.objects.get(agent=agent)
    if recover_after is not None:
        for c in members:
            decider = Decider(c)
            decider.record(decider.draft(action="abort"), by=by)
            decision = c.decisions.get()
            assert decision.start_attempt() and decision.mark_succeeded()
        first = min(c.opened_at for c in members)
        Checkpoint.objects.filter(pk=members[-1].pk).update(resolved_at=first + timedelta(minutes=recover_after))
        Checkpoint.objects.filter(pk__in=[c.pk for c in members[:-1]]).update(resolved_at=first + timedelta(minutes=1))
    return incident


@pytest.fixture
def seeded(alice):
    quick = _incident("quick-bot", 3, recover_after=10, by=alice)
    slow = _incident("slow-bot", 3, recover_after=40, by=alice)
    open_one = _incident("open-bot", 2, by=alice)
    for _ in range(4):  # alone: no incident
        make_checkpoint()
    # A merged incident is counted once, in the incident it joined.
    extra = _incident("merge-bot", 2, by=alice)
    assert open_one.merge(extra, by=alice)
    return quick, slow, open_one


def test_the_figures_count_incidents_their_recovery_and_the_work_inside_them(seeded):
    figures = incident_figures.figures(metrics.Filters.last(7))
    assert figures.incidents == 3 and figures.recovered == 2
    assert figures.time_to_recover.median == 25 * 60  # halfway between 10 and 40 minutes
    assert figures.time_to_recover.p90 == 40 * 60
    assert (figures.inside, figures.checkpoints) == (10, 14)
    only_quick = incident_figures.figures(metrics.Filters.last(7, agent="quick-bot"))
    assert only_quick.incidents == 1 and only_quick.time_to_recover.median == 10 * 60
    assert (only_quick.inside, only_quick.checkpoints) == (3, 3)
    last_year = incident_figures.figures(metrics.Filters.last(7, today=timezone.now().date() - timedelta(days=365)))
    assert last_year.incidents == 0 and last_year.inside_share is None


def test_the_runbook_and_team_filters_narrow_incidents_by_their_members(seeded, tess):
    from workflows.models import Team

    quick, slow, _ = seeded
    refunds, pager = make_runbook(slug="refunds"), make_runbook(slug="pager")
    payments = Team.objects.create(name="Payments", slug="payments")
    Checkpoint.objects.filter(incident=quick).update(runbook=refunds)
    Checkpoint.objects.filter(pk=slow.members.order_by("pk").first().pk).update(runbook=refunds, team=payments)
    Checkpoint.objects.filter(incident__isnull=True).update(runbook=pager)

    refund_figures = incident_figures.figures(metrics.Filters.last(7, runbook="refunds"))
    assert refund_figures.incidents == 2 and refund_figures.recovered == 2  # one member is enough
    assert (refund_figures.inside, refund_figures.checkpoints) == (4, 4)
    pager_figures = incident_figures.figures(metrics.Filters.last(7, runbook="pager"))
    assert pager_figures.incidents == 0 and (pager_figures.inside, pager_figures.checkpoints) == (0, 4)
    team_figures = incident_figures.figures(metrics.Filters.last(7, team="payments"))
    assert team_figures.incidents == 1 and team_figures.time_to_recover.median == 40 * 60
    assert incident_figures.figures(metrics.Filters.last(7, runbook="refunds", team="payments")).incidents == 1

    client = Client()
    client.force_login(tess)
    page = squeezed(client.get(reverse("resumes") + "?runbook=pager").content.decode())
    assert 'data-testid="incident-count">0</td>' in page


def test_the_resume_dashboard_shows_them(seeded, tess):
    client = Client()
    client.force_login(tess)
    page = squeezed(client.get(reverse("resumes")).content.decode())
    assert 'data-testid="incident-count">3</td>' in page and "2 recovered" in page
    assert 'data-testid="incident-ttr-median">median 25m' in page
    assert 'data-testid="incident-ttr-p90">p90 40m' in page
    assert "10 / 14" in page


def test_metrics_exports_them(seeded, settings):
    settings.METRICS_TOKEN = "scrape-token-for-tests"
    settings.METRICS_ALLOWED_IPS = []
    settings.METRICS_CACHE_SECONDS = 0
    response = Client().get("/metrics", headers={"Authorization": "Bearer scrape-token-for-tests"})
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }
    assert samples[("recovery_incidents_opened_total", ())] == 4  # the merged one too: a counter
    assert samples[("recovery_incidents", (("status", "open"),))] == 3
    assert samples[("recovery_incidents", (("status", "resolved"),))] == 0
    assert samples[("recovery_incidents_in_period", ())] == 3
    assert samples[("recovery_incident_time_to_recover_seconds", (("stat", "median"),))] == 1500
    assert samples[("recovery_incident_time_to_recover_seconds", (("stat", "p90"),))] == 2400
    assert samples[("recovery_incident_time_to_recover_seconds", (("stat", "count"),))] == 2
    assert samples[("recovery_checkpoints_in_incidents_share", ())] == pytest.approx(10 / 14)
