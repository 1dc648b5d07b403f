"""In a real browser: find a workflow by its ticket id, replay steps 3..7 from a checkpoint and read the first
divergence, fork from a step, fail over to a standby. The demo runtime answers over HTTP."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint
from tests.replaytools import ReplayRuntime
from workflows import tasks
from workflows.models import Agent, Decision, ReplayRun, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runtime(transactional_db, tmp_path, live_server):
    runtime = ReplayRuntime(tmp_path, console_url=live_server.url, capabilities=("replay", "fork"))
    Agent.objects.filter(pk=runtime.record.pk).update(fork_edits=["effect"])  # as the demo runtime advertises
    yield runtime
    runtime.close()


def test_an_operator_finds_the_ticket_replays_3_to_7_and_sees_where_the_drift_started(page, alice, runtime):
    workflow = runtime.recorded_workflow("T-4242")
    checkpoint = make_checkpoint(workflow, reason="provider_change", at_seq=7, detail="refund looked 100x too big")
    runtime.provider.changed = True
    login(page, alice)

    page.get_by_test_id("nav-search").fill("T-4242")
    page.get_by_test_id("nav-search").press("Enter")
    expect(page.get_by_test_id("workflow-title")).to_have_text("Refund for ticket T-4242")
    expect(page.get_by_test_id("step")).to_have_count(8)
    page.get_by_test_id("checkpoint-link").first.click()

    expect(page.get_by_test_id("replay-from")).to_have_value("3")
    expect(page.get_by_test_id("replay-to")).to_have_value("7")
    page.get_by_test_id("replay-submit").click()
    expect(page.get_by_test_id("replay-status")).to_have_text("queued")
    run = ReplayRun.objects.get(workflow=workflow)
    assert (run.from_seq, run.to_seq, run.checkpoint_id) == (3, 7, checkpoint.pk)

    assert tasks.run_replay(run.pk) == "recorded"  # what a worker does; the page follows by itself
    expect(page.get_by_test_id("replay-status")).to_have_text("succeeded")
    amount = workflow.steps.get(seq=5).output["amount"]
    expect(page.get_by_test_id("first-divergence")).to_contain_text(
        f"step 5 `decide_refund`: output.amount {amount} → {float(amount) * 100:.2f}"
    )
    rows = page.get_by_test_id("replay-row")
    expect(rows).to_have_count(5)
    expect(rows.filter(has_text="decide_refund")).to_have_attribute("data-verdict", "diverged")
    assert runtime.executions() == 0  # steps 6 and 7 are effects: answered from the recording


def test_an_operator_forks_from_a_step_and_the_fork_is_linked_both_ways(page, alice, runtime):
    workflow = runtime.recorded_workflow("T-5150")
    login(page, alice)
    page.goto(f"/workflows/{workflow.pk}/")

    page.get_by_test_id("fork-from").fill("6")
    page.get_by_test_id("fork-reason").fill("Refund again with the corrected amount")
    page.get_by_test_id("fork-input").fill('{"amount": "12.00"}')
    page.get_by_test_id("fork-money-confirmed").check()
    page.get_by_test_id("fork-repeat-6").check()  # step 6 refunded already: its own tick
    page.get_by_test_id("fork-submit").click()

    fork = Workflow.objects.get(forked_from=workflow)
    expect(page.get_by_test_id("decision-state")).to_have_text("queued")
    assert fork.steps.count() == 5 and fork.forked_at_seq == 6
    page.get_by_test_id("workflow-link").first.click()
    expect(page.get_by_test_id("forked-from")).to_have_text(f"workflow {workflow.pk}")
    expect(page.get_by_test_id("copied-step")).to_have_count(5)
    page.get_by_test_id("forked-from").click()
    expect(page.get_by_test_id("fork-link")).to_have_text("T-5150~fork1")


def test_the_fork_form_shows_the_earlier_refund_and_demands_a_tick_naming_it(page, alice, runtime, tmp_path):
    """Issue 22 (16): forking T-1010 from `decide_refund` re-ran `issue_refund` under a new key, and the form only
    said "the fork may move money". Now it lists the refund with its amount and reference, refuses to fork
    until that refund is ticked by name, refuses an edit the agent would ignore, and the fork's workbench
    says what it will run again."""
    workflow = runtime.recorded_workflow("T-1010")
    workflow.steps.filter(seq=6).update(input={"ticket": "T-1010", "amount": "247.92", "currency": "EUR"})
    login(page, alice)
    page.goto(f"/workflows/{workflow.pk}/")

    earlier = page.get_by_test_id("fork-earlier-effect").filter(has_text="issue_refund")
    expect(earlier).to_contain_text("at step 6, 247.92 EUR, ref R-1A2B3C4D")
    page.get_by_test_id("fork-from").fill("5")
    page.get_by_test_id("fork-reason").fill("Decide the refund again")
    page.get_by_test_id("fork-input").fill('{"model": "support-model-v4"}')
    page.get_by_test_id("fork-money-confirmed").check()
    page.get_by_test_id("fork-submit").click()
    expect(page.locator(".toast-error")).to_contain_text("does not apply an edited input to a model step")

    page.get_by_test_id("fork-from").fill("5")
    page.get_by_test_id("fork-reason").fill("Decide the refund again")
    page.get_by_test_id("fork-money-confirmed").check()
    page.get_by_test_id("fork-submit").click()
    expect(page.locator(".toast-error")).to_contain_text(
        "the original committed issue_refund (247.92 EUR) at step 6, ref R-1A2B3C4D"
    )
    assert not Workflow.objects.filter(forked_from=workflow).exists()
    page.screenshot(path=str(tmp_path / "fork-form.png"), full_page=True)

    page.get_by_test_id("fork-from").fill("5")
    page.get_by_test_id("fork-reason").fill("Decide the refund again")
    page.get_by_test_id("fork-money-confirmed").check()
    page.get_by_test_id("fork-repeat-6").check()
    page.get_by_test_id("fork-submit").click()

    expect(page.get_by_test_id("decision-state")).to_have_text("queued")
    fork = Workflow.objects.get(forked_from=workflow)
    assert fork.checkpoints.get().decisions.get().repeats_confirmed[0]["external_ref"] == "R-1A2B3C4D"
    repeat = page.get_by_test_id("lineage-effect").filter(has_text="issue_refund")
    expect(repeat).to_contain_text("committed issue_refund at step 6, 247.92 EUR, ref R-1A2B3C4D")
    expect(repeat.get_by_test_id("lineage-repeat")).to_have_text("this fork will run issue_refund again")
    expect(page.get_by_test_id("plan-money")).to_have_text("moves money: 247.92 EUR")
    page.screenshot(path=str(tmp_path / "fork-workbench.png"), full_page=True)


def test_an_operator_fails_a_paused_workflow_over_to_a_standby(page, alice, runtime):
    workflow = runtime.recorded_workflow("T-6060")
    workflow.steps.filter(seq__gte=7).delete()  # paused before the note and the message
    checkpoint = make_checkpoint(workflow, reason="other", at_seq=7, detail="agent went silent after step 6")
    standby, _token = Agent.register("standby-bot", resume_url=runtime.server.url("/agents/standby-bot/resume"))
    Agent.objects.filter(pk=standby.pk).update(capabilities=["failover"], kinds=["refund"])
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")

    page.get_by_test_id("standby").select_option("standby-bot")
    page.get_by_test_id("instructions").fill("support-bot is down: finish the note and the message.")
    page.get_by_test_id("decide-failover").click()

    expect(page.get_by_test_id("decision-state")).to_have_text("queued")
    decision = Decision.objects.get(checkpoint=checkpoint)
    workflow.refresh_from_db()
    assert decision.action == "failover" and decision.standby == standby and workflow.agent == standby
    assert workflow.status == "resuming"
