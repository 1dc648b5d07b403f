"""In Chromium: the workbench shows one consistent state, updated live by one poll; a lost race's message
stays until dismissed; a resolved checkpoint shows the state at the interruption and what happened after
(issue 8, defects 3 and 4)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Decider, Decision, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def report(workflow, seq, name, kind="tool", **fields):
    """A step as the agent reports it through the API (recorded with its Event)."""
    if kind == "effect":
        fields.setdefault("idempotency_key", f"{workflow.external_id}:{name}")
    blank = {
        "input": None,
        "output": None,
        "verified": False,
        "promise": None,
        "idempotency_key": None,
        "external_ref": None,
    }
    return workflow.record_step(
        {**blank, "seq": seq, "name": name, "kind": kind, "status": "committed", **fields}, actor=workflow.agent
    )[0]


def test_claim_decide_and_delivery_update_header_clock_trajectory_and_events_together(page, alice):
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint open")

    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")
    expect(page.get_by_test_id("event-log")).to_contain_text("claimed the checkpoint")

    page.get_by_test_id("instructions").fill("Write the note, then notify.")
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint decided")
    expect(page.get_by_test_id("workflow-status")).to_have_text("workflow resuming")
    expect(page.get_by_test_id("sla-clock").locator(".countdown")).to_have_count(0)  # the clock stopped

    decision = Decision.objects.get(checkpoint=checkpoint)
    decision.start_attempt()
    decision.mark_succeeded()  # what a worker does: nothing reloads the page
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint resolved")
    expect(page.get_by_test_id("workflow-status")).to_have_text("workflow running")
    expect(page.get_by_test_id("event-log")).to_contain_text("decision delivered to the agent")

    report(checkpoint.workflow, 4, "write_ticket_note", "effect", external_ref="N-7")  # the agent goes on
    expect(page.get_by_test_id("trajectory").get_by_test_id("step")).to_have_count(4)
    expect(page.get_by_test_id("since-effect")).to_contain_text("write_ticket_note N-7 committed")


def test_the_loser_of_a_race_sees_who_won_and_the_message_stays_until_dismissed(new_page, alice, bob):
    checkpoint = make_checkpoint()
    alices = new_page()
    login(alices, alice)
    alices.goto(f"/checkpoints/{checkpoint.pk}/")
    expect(alices.get_by_test_id("decide-resume")).to_be_enabled()
    # Alice's page has not heard of bob's decision yet when she clicks (its polls are held back).
    alices.route("**/checkpoints/*/?v=*", lambda route: route.abort())
    Decider(checkpoint).decide(by=bob, action="resume", instructions="Go.")
    alices.get_by_test_id("decide-resume").click()

    conflict = alices.get_by_test_id("decide-conflict")
    expect(conflict).to_contain_text("Already decided: resume by bob")
    alices.unroute("**/checkpoints/*/?v=*")
    expect(alices.get_by_test_id("checkpoint-status")).to_have_text("checkpoint decided")
    expect(alices.get_by_test_id("sla-clock").locator(".countdown")).to_have_count(0)
    Decision.objects.get(checkpoint=checkpoint).start_attempt()  # the state moves on: polls swap the page
    expect(alices.get_by_test_id("decision-state")).to_have_text("running")
    alices.wait_for_timeout(4500)  # two more polls
    expect(conflict).to_be_visible()

    alices.get_by_test_id("dismiss-conflict").click()
    expect(alices.get_by_test_id("decide-conflict")).to_have_count(0)


def test_typing_survives_the_polls_that_bring_news(page, alice):
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")
    page.get_by_test_id("instructions").fill("Half-typed instructions")

    report(checkpoint.workflow, 4, "late_report", "tool")  # news: the live region is swapped
    expect(page.get_by_test_id("trajectory").get_by_test_id("step")).to_have_count(4)
    expect(page.get_by_test_id("instructions")).to_have_value("Half-typed instructions")
    expect(page.get_by_test_id("instructions")).to_be_focused()


def test_a_resolved_checkpoint_shows_the_interruption_beside_what_happened_after(page, alice, bob):
    make_runbook(workflow_kind="refund")
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = Decider(checkpoint).decide(
        by=alice,
        action="resume",
        confirmations={key: "happened"},
        confirmation_refs={key: "R-88"},
        money_confirmed=True,
    )
    decision.start_attempt()
    decision.mark_succeeded()
    workflow = checkpoint.workflow
    report(
        workflow,
        3,
        "issue_refund",
        "effect",
        input={"amount": "42.00", "currency": "EUR"},
        external_ref="R-88",
        idempotency_key=key,
    )
    report(workflow, 4, "write_ticket_note", "effect", external_ref="N-7")
    report(workflow, 5, "notify_customer", "effect", external_ref="M-3")
    Workflow.objects.get(pk=workflow.pk).finish("completed", "Refunded, noted, notified.", actor=None)

    login(page, bob)
    page.goto(f"/checkpoints/{checkpoint.pk}/")

    expect(page.get_by_test_id("at-interruption")).to_contain_text("At the interruption")
    expect(page.get_by_test_id("resume-summary")).to_contain_text("outcome unknown")
    since = page.get_by_test_id("since")
    expect(since).to_contain_text("What happened after")
    expect(page.get_by_test_id("since-confirmation")).to_contain_text(f"confirmed {key} happened (R-88)")
    expect(page.get_by_test_id("since-effect")).to_have_count(3)
    expect(page.get_by_test_id("since-outcome")).to_contain_text("workflow completed: Refunded, noted, notified.")
    page.screenshot(path="/tmp/shots/resolved.png", full_page=True)
