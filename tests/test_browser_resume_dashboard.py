"""A TPM reads the demo fleet's recoveries in Chromium: the dashboard, a drill-down to a workflow,
readiness and the staffing budget.

The history is the demo fleet's own: its simulated agents (refunds, billing disputes, ticket triage)
run through the real API against the live server, faults forced at chosen steps, and an operator
claims and decides each checkpoint; the agents poll for their decisions and carry them out.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from demo.plans import FaultPlan
from tests.browser_fixtures import login
from tests.fleet_fixtures import Fleet
from tests.helpers import make_user
from workflows import metrics
from workflows.models import Checkpoint, Decider

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_history(live_server, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    olivia, alice, bob = make_user("olivia"), make_user("alice"), make_user("bob")
    fleet = Fleet(live_server.url, tmp_path)
    agents = {
        kind: fleet.agent(name, kind, owner=olivia, polls=True)
        for name, kind in (
            ("support-bot", "refund"),
            ("billing-bot", "billing_dispute"),
            ("triage-bot", "ticket_triage"),
        )
    }

    def run(kind, forced=None, *, action="resume", **decision):
        agent = agents[kind]
        agent.faults = FaultPlan(0.0, forced=forced or {})
        work = agent.create_run()
        outcome = agent.proceed(work)
        if outcome != "paused":
            return outcome
        checkpoint = Checkpoint.objects.get(pk=work.checkpoint_id)
        # The operator looks each unknown effect up in the simulated systems: these timed out after committing.
        confirmations = {e["idempotency_key"]: "happened" for e in checkpoint.unknown_effects}
        refs = {key: fleet.ledgers.lookup(key) for key in confirmations}
        assert checkpoint.claim(by=alice)
        Decider(checkpoint).decide(
            by=alice,
            action=action,
            confirmations=confirmations,
            confirmation_refs=refs,
            money_confirmed=True,
            **decision,
        )
        return agent.drive(work, waiting=True)

    try:
        assert run("refund") == "completed"
        assert run("refund", {"write_ticket_note": "model_timeout"}) == "completed"
        assert run("refund", {"issue_refund": "timeout_after_commit"}) == "completed"
        assert run("billing_dispute", {"assess_dispute": "model_timeout"}) == "completed"
        assert (
            run(
                "billing_dispute",
                {"issue_credit": "rate_limit"},
                action="handoff",
                new_owner=bob,
                instructions="Call the customer",
            )
            == "handed_off"
        )
        assert run("ticket_triage", {"read_ticket": "garbage"}, action="abort") == "aborted"
        assert run("ticket_triage") == "completed"
        yield fleet
    finally:
        fleet.close()


def test_a_tpm_reads_the_dashboard_drills_down_to_a_workflow_and_checks_readiness_and_staffing(
    page, demo_history, transactional_db
):
    tess = make_user("tess", role="tpm")
    summary = metrics.summary(metrics.Filters.last())
    clean = summary["resumed_without_data_loss"]
    assert (clean.part, clean.whole) == (3, 5) and summary["same_owner"].whole == 4

    login(page, tess)
    page.get_by_role("link", name="Resumes").click()
    card = page.get_by_test_id("figure-resumed_without_data_loss")
    expect(card).to_contain_text("60.0 %")
    expect(card).to_contain_text("3 of 5")
    expect(page.get_by_test_id("count-launches")).to_contain_text("7 launched")
    expect(page.get_by_test_id("breakdown-kind")).to_contain_text("billing_dispute")

    page.get_by_test_id("drill-same_owner").click()
    expect(page.get_by_test_id("drill-title")).to_have_text("Returned to the same owner")
    rows = page.get_by_test_id("drill-row")
    expect(rows).to_have_count(3)
    rows.first.get_by_test_id("drill-workflow").click()
    expect(page.get_by_test_id("workflow-title")).to_be_visible()
    expect(page.get_by_test_id("workflow-status")).to_contain_text("completed")

    page.get_by_role("link", name="Readiness").click()
    billing = page.get_by_test_id("readiness-billing_dispute")
    expect(billing.get_by_test_id("verdict")).to_be_visible()
    expect(billing).to_contain_text("Where billing_dispute workflows were interrupted")
    expect(page.get_by_test_id("readiness-refund")).to_contain_text("issue_refund")

    page.get_by_role("link", name="Staffing").click()
    expect(page.get_by_test_id("staffing-heatmap").locator("svg")).to_be_visible()
    expect(page.get_by_test_id("staffing-summary")).to_contain_text("mean handling time (5 decided)")
