"""The proposal panel says "Touches money" only when the money rule says so (issue 28, item 2): a ticket
triage proposed under a runbook with four eyes on every resume moves none, and the panel said it did."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_step, make_worked_example, make_workflow
from workflows.models import Decider, Decision

pytestmark = pytest.mark.django_db


def _panel(client, user, checkpoint) -> str:
    client.force_login(user)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    start = html.index('data-testid="four-eyes"')
    return html[start : html.index("</p>", start)]


def test_a_triage_under_four_eyes_on_every_resume_does_not_say_it_touches_money(client, alice, bob):
    make_runbook(workflow_kind="ticket_triage", four_eyes_on_every_resume=True)
    workflow = make_workflow(kind="ticket_triage", title="Triage Q-7")
    make_step(workflow, 1, "read_ticket", "tool")
    checkpoint = make_checkpoint(
        workflow,
        at_seq=2,
        plan=[{"name": "set_priority", "kind": "effect", "amount": None, "currency": None, "moves_money": False}],
    )
    assert Decider(checkpoint).decide(by=alice, action="resume").status == Decision.Status.PROPOSED

    panel = _panel(client, bob, checkpoint)

    assert "Touches money" not in panel
    assert "four eyes on every" in panel and "waiting for a second operator" in panel


def test_a_money_proposal_says_it_touches_money_and_how_much(client, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    Decider(checkpoint).decide(by=alice, action="resume", confirmations={key: "did_not_happen"}, money_confirmed=True)

    panel = _panel(client, bob, checkpoint)

    assert "Touches money" in panel and "42.00 EUR" in panel
