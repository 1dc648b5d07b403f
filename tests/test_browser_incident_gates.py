"""Two operators in a real browser clear an incident's safety gates: alice pastes the provider's references,
reads matched / unmatched (a look-alike id named and refused) and confirms; she types the money at stake and
proposes the rollout (four eyes); bob approves it and the waves may go."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_agent, make_checkpoint, make_runbook, make_worked_example
from workflows.models import EffectConfirmation, Incident, Rollout
from workflows.models.evidence import unconfirmed_effects

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _shot(page, name):
    if os.environ.get("SCREENSHOTS"):
        page.screenshot(path=os.environ["SCREENSHOTS"] + f"/{name}.png", full_page=True)


def test_evidence_then_money_then_a_second_operator_approves_the_rollout(new_page, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    agent, _ = make_agent("payments-bot")
    agent.incident_threshold = 3
    agent.save()
    for i in range(3):
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending"),
            reason="tool_error",
            detail=f"payments provider timed out for ticket T-{4000 + i}",
        )
    incident = Incident.objects.get()
    k1, k2, k3 = sorted(e.key for e in unconfirmed_effects(incident))

    page = new_page()
    login(page, alice)
    page.goto(f"/incidents/{incident.pk}/")
    expect(page.get_by_test_id("incident-evidence")).to_contain_text("3 unknown effects")
    lookalike = k3.replace("_", "\uff3f", 1)  # a full-width low line: looks the same, is another id
    page.get_by_test_id("evidence-text").fill(f"{k1}, re_3Px9\n{k2}\tre_3Px8\n{lookalike}, re_3Px7\n")
    page.get_by_test_id("evidence-preview").click()

    expect(page.get_by_test_id("matched-count")).to_have_text("2")
    expect(page.get_by_test_id("unmatched-references-count")).to_have_text("1")
    expect(page.get_by_test_id("unmatched-effects-count")).to_have_text("1")
    expect(page.get_by_test_id("matched-row")).to_have_count(2)
    expect(page.get_by_test_id("unmatched-reference")).to_contain_text(f"looks like {k3}")
    expect(page.get_by_test_id("unmatched-effect")).to_contain_text(k3)
    assert not EffectConfirmation.objects.exists()
    _shot(page, "incident-evidence")
    page.get_by_test_id("evidence-apply").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Confirmed 2 unknown effects as happened")
    expect(page.get_by_test_id("incident-evidence")).to_contain_text("1 unknown effect ")
    assert set(EffectConfirmation.objects.values_list("reference", flat=True)) == {"re_3Px9", "re_3Px8"}

    # The unknown refunds may be made again by a resume: 3 × 42.00 EUR at stake, typed to propose it.
    expect(page.get_by_test_id("rollout-stake")).to_have_text("126.00 EUR")
    page.get_by_test_id("money-total-EUR").fill("12.60")
    page.get_by_test_id("rollout-start").click()
    expect(page.get_by_test_id("flash")).to_contain_text("The total at stake in EUR is 126.00, not 12.60")
    page.get_by_test_id("money-total-EUR").fill("126.00")
    page.get_by_test_id("rollout-start").click()
    expect(page.get_by_test_id("flash")).to_contain_text("a second operator must approve it")
    expect(page.get_by_test_id("rollout-awaits-approval")).to_contain_text("proposed by alice")
    expect(page.get_by_test_id("rollout-approve")).to_have_count(0)

    second = new_page()
    login(second, bob)
    second.goto(f"/incidents/{incident.pk}/")
    _shot(second, "incident-rollout-approval")
    second.get_by_test_id("rollout-approve").click()
    expect(second.get_by_test_id("flash")).to_contain_text("Rollout running")
    expect(second.get_by_test_id("rollout-approved")).to_contain_text("Approved by bob")
    expect(second.get_by_test_id("incident-timeline")).to_contain_text("approved the rollout proposed by alice")
    rollout = Rollout.objects.get()
    assert (rollout.status, rollout.started_by, rollout.approved_by) == (Rollout.Status.RUNNING, alice, bob)
