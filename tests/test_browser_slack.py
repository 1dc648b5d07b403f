"""In Chromium: an operator decides a four-eyes refund from the simulated Slack workspace of `make run`,
a second operator approves it in the thread, the workbench shows it and the message says so."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from tests.slack_fake import catch_up
from workflows.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_four_eyes_refund_decided_in_slack_and_approved_in_the_thread_shows_on_the_workbench(
    simulated_slack, new_page
):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    catch_up()

    slack = new_page()
    slack.goto(simulated_slack.url("/slack?as=U0OPERATOR"))
    expect(slack.get_by_test_id("slack-message")).to_contain_text("42.00 EUR")
    slack.get_by_test_id("slack-resume").click()
    modal = slack.get_by_test_id("slack-modal")
    modal.locator("select[name='confirm:0']").select_option("did_not_happen")
    modal.locator("input[name='money']").fill("42.00 EUR")
    modal.get_by_test_id("slack-submit").click()
    expect(slack.get_by_test_id("slack-modal")).to_have_count(0)
    catch_up()

    slack.goto(simulated_slack.url("/slack?as=U0ADMIN"))
    expect(slack.get_by_test_id("slack-message").first).to_contain_text("waiting for a second operator")
    slack.get_by_test_id("slack-approve").click()
    decision = Decision.objects.get()
    assert decision.status == Decision.Status.QUEUED and decision.approved_by.username == "admin"
    catch_up()
    slack.reload()
    expect(slack.get_by_test_id("slack-message").nth(1)).to_contain_text("Approved by admin")
    expect(slack.get_by_test_id("slack-approve")).to_have_count(0)

    console = new_page()
    login(console, get_user_model().objects.get(username="operator"))
    console.goto(f"/checkpoints/{checkpoint.pk}/")
    expect(console.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
