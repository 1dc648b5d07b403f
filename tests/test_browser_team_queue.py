"""The queue per team in a real browser: an operator lands on "My team", a lead switches to another team
and to "All teams", and the selected rows move to another team (htmx, no reload) with the counts following."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_user, make_workflow
from tests.test_team_routing import make_team
from workflows.models import Checkpoint, RoutingRule

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _world(alice, bob):
    lena = make_user("lena")
    billing = make_team("Billing", alice, lead=lena)
    trust = make_team("Trust", bob)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    RoutingRule.objects.create(team=trust, workflow_kind="abuse")
    refunds = [make_checkpoint(make_workflow(kind="refund", title=f"Refund {n}")) for n in range(3)]
    abuse = [make_checkpoint(make_workflow(kind="abuse", title=f"Abuse report {n}")) for n in range(2)]
    return lena, billing, trust, refunds, abuse


def test_an_operator_lands_on_my_team_and_moves_rows_to_another_team(page, alice, bob):
    _, _, trust, refunds, abuse = _world(alice, bob)
    login(page, alice)
    expect(page.get_by_test_id("team-tab-billing")).to_contain_text("My team: Billing")
    expect(page.get_by_test_id("team-tab-billing")).to_have_attribute("aria-current", "true")
    expect(page.get_by_test_id("team-tab-all")).to_have_count(0)  # not a lead: her team only
    expect(page.get_by_test_id("queue-row")).to_have_count(3)
    expect(page.locator(f"#checkpoint-{abuse[0].pk}")).to_have_count(0)
    if shots := os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=str(Path(shots) / "team-queue.png"), full_page=True)

    page.evaluate("window.__sameDocument = true")
    for checkpoint in refunds[:2]:
        page.locator(f"#checkpoint-{checkpoint.pk}").get_by_test_id("select-row").check()
    page.get_by_test_id("bulk-team").select_option("trust")
    page.get_by_test_id("bulk-transfer").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Transferred 2 to Trust.")
    expect(page.get_by_test_id("queue-row")).to_have_count(1)
    expect(page.get_by_test_id("team-count-billing")).to_have_text("1")  # the team's count follows
    assert page.evaluate("window.__sameDocument") is True  # swapped by htmx, not reloaded
    assert Checkpoint.objects.filter(team=trust).count() == 4


def test_a_lead_switches_teams_and_sees_all_teams_with_counts(page, alice, bob):
    lena, *_, abuse = _world(alice, bob)
    login(page, lena)
    expect(page.get_by_test_id("team-count-billing")).to_have_text("3")
    expect(page.get_by_test_id("team-count-trust")).to_have_text("2")
    page.get_by_test_id("team-tab-trust").click()
    expect(page.get_by_test_id("team-tab-trust")).to_have_attribute("aria-current", "true")
    expect(page.get_by_test_id("queue-row")).to_have_count(2)
    expect(page.locator(f"#checkpoint-{abuse[0].pk}")).to_be_visible()
    page.get_by_test_id("tab-unassigned").click()  # the scope tabs work inside the team
    expect(page.get_by_test_id("team-tab-trust")).to_have_attribute("aria-current", "true")
    expect(page.get_by_test_id("queue-row")).to_have_count(2)
    page.get_by_test_id("team-tab-all").click()
    expect(page.get_by_test_id("team-count-all")).to_have_text("5")
    expect(page.get_by_test_id("queue-row")).to_have_count(5)
