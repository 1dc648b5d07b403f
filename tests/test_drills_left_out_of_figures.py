"""Drilled workflows are kept apart from production figures: every page and figure leaves them out by
default, and the ``drills`` filter includes them (issue 26). The rule is written once, metrics.in_scope."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import make_agent, make_checkpoint, make_worked_example
from workflows import metrics, readiness, rollups, sla_figures, staffing, timings
from workflows.models import Checkpoint, Drill, Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(alice):
    """One production run and one drilled run of the same agent and kind, each degraded, breached, completed."""
    agent, _ = make_agent("support-bot")
    agent.advertise(["drill", "drill_sandbox"])
    drill = Drill.objects.create(agent=agent, name="crash", fault=Drill.Fault.CRASH_AFTER_STEP, runs=1)
    runs = {}
    for label in ("PRODUCTION-RUN", "DRILLED-RUN"):
        workflow = make_worked_example(agent=agent, owner=alice)
        Workflow.objects.filter(pk=workflow.pk).update(title=label)
        checkpoint = make_checkpoint(workflow)
        Checkpoint.objects.filter(pk=checkpoint.pk).update(breached_at=timezone.now())
        runs[label] = workflow
    Workflow.objects.filter(pk=runs["DRILLED-RUN"].pk).update(drill=drill)
    return drill, runs


def period(**kwargs) -> metrics.Filters:
    return metrics.Filters.last(7, **kwargs)


def test_the_figures_count_production_only_unless_the_filter_includes_drills(fleet):
    drill, _runs = fleet
    assert metrics.summary(period()).counts["degraded"] == 1
    assert metrics.summary(period(drills="include")).counts["degraded"] == 2
    assert metrics.summary(period(drills=str(drill.pk))).counts["degraded"] == 1
    assert metrics.launched(period()).count() == 1
    assert timings.opened_checkpoints(period()).count() == 1
    assert sla_figures.breach_rate(period()).opened == 1


def test_the_dashboards_rollups_and_drill_down_leave_drills_out(fleet, tess):
    assert rollups.Figures(period()).summary().counts["degraded"] == 1
    assert rollups.Figures(period(drills="include")).summary().counts["degraded"] == 2
    rollups.roll_recent()  # stored rollups hold production figures; the filter is computed live
    assert rollups.Figures(period()).summary().counts["degraded"] == 1
    assert rollups.Figures(period(drills="include")).summary().counts["degraded"] == 2
    client = Client()
    client.force_login(tess)
    page = client.get("/resumes/workflows/", {"figure": "degraded"}).content.decode()
    assert "PRODUCTION-RUN" in page and "DRILLED-RUN" not in page
    page = client.get("/resumes/workflows/", {"figure": "degraded", "drills": "include"}).content.decode()
    assert "PRODUCTION-RUN" in page and "DRILLED-RUN" in page
    dashboard = client.get("/resumes/", {"drills": "include"})
    assert dashboard.status_code == 200
    assert 'value="include" selected' in dashboard.content.decode()


def test_readiness_leaves_drills_out(fleet, tess):
    [kind] = readiness.review(period(), live=True)
    assert kind.degraded == 1 and kind.launched == 1
    [kind] = readiness.review(period(drills="include"), live=True)
    assert kind.degraded == 2 and kind.launched == 2
    [rolled] = readiness.review(period())
    assert rolled.degraded == 1
    client = Client()
    client.force_login(tess)
    assert client.get("/readiness/", {"drills": "include"}).status_code == 200


def test_the_breach_review_leaves_drills_out(fleet, tess):
    client = Client()
    client.force_login(tess)
    page = client.get("/breaches/").content.decode()
    assert "PRODUCTION-RUN" in page and "DRILLED-RUN" not in page
    page = client.get("/breaches/", {"drills": "include"}).content.decode()
    assert "PRODUCTION-RUN" in page and "DRILLED-RUN" in page
    exported = client.get("/breaches/", {"format": "csv"})
    assert isinstance(exported, StreamingHttpResponse)
    export = b"".join(exported.streaming_content).decode()
    assert "PRODUCTION-RUN" in export and "DRILLED-RUN" not in export


def test_staffing_counts_production_arrivals_only(fleet):
    arrivals = sum(c.arrivals_per_hour for row in staffing.budget(period()).cells for c in row)
    with_drills = sum(c.arrivals_per_hour for row in staffing.budget(period(drills="include")).cells for c in row)
    assert arrivals == pytest.approx(1.0) and with_drills == pytest.approx(2.0)


def test_metrics_endpoint_leaves_drills_out(fleet, settings):
    settings.METRICS_TOKEN = "scrape-token-for-tests"
    settings.METRICS_ALLOWED_IPS = []
    settings.METRICS_CACHE_SECONDS = 0
    response = Client().get("/metrics", headers={"Authorization": "Bearer scrape-token-for-tests"})
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }
    assert samples[("recovery_workflows", (("status", "paused"),))] == 1
    assert samples[("recovery_open_checkpoints", (("reason", "model_timeout"),))] == 1
    assert samples[("recovery_sla_breaches_total", ())] == 1
    assert samples[("recovery_launches_total", ())] == 1


def test_a_bad_drills_value_falls_back_to_production(fleet):
    filters = metrics.Filters.from_query({"drills": "1; DROP TABLE"})
    assert filters.drills == ""
    assert metrics.Filters.from_query({"drills": "include"}).as_query()["drills"] == "include"
    assert metrics.summary(replace(filters, start=timezone.now().date() - timedelta(days=6))).counts["degraded"] == 1
