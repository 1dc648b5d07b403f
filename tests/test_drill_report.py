"""The drill report scores a drill's runs with the resume dashboard's definitions (issue 26)."""

from __future__ import annotations

import csv
import io

import pytest
from django.http import StreamingHttpResponse
from django.test import Client

from tests.apitools import api_agent
from tests.recovery_histories import Fleet, build_history
from workflows import drill_report, metrics
from workflows.models import Drill, Workflow

pytestmark = pytest.mark.django_db


def drill_on(agent, **kwargs) -> Drill:
    return Drill.objects.create(
        agent=agent,
        name=kwargs.pop("name", "crash after the refund"),
        fault=Drill.Fault.CRASH_AFTER_STEP,
        at_seq=3,
        runs=10,
        **kwargs,
    )


def test_the_reports_shares_equal_the_dashboards_definitions_on_seeded_data(alice, bob, adam):
    build_history(operator=alice, other=bob, owner=adam)
    production = metrics.summary(metrics.Filters.last(7))
    drill = drill_on(Workflow.objects.first().agent)
    Workflow.objects.update(drill=drill)  # the same runs, now as a drill's
    report = drill_report.score(drill)
    assert {s: (v.part, v.whole) for s, v in report.summary.shares.items()} == {
        s: (v.part, v.whole) for s, v in production.shares.items()
    }
    assert report.summary.counts == production.counts
    assert metrics.summary(metrics.Filters.last(7)).counts["degraded"] == 0  # gone from production
    by_id = {r.external_id: r for r in report.runs}
    assert by_id["lost-refund"].lost_effect and by_id["lost-promise"].lost_effect
    assert by_id["duplicate"].repeated_effect and not by_id["duplicate"].lost_effect
    assert by_id["blank"].blank_failure
    assert not by_id["clean"].lost_effect and not by_id["clean"].repeated_effect
    assert report.verdict == drill_report.FAILED
    text = " ".join(report.reasons)
    assert "blank" in text and "lost an effect" in text and "repeated an effect" in text
    assert "waiting (workflow" in text and "still in flight" in text


def scored_fleet(alice, *runs: str) -> tuple[Drill, Fleet]:
    """A sandboxed agent under a started drill; runs named done-* are decided and completed, others wait."""
    fleet = Fleet(api_agent("drilled-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    drill = drill_on(fleet.api.agent)
    drill.start()
    for ext in runs:
        wf = fleet.start(ext)
        checkpoint = fleet.pause(wf)
        if ext.startswith("done"):
            fleet.decide(checkpoint)
            fleet.complete(wf)
    return drill, fleet


def test_a_drill_whose_runs_came_back_intact_in_time_passed(alice):
    drill, _fleet = scored_fleet(alice, "done-1", "done-2")
    report = drill_report.score(drill)
    assert report.verdict == drill_report.PASSED
    assert [r.status for r in report.runs] == ["completed", "completed"]
    run = report.runs[0]
    assert run.to_checkpoint is not None and run.to_checkpoint >= 0
    assert run.to_claim is not None and run.to_decision is not None and run.to_completion is not None
    assert report.summary["resumed_without_data_loss"].part == 2


def test_a_run_still_waiting_or_a_breach_reads_passed_with_gaps(alice):
    drill, _fleet = scored_fleet(alice, "done-1", "waiting-1")
    report = drill_report.score(drill)
    assert report.verdict == drill_report.GAPS
    assert any("waiting-1" in r and "in flight" in r for r in report.reasons)


def test_a_drill_nobody_took_part_in_failed():
    agent = api_agent("idle-bot").agent
    report = drill_report.score(drill_on(agent))
    assert report.verdict == drill_report.FAILED and "No run took part" in report.reasons[0]


def test_the_report_page_and_its_csv_and_markdown_exports(alice, tess):
    drill, _fleet = scored_fleet(alice, "done-1")
    Workflow.objects.filter(drill=drill).update(external_id="=HYPERLINK(1)|x")  # agent text reaches the files
    client = Client()
    client.force_login(tess)
    page = client.get(f"/drills/{drill.pk}/report/")
    assert page.status_code == 200 and 'data-testid="verdict">passed<' in page.content.decode()
    exported = client.get(f"/drills/{drill.pk}/report/", {"format": "csv"})
    assert isinstance(exported, StreamingHttpResponse)
    rows = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert rows[0] == drill_report.CSV_HEADER
    assert rows[1][1] == "'=HYPERLINK(1)|x"  # the one exporter's formula guard
    assert ["verdict", "passed"] in rows
    md = client.get(f"/drills/{drill.pk}/report/", {"format": "md"})
    assert md["Content-Type"].startswith("text/markdown")
    text = md.content.decode()
    assert "**Verdict: passed**" in text and "\\=HYPERLINK(1)\\|x" not in text and "=HYPERLINK(1)\\|x" in text
    assert Client().get(f"/drills/{drill.pk}/report/").status_code == 302  # to the login page


def test_operators_may_not_read_define_or_start_drills(alice):
    client = Client()
    client.force_login(alice)
    assert client.get("/drills/").status_code == 403
    drill = drill_on(api_agent("x-bot").agent)
    assert client.post(f"/drills/{drill.pk}/start/").status_code == 403
    assert client.get(f"/drills/{drill.pk}/report/").status_code == 403


def test_a_tpm_defines_and_starts_a_drill_and_a_refused_definition_says_why(tess):
    agent = api_agent("support-bot").agent
    client = Client()
    client.force_login(tess)
    fields = {
        "name": "Tuesday crash",
        "agent": agent.pk,
        "kind": "",
        "fault": "crash_after_step",
        "at_seq": 2,
        "silent_minutes": 10,
        "runs": 3,
        "share_percent": "",
        "window_minutes": 60,
        "announced": "on",
    }
    refused = client.post("/drills/", fields)
    assert refused.status_code == 422
    assert "does not advertise drill support" in refused.content.decode()
    agent.advertise(["drill"])
    assert client.post("/drills/", fields).status_code == 302
    drill = Drill.objects.get(name="Tuesday crash")
    assert drill.created_by == tess and drill.status == Drill.Status.DRAFT
    assert client.post(f"/drills/{drill.pk}/start/").status_code == 302
    drill.refresh_from_db()
    assert drill.status == Drill.Status.RUNNING
    again = client.post(f"/drills/{drill.pk}/start/", follow=True)
    assert "was not started again" in again.content.decode()
    assert client.post(f"/drills/{drill.pk}/end/").status_code == 302
    drill.refresh_from_db()
    assert drill.status == Drill.Status.ENDED
    assert "Tuesday crash" in client.get("/drills/").content.decode()
