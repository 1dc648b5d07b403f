"""The whole demo incident as an operator walks it in Chromium, against real demo agents over the real API:
the provider outage is switched on from the demo ledgers page, failures form an incident, the operator holds
the agent from the incident page, switches the outage off, lifts the hold, starts a rollout, and watches the
waves go out and the members recover on the live page, without reloading it.

The fleet's launches and the periodic sweep and worker are the test's own calls (``agent.start``,
``Rollout.advance``, ``tasks.deliver_decision``): everything else is the browser."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect
from recovery_client import ApiError

from tests.browser_fixtures import login
from workflows import tasks
from workflows.models import Decision, Incident, Rollout, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _deliver_queued(fleet, incident):
    for decision in Decision.objects.filter(checkpoint__incident=incident, status=Decision.Status.QUEUED):
        assert tasks.deliver_decision(decision.pk) == "delivered"
    fleet.server.release()
    assert fleet.server.join(timeout=60), "the agent did not finish carrying the decisions out"


def test_an_operator_walks_the_demo_outage_from_incident_to_recovery(page, fleet, live_server, olivia, operator):
    agent = fleet.agent(owner=olivia)

    page.goto(fleet.server.url("/ledgers"))
    page.get_by_role("button", name="Start a provider outage").click()
    expect(page.locator("#outage")).to_contain_text("Provider outage")
    assert fleet.server.provider.outage
    assert [agent.start()[1] for _ in range(5)] == ["paused"] * 5  # the fleet's next five launches

    login(page, operator)
    row = page.get_by_test_id("incident-queue-row")
    expect(row).to_have_count(1, timeout=15_000)
    expect(row).to_contain_text("5 checkpoints")
    incident = Incident.objects.get()
    row.get_by_test_id("incident-link").click()
    expect(page.get_by_test_id("incident-title")).to_contain_text("Model timeout on support-bot")
    expect(page.get_by_test_id("member-row")).to_have_count(5)

    page.get_by_test_id("hold-agent").click()
    expect(page.get_by_test_id("hold")).to_contain_text("Active")
    with pytest.raises(ApiError) as refused:
        agent.create_run()
    assert refused.value.code == "agent_on_hold"

    page.goto(fleet.server.url("/ledgers"))
    page.get_by_role("button", name="End the provider outage").click()
    expect(page.locator("#outage")).to_contain_text("The model provider is up")
    assert not fleet.server.provider.outage

    page.goto(live_server.url + reverse("incident", args=[incident.pk]))
    page.get_by_test_id("lift-hold").click()
    expect(page.get_by_test_id("incident-timeline")).to_contain_text("lifted the hold on support-bot")
    page.get_by_test_id("rollout-action").select_option("resume")
    page.locator('input[name="canary_percent"]').fill("20")
    totals = page.locator('[data-testid^="money-total-"]')  # the operator types each total the page shows
    for i in range(totals.count()):
        field = totals.nth(i)
        field.fill((field.get_attribute("placeholder") or "").removeprefix("type "))
    page.get_by_test_id("rollout-start").click()
    expect(page.get_by_test_id("rollout-status")).to_have_text("Running")
    rollout = Rollout.objects.get()

    # The sweep sends the canary, the worker delivers it, the agents resume; the page follows by itself.
    now = timezone.now()
    rollout.advance(now)
    _deliver_queued(fleet, incident)
    expect(page.get_by_test_id("rollout")).to_contain_text("wave 1: 1 decisions", timeout=15_000)
    if os.environ.get("SCREENSHOTS"):
        page.screenshot(path=os.environ["SCREENSHOTS"] + "/incident-rollout.png", full_page=True)
    for minute in range(1, 6):
        rollout.advance(now + timedelta(minutes=minute))
        rollout.refresh_from_db()
        if rollout.status != Rollout.Status.RUNNING:
            break
        _deliver_queued(fleet, incident)
    assert rollout.status == Rollout.Status.COMPLETED, rollout.halt_reason
    expect(page.get_by_test_id("rollout-status")).to_have_text("Completed", timeout=15_000)
    expect(page.get_by_test_id("rollout")).to_contain_text("wave 3: 2 decisions")
    expect(page.get_by_test_id("radius-workflows")).to_contain_text("5 (0 waiting for a decision)")
    members = Workflow.objects.filter(checkpoints__incident=incident).distinct()
    assert set(members.values_list("status", flat=True)) == {Workflow.Status.COMPLETED}
    for workflow in members:
        assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
