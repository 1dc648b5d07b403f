"""`make run`'s simulated Slack workspace: the fleet serves the Web API the console calls and a page of
the messages it posted, whose buttons and modals reach the console signed as Slack signs them.

A four-eyes refund is proposed by the demo operator from "Slack", approved by the demo admin in the
thread, and the message shows it; someone not linked is offered the link."""

from __future__ import annotations

import urllib.parse
import urllib.request

from django.db.models import F

from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Decision, SlackMessage
from workflows.slack import outbox


def catch_up() -> None:
    for pk in (
        SlackMessage.objects.filter(version__gt=F("sent_version"))
        .order_by("decision_id", "pk")
        .values_list("pk", flat=True)
    ):
        outbox.send(pk)


def page(server, user: str) -> str:
    with urllib.request.urlopen(server.url(f"/slack?as={user}"), timeout=10) as response:
        return response.read().decode()


def post(server, path: str, user: str, **form: str) -> str:
    data = urllib.parse.urlencode({"as": user, **form}).encode()
    with urllib.request.urlopen(server.url(path), data=data, timeout=30) as response:  # follows the 303
        return response.read().decode()


def button_value(server, action_id: str) -> str:
    return next(
        e["value"]
        for m in server.slack.messages.values()
        for b in m.get("blocks") or []
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == action_id
    )


def test_a_four_eyes_refund_is_decided_and_approved_from_the_simulated_workspace(simulated_slack):
    fleet = simulated_slack
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    catch_up()
    html = page(fleet, "U0OPERATOR")
    assert checkpoint.workflow.external_id in html and 'data-testid="slack-claim"' in html
    claim = button_value(fleet, "claim")

    html = post(fleet, "/slack/press", "U0OPERATOR", action_id="resume", value=button_value(fleet, "resume"))
    assert 'data-testid="slack-modal"' in html and "42.00 EUR" in html
    html = post(fleet, "/slack/submit", "U0OPERATOR", **{"confirm:0": "did_not_happen", "money": "42 EUR"})
    assert 'data-testid="slack-error"' in html  # the amount must be typed as it stands
    post(fleet, "/slack/submit", "U0OPERATOR", **{"confirm:0": "did_not_happen", "money": "42.00 EUR"})
    decision = Decision.objects.get()
    assert decision.status == Decision.Status.PROPOSED and decision.channel == "slack"

    catch_up()
    html = post(fleet, "/slack/press", "U0OPERATOR", action_id="approve", value=str(decision.pk))
    assert "The second approval must come from another operator." in html
    post(fleet, "/slack/press", "U0ADMIN", action_id="approve", value=str(decision.pk))
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED and decision.approved_by.username == "admin"

    catch_up()
    html = page(fleet, "U0TPM")
    assert "Approved by admin" in html and 'data-testid="slack-approve"' not in html

    html = post(fleet, "/slack/press", "U0GUEST", action_id="claim", value=claim)
    assert "not linked" in html and "/slack/link/" in html
