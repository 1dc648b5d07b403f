"""Readiness per workflow kind shows its last recovery drill's verdict and when it ran; no drill in 30 days
is a finding (issue 26, item 5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.apitools import api_agent
from tests.recovery_histories import Fleet
from workflows import metrics, readiness
from workflows.models import Drill

pytestmark = pytest.mark.django_db

NO_DRILL = "`refund`: no recovery drill in 30 days"


def findings(kind: readiness.KindReadiness) -> list[str]:
    return [f.text for f in kind.findings]


def test_a_kind_never_drilled_has_the_finding_and_a_drilled_one_shows_its_last_verdict(alice, tess):
    fleet = Fleet(api_agent("support-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    fleet.start("prod-1")  # production: readiness reads it
    [kind] = readiness.review(metrics.Filters.last(7), live=True)
    assert kind.last_drill is None and f"{NO_DRILL} (never drilled)" in findings(kind)

    drill = Drill.objects.create(
        agent=fleet.api.agent, name="crash after the refund", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=3, runs=1
    )
    drill.start()
    wf = fleet.start("drill-1")
    fleet.decide(fleet.pause(wf))
    fleet.complete(wf)

    for live in (True, False):  # the live definition and the rollups' review say the same
        [kind] = readiness.review(metrics.Filters.last(7), live=live)
        assert kind.last_drill is not None and kind.last_drill.drill_id == drill.pk
        assert kind.last_drill.verdict == "passed"
        assert not any(text.startswith(NO_DRILL) for text in findings(kind))
    client = Client()
    client.force_login(tess)
    page = " ".join(client.get("/readiness/").content.decode().split())
    assert 'data-testid="last-drill">Last drill: <a href="/drills/' in page and ">passed</span>" in page


def test_a_drill_older_than_30_days_is_a_finding_again(alice):
    fleet = Fleet(api_agent("support-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    fleet.start("prod-1")
    drill = Drill.objects.create(agent=fleet.api.agent, name="old", kind="refund", fault=Drill.Fault.FAILOVER, runs=1)
    drill.start()
    Drill.objects.filter(pk=drill.pk).update(started_at=timezone.now() - timedelta(days=31))
    [kind] = readiness.review(metrics.Filters.last(7), live=True)
    assert kind.last_drill is not None and kind.last_drill.verdict == "failed"  # nobody took part
    [finding] = [t for t in findings(kind) if t.startswith(NO_DRILL)]
    assert "(the last started" in finding
