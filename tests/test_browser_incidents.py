"""An operator in a real browser: five failures of one agent form an incident, which appears on the queue
as one row by itself; its page shows the blast radius; the operator holds the agent, and its next step
report is told to pause."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from tests.apitools import READ_TICKET, AgentApi
from tests.apitools import expect as expect_status
from tests.browser_fixtures import login
from tests.helpers import make_agent, make_checkpoint, make_worked_example
from workflows.models import Checkpoint, Hold, Incident

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_five_failures_form_an_incident_the_operator_opens_it_and_holds_the_agent(page, alice):
    agent, token = make_agent("support-bot")
    login(page, alice)
    expect(page.locator("#incident-rows")).not_to_contain_text("Incident #")

    for i in range(5):
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending" if i == 0 else "committed"),
            reason="tool_error",
            detail=f"payments provider answered 502 for ticket T-{4000 + i}",
        )
    incident = Incident.objects.get()

    row = page.get_by_test_id("incident-queue-row")
    expect(row).to_have_count(1, timeout=15_000)  # polled in, no reload
    expect(row).to_contain_text("5 checkpoints")
    expect(row.get_by_test_id("incident-unknown")).to_contain_text("1 outcome unknown")
    expect(page.get_by_test_id("badge-incident")).to_have_count(5)
    if os.environ.get("SCREENSHOTS"):
        page.screenshot(path=os.environ["SCREENSHOTS"] + "/queue.png", full_page=True)

    row.get_by_test_id("incident-link").click()
    expect(page.get_by_test_id("incident-title")).to_contain_text(f"Incident #{incident.pk}")
    expect(page.get_by_test_id("radius-workflows")).to_contain_text("5")
    expect(page.get_by_test_id("radius-unknown")).to_contain_text("1 in")
    expect(page.get_by_test_id("arrivals-chart").locator("svg")).to_be_visible()
    expect(page.get_by_test_id("member-row")).to_have_count(5)

    page.get_by_test_id("hold-agent").click()
    expect(page.get_by_test_id("flash")).to_contain_text("support-bot (refund workflows) is on hold")
    expect(page.get_by_test_id("hold")).to_contain_text("Active")
    expect(page.get_by_test_id("incident-timeline")).to_contain_text("put support-bot · refund on hold")
    if os.environ.get("SCREENSHOTS"):
        page.screenshot(path=os.environ["SCREENSHOTS"] + "/incident.png", full_page=True)

    # The agent's next step report on a running workflow is told to pause, at a held checkpoint.
    bot = AgentApi(agent, token)
    running = bot.create_workflow("T-4999", status=409)  # refused: new workflows wait for the hold
    assert running["error"]["code"] == "agent_on_hold"
    hold = Hold.objects.get()
    hold.lift(by=alice)
    workflow_id = bot.create_workflow("T-4999")["id"]
    Hold.place(agent, by=alice, incident=incident)
    body = expect_status(bot.post(f"/workflows/{workflow_id}/steps", READ_TICKET), 201)
    assert Checkpoint.objects.get(pk=body["instruction"]["pause"]["checkpoint_id"]).reason == "held"

    page.reload()
    expect(page.get_by_test_id("lift-hold")).to_have_count(1)
    page.get_by_test_id("lift-hold").click()
    expect(page.get_by_test_id("flash")).to_contain_text("is lifted")
    expect(page.get_by_test_id("incident-timeline")).to_contain_text("lifted the hold on support-bot · refund")
