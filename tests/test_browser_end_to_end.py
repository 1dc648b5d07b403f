"""The worked example end to end, as an operator lives it: a real browser, the real API and UI
(live server on PostgreSQL), a real Celery worker and outbox relay on Redis, and the demo agent
runtime with its simulated payment, ticket and messaging systems.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.fleet_fixtures import Fleet
from tests.helpers import make_user
from tests.stack import Stack, private_redis, wait_until
from workflows.models import Checkpoint, Decision, Workflow

pytestmark = [
    pytest.mark.browser,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def fleet(live_server, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    fleet = Fleet(live_server.url, tmp_path)
    yield fleet
    fleet.close()


@pytest.fixture
def workers(live_server):
    """The production pipeline: the relay hands the decision row to a Celery worker, which delivers it."""
    with private_redis() as redis:
        stack = Stack(
            redis.url,
            SWEEP_INTERVAL_SECONDS="0.3",
            DELIVERY_TIMEOUT_SECONDS="5",
            DELIVERY_BACKOFF_SECONDS="0.2",
            DELIVERY_MAX_ATTEMPTS="2",
        )
        stack.worker()
        stack.relay()
        yield stack
        stack.stop()


@pytest.fixture
def olivia(transactional_db):
    return make_user("olivia")


def start_in_background(agent):
    """The agent runs on its own, as a runtime would; it pauses at the checkpoint and waits."""
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome", agent.start()), daemon=True)
    thread.start()
    return result


def claim_from_queue(page, user):
    login(page, user)
    row = page.get_by_test_id("queue-row").first
    expect(row).to_be_visible(timeout=30_000)  # appears by itself: the queue polls, nobody reloads
    row.get_by_test_id("claim").click()
    expect(row.get_by_test_id("assignee")).to_contain_text("you")
    row.locator("a").first.click()
    return Checkpoint.objects.get()


def test_an_unknown_refund_is_confirmed_resumed_and_carried_out_exactly_once(page, fleet, workers, olivia, alice):
    agent = fleet.agent(owner=olivia, forced={"issue_refund": "timeout_after_commit"})
    start_in_background(agent)
    checkpoint = claim_from_queue(page, alice)
    workflow = checkpoint.workflow
    key = f"{workflow.external_id}:refund"

    expect(page.get_by_test_id("resume-summary")).to_contain_text("outcome unknown")
    expect(page.get_by_test_id("returns-to")).to_contain_text("olivia")
    resume = page.get_by_test_id("decide-resume")
    expect(resume).to_be_disabled()
    # The operator looks the refund up in the payment system: it went through.
    [execution] = fleet.ledgers.executions_for(key)
    refund = page.get_by_test_id("unknown-effect").filter(has_text="issue_refund")
    refund.get_by_test_id("confirm-happened").check()
    refund.get_by_test_id("confirm-ref").fill(execution.ref)
    page.get_by_test_id("instructions").fill("Refund went out; write the note and tell the customer.")
    page.get_by_test_id("money-confirmed").check()
    expect(resume).to_be_enabled()
    resume.click()

    # The worker delivers; the page follows the decision live.
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "succeeded", timeout=60_000)
    wait_until(
        lambda: Workflow.objects.get(pk=workflow.pk).status == "completed",
        timeout=60,
        what="the demo runtime to finish the workflow",
    )
    workflow.refresh_from_db()
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    assert fleet.ledgers.duplicates() == {}
    assert workflow.owner == olivia  # back with the owner it had before the interruption
    assert Decision.objects.get().attempts == 1


def test_a_handoff_reaches_the_agent_and_lands_in_the_new_owners_workflows(
    new_page, fleet, workers, olivia, alice, bob
):
    agent = fleet.agent(owner=olivia, forced={"write_ticket_note": "model_timeout"})
    start_in_background(agent)
    alices = new_page()
    checkpoint = claim_from_queue(alices, alice)
    alices.get_by_test_id("new-owner").select_option("bob")
    alices.get_by_test_id("instructions").fill("Refund is out; please call the customer yourself.")
    alices.get_by_test_id("decide-handoff").click()
    expect(alices.get_by_test_id("decision-status")).to_have_attribute("data-status", "succeeded", timeout=60_000)

    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/mine/")
    expect(bobs.get_by_test_id("handoff-packet")).to_contain_text("please call the customer yourself")
    workflow = Workflow.objects.get(pk=checkpoint.workflow_id)
    assert (workflow.status, workflow.owner) == ("handed_off", bob)
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}


def test_an_abort_is_carried_out_and_nothing_more_happens(page, fleet, workers, olivia, alice):
    agent = fleet.agent(owner=olivia, forced={"write_ticket_note": "model_timeout"})
    start_in_background(agent)
    checkpoint = claim_from_queue(page, alice)
    page.get_by_test_id("instructions").fill("Duplicate ticket; the customer was refunded elsewhere.")
    page.once("dialog", lambda dialog: dialog.accept())  # the abort's spelled-out consequence (issue 8)
    page.get_by_test_id("decide-abort").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "succeeded", timeout=60_000)
    workflow = Workflow.objects.get(pk=checkpoint.workflow_id)
    assert workflow.status == "aborted"
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}


def test_a_delivery_the_agent_never_accepts_returns_the_checkpoint_to_the_queue(page, fleet, workers, olivia, alice):
    agent = fleet.agent(owner=olivia, forced={"write_ticket_note": "model_timeout"})
    start_in_background(agent)
    checkpoint = claim_from_queue(page, alice)
    fleet.server.stop()  # the agent runtime went down after pausing
    page.get_by_test_id("instructions").fill("Carry on.")
    page.get_by_test_id("decide-resume").click()

    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "failed", timeout=60_000)
    expect(page.get_by_test_id("decision-error")).to_contain_text("could not be reached")
    assert Checkpoint.objects.get(pk=checkpoint.pk).status == "open"
    page.goto("/")
    expect(page.locator(f"#checkpoint-{checkpoint.pk}")).to_be_visible()
