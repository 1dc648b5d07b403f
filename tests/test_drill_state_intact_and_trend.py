"""The drill report's "state intact" (the resume state against what the runtime journalled at the fault, sent
through PUT drill-journal) and the trend over the drills of one definition, on the page and in both exports."""

from __future__ import annotations

import csv
import io
import json
from datetime import time

import pytest
from django.http import StreamingHttpResponse
from django.test import Client

from tests.apitools import api_agent, assert_error, expect
from tests.recovery_histories import Fleet
from workflows import drill_report
from workflows.models import Drill, Event, Workflow

pytestmark = pytest.mark.django_db

HELD = {"committed": ["done-1:refund"], "pending": None, "promises": ["refund within 5 days"]}


def put(fleet: Fleet, wf: str, journal: dict):
    return fleet.api.client.put(
        f"/api/v1/workflows/{wf}/drill-journal", data=json.dumps(journal), content_type="application/json"
    )


def put_journal(fleet: Fleet, wf: str, journal: dict, status: int) -> dict:
    return expect(put(fleet, wf, journal), status)


def weekly_fleet(alice) -> tuple[Drill, Fleet]:
    fleet = Fleet(api_agent("drilled-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    definition = Drill.objects.create(
        agent=fleet.api.agent,
        name="Tuesday crash",
        fault=Drill.Fault.CRASH_AFTER_STEP,
        at_seq=3,
        runs=5,
        repeat_weekday=1,
        repeat_at=time(10),
    )
    return definition, fleet


def run_once(fleet: Fleet, ext: str, journal: dict | None) -> None:
    wf = fleet.start(ext)
    if journal is not None:
        put_journal(fleet, wf, journal, 201)
    fleet.decide(fleet.pause(wf))
    fleet.complete(wf)


def test_the_runtime_journals_once_and_only_for_a_drilled_workflow(alice):
    definition, fleet = weekly_fleet(alice)
    plain = fleet.start("plain-1")  # no drill running yet
    assert_error(put(fleet, plain, HELD), 409, "not_drilled")
    definition.start_occurrence()
    wf = fleet.start("done-1")
    assert put_journal(fleet, wf, HELD, 201)["journal"] == HELD
    again = put_journal(fleet, wf, {"committed": ["other"], "pending": None, "promises": []}, 200)
    assert again["journal"] == HELD  # the first journal stands
    assert Event.objects.filter(verb=Event.Verb.DRILL_JOURNALLED).count() == 1
    assert_error(put(fleet, wf, {"committed": "done-1:refund"}), 422, "wrong_type", "committed")
    assert Workflow.objects.get(pk=wf).drill_journal == HELD  # loses nothing


def test_a_resume_state_that_holds_the_journal_is_intact_and_one_that_misses_an_effect_fails(alice):
    definition, fleet = weekly_fleet(alice)
    occurrence = definition.start_occurrence()
    run_once(fleet, "done-1", HELD)
    run_once(
        fleet,
        "done-2",
        {
            "committed": ["done-2:refund", "done-2:voucher"],
            "pending": {"seq": 4, "name": "write_ticket_note"},
            "promises": [],
        },
    )
    run_once(fleet, "done-3", None)

    report = drill_report.score(occurrence)

    by_ext = {r.external_id: r for r in report.runs}
    assert by_ext["done-1"].state_intact is True
    assert by_ext["done-2"].state_intact is False
    assert by_ext["done-2"].state_gaps == (
        "committed effect done-2:voucher is missing",
        "the pending action (step 4, write_ticket_note) is missing",
    )
    assert by_ext["done-3"].state_intact is None and by_ext["done-3"].state_text == "not journalled"
    assert report.verdict == drill_report.FAILED
    assert any("done-2" in r and "done-2:voucher is missing" in r for r in report.reasons)


def test_the_trend_scores_each_occurrence_of_the_definition_on_the_page_and_in_the_exports(alice, tess):
    definition, fleet = weekly_fleet(alice)
    first = definition.start_occurrence()
    run_once(fleet, "done-1", HELD)
    second = definition.start_occurrence()
    run_once(fleet, "done-2", {"committed": ["done-2:voucher"], "pending": None, "promises": []})
    assert first is not None and second is not None

    report = drill_report.score(second)
    assert [(o.drill_id, o.runs, o.verdict) for o in report.trend] == [
        (first.pk, 1, drill_report.PASSED),
        (second.pk, 1, drill_report.FAILED),
    ]
    assert all(o.medians["to_decision"] is not None for o in report.trend)

    client = Client()
    client.force_login(tess)
    page = client.get(f"/drills/{second.pk}/report/").content.decode()
    assert page.count('data-testid="trend-row"') == 2 and "<svg" in page  # the chart of the key times
    assert "not intact: committed effect done-2:voucher is missing" in " ".join(page.split())
    exported = client.get(f"/drills/{second.pk}/report/", {"format": "csv"})
    assert isinstance(exported, StreamingHttpResponse)
    rows = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert rows[1][-2:] == ["not intact", "committed effect done-2:voucher is missing"]
    trend = [row for row in rows if row and row[0] == "trend"]
    assert trend[0] == drill_report.TREND_HEADER
    assert [(row[1], row[4]) for row in trend[1:]] == [(str(first.pk), "passed"), (str(second.pk), "failed")]
    md = client.get(f"/drills/{second.pk}/report/", {"format": "md"}).content.decode()
    assert "## Trend" in md and f"| {first.pk} |" in md and "| not intact |" in md
