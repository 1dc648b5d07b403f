"""The resume dashboard tells a deliberate abort or handoff apart from a failure, exports its clocks in
their own columns, and says when there is too little for a trend (issue 28, item 6)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
import time_machine
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone

from tests.helpers import make_checkpoint, squeezed
from tests.recovery_histories import build_history
from workflows import metrics, rollups, sla_figures

pytestmark = pytest.mark.django_db

WHY = {"aborted": 1, "handed_off": 1, "failed": 1, "not_resumed": 0, "duplicate_attempt": 1, "lost_effect": 2}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _why(counts) -> dict[str, int]:
    return {m.why.slug: m.count for m in metrics.missed_because(counts, "resumed_without_data_loss")}


def test_each_miss_of_resumed_without_data_loss_has_one_reason_live_and_rolled_up(alice, bob, adam):
    build_history(operator=alice, other=bob, owner=adam)
    period = metrics.Filters.last()
    live = metrics.summary(period)
    clean = live["resumed_without_data_loss"]

    assert _why(live.counts) == WHY
    assert sum(WHY.values()) == clean.whole - clean.part  # the reasons partition the misses
    rollups.rebuild()
    assert _why(rollups.Figures(period).summary().counts) == WHY  # the rollups count the same definition
    aborted = metrics.workflows_behind(period, "missed_because:aborted")
    assert list(aborted.values_list("external_id", flat=True)) == ["silent"]
    assert list(
        metrics.workflows_behind(period, "missed_because:handed_off").values_list("external_id", flat=True)
    ) == ["handoff"]


def test_the_dashboard_card_says_why_each_was_missed_and_links_each_reason(alice, bob, adam, tess):
    build_history(operator=alice, other=bob, owner=adam)
    page = squeezed(_client(tess).get("/resumes/").content.decode())

    for said in (
        "1</a> aborted by an operator",
        "1</a> handed off to people",
        "1</a> failed",
        "1</a> completed after a duplicate-effect attempt",
        "2</a> completed with a lost effect",
    ):
        assert said in page
    assert "completed without a resume" not in page  # a reason nothing fell under is not listed
    drill = _client(tess).get("/resumes/workflows/?figure=missed_because%3Aaborted").content.decode()
    assert drill.count('data-testid="drill-row"') == 1
    assert "Not resumed without data loss: aborted by an operator" in drill


def test_the_timings_csv_puts_every_value_under_its_own_header(alice, bob, adam, tess):
    build_history(operator=alice, other=bob, owner=adam)
    response = _client(tess).get("/resumes/export/timings.csv")
    assert isinstance(response, StreamingHttpResponse)
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    header, rows = lines[0], [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]

    assert all(len(line) == len(header) for line in lines)
    rate = sla_figures.breach_rate(metrics.Filters.last())
    breaches = [r for r in rows if r["measure"].startswith("SLA breach")]
    assert breaches == [
        {
            "measure": "SLA breach rate (checkpoints opened)",
            "count": str(rate.opened),
            "median_seconds": "",
            "p90_seconds": "",
            "breached": str(rate.breached),
            "breach_rate_percent": f"{100 * rate.breached / rate.opened:.1f}",
        }
    ]
    for clock in (r for r in rows if r not in breaches):
        assert clock["breached"] == clock["breach_rate_percent"] == ""
        assert clock["median_seconds"] == "" or float(clock["median_seconds"]) >= 0


def test_a_fresh_console_says_a_trend_needs_more_days_instead_of_a_blank(tess):
    page = squeezed(_client(tess).get("/resumes/").content.decode())
    said = 'text-anchor="middle">No data in this period yet: nothing to draw a trend from</text>'
    assert page.count(said) == 2  # across both charts over time (and first in their descriptions)

    with time_machine.travel(timezone.now() - timedelta(days=3)):
        make_checkpoint()
    page = squeezed(_client(tess).get("/resumes/").content.decode())
    day = (timezone.now() - timedelta(days=3)).strftime("%d %b")
    assert f"Only one day with data so far ({day}): a trend needs two or more" in page
