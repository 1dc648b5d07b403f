"""Every column of every CSV export is guarded against spreadsheet formulas, by one exporter.

Issue 22, finding 15 (and issue 21 item 4): three CSV writers had three formula guards, and the
breach CSV guarded 3 of its 15 columns: an agent's name, a runbook's slug, a username or a breach
reason starting with ``-``, ``+``, ``=`` or ``@`` reached the spreadsheet as a formula.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse

from console.csv_export import FORMULA_STARTS, safe_cell
from console.views.dashboards import TABLES
from tests.helpers import make_agent, make_overdue_checkpoint, make_runbook, make_user, make_workflow
from workflows import tasks
from workflows.models import BreachReason, Checkpoint, Decider, Event

ROOT = Path(__file__).resolve().parent.parent
LEADS = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("lead", LEADS)
def test_the_guard_defuses_every_formula_lead(lead):
    assert safe_cell(f'{lead}HYPERLINK("http://evil.example")') == f'\'{lead}HYPERLINK("http://evil.example")'
    assert safe_cell("refund") == "refund" and safe_cell(-3) == -3 and safe_cell(None) is None


def _cells(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode(), newline="")))


@pytest.fixture
def poisoned(db, adam):
    """Every text a CSV carries, agent- or admin-supplied, starting like a formula."""
    agent, _ = make_agent("=cmd|' /C calc'!A0")
    holder = make_user("-bob")
    make_user("@carol")
    make_runbook(workflow_kind="+refund", slug="-refunds")
    workflow = make_workflow(
        agent, kind="+refund", title='=HYPERLINK("http://evil.example")', external_id="@SUM(A1)", owner=holder
    )
    checkpoint = make_overdue_checkpoint(workflow, detail="\t=1+1")
    checkpoint.claim(by=holder)
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=20))
    reason = BreachReason.objects.create(name="-2+3")
    Checkpoint.objects.filter(pk=checkpoint.pk).update(breach_reason=reason, breach_note="\r=2+2")
    Decider(checkpoint).decide(by=holder, action="abort", instructions="=1+1")
    return checkpoint


def _every_export(client, tess, adam) -> dict[str, list[list[str]]]:
    client.force_login(tess)
    exports = {"breaches": _cells(client.get(reverse("breach_review"), {"format": "csv"}))}
    for table in TABLES:
        exports[table] = _cells(client.get(f"/resumes/export/{table}.csv"))
    client.force_login(adam)
    exports["audit"] = _cells(
        client.post(
            reverse("admin:workflows_event_changelist"),
            {"action": "export_csv", "_selected_action": list(Event.objects.values_list("pk", flat=True))},
        )
    )
    return exports


def test_no_cell_of_any_csv_export_starts_like_a_formula(client, tess, adam, poisoned):
    exports = _every_export(client, tess, adam)
    defused = set()
    for name, rows in exports.items():
        for row in rows:
            for cell in row:
                assert not cell.startswith(FORMULA_STARTS), (name, row)
                if cell.startswith("'"):
                    defused.add(cell)
    # The attack reached the files: each poisoned text is there, defused.
    for text in (
        "'=cmd|' /C calc'!A0",
        "'-bob",
        "'-refunds",
        '\'=HYPERLINK("http://evil.example")',
        "'+refund",
        "'-2+3",
        "'\r=2+2",
    ):
        assert text in defused, text
    assert len(exports["breaches"]) == 2


def test_one_module_writes_csv():
    writers = [
        path.relative_to(ROOT).as_posix()
        for folder in ("console", "workflows")
        for path in (ROOT / folder).rglob("*.py")
        if re.search(r"\bcsv\.(writer|DictWriter)\b|from csv import .*\b(writer|DictWriter)\b", path.read_text())
    ]
    assert writers == ["console/csv_export.py"]
