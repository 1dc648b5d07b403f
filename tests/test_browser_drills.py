"""In Chromium: a TPM defines and starts an unannounced drill, the drilled runs go through the queue
(an operator does not see the badge, the TPM does), and the TPM reads a "passed" report. Then with the demo
agent carrying the faults out for real: a crash drill an operator decides reads "passed" with its state
intact, and a failover drill whose standby is down reads "failed" with the reason."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.apitools import api_agent
from tests.browser_fixtures import login
from tests.recovery_histories import Fleet
from tests.stack import wait_until
from tests.test_demo_resume import deliver
from tests.test_fork_and_failover import able
from workflows import tasks
from workflows.models import Agent, Checkpoint, Decision, Drill

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/shots")


def test_a_tpm_defines_starts_and_reads_a_drill(new_page, tess, alice):
    fleet = Fleet(api_agent("support-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    tpm = new_page()
    login(tpm, tess)
    tpm.get_by_test_id("nav-drills").click()
    tpm.fill("#id_name", "Tuesday: crash after the refund")
    tpm.select_option("#id_agent", label="support-bot")
    tpm.select_option("#id_fault", "crash_after_step")
    tpm.fill("#id_at_seq", "3")
    tpm.fill("#id_runs", "2")
    tpm.uncheck("#id_announced")
    tpm.get_by_test_id("define-drill").click()
    expect(tpm.get_by_test_id("drill-row")).to_have_count(1)
    tpm.get_by_test_id("start-drill").click()
    expect(tpm.get_by_test_id("drill-status")).to_have_text("running")
    SHOTS.mkdir(exist_ok=True)
    tpm.screenshot(path=str(SHOTS / "drills.png"), full_page=True)

    runs = [fleet.start(ext) for ext in ("T-1", "T-2")]
    checkpoints = [fleet.pause(wf) for wf in runs]
    operator = new_page()
    login(operator, alice)
    expect(operator.get_by_test_id("workflow-link")).to_have_count(2)
    expect(operator.get_by_test_id("drill-badge")).to_have_count(0)  # unannounced: not told
    tpm.goto(tpm.url.split("/drills/")[0] + "/")
    expect(tpm.get_by_test_id("drill-badge")).to_have_count(2)

    for wf, checkpoint in zip(runs, checkpoints, strict=True):
        fleet.decide(Checkpoint.objects.get(pk=checkpoint.pk))
        fleet.complete(wf)
    drill = Drill.objects.get()
    tpm.goto(tpm.url.rstrip("/") + f"/drills/{drill.pk}/report/")
    expect(tpm.get_by_test_id("verdict")).to_have_text("passed")
    expect(tpm.get_by_test_id("drill-run")).to_have_count(2)
    tpm.screenshot(path=str(SHOTS / "drill-report.png"), full_page=True)


def define_and_start(tpm, name: str, fault: str) -> Drill:
    tpm.get_by_test_id("nav-drills").click()
    tpm.fill("#id_name", name)
    tpm.select_option("#id_agent", label="support-bot")
    tpm.fill("#id_kind", "refund")
    tpm.select_option("#id_fault", fault)
    tpm.fill("#id_at_seq", "3")
    tpm.fill("#id_runs", "1")
    tpm.get_by_test_id("define-drill").click()
    row = tpm.get_by_test_id("drill-row").filter(has_text=name)
    row.get_by_test_id("start-drill").click()
    expect(tpm.get_by_test_id("drill-row").filter(has_text=name).get_by_test_id("drill-status")).to_have_text("running")
    return Drill.objects.get(name=name)


def crash_and_catch(agent) -> Checkpoint:
    """The demo agent runs its drilled refund and dies after step 3; the console's silence sweep catches it."""
    run, outcome = agent.start()
    assert outcome == "crashed (drill)"
    assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1)) == 1
    return Checkpoint.objects.get(workflow__external_id=run.external_id)


def decide(operator, checkpoint: Checkpoint, action: str, standby: str = "") -> Decision:
    operator.goto(f"/checkpoints/{checkpoint.pk}/")
    operator.get_by_test_id("claim").click()
    # The claim re-renders the decision form: fill it once that landed, or a busy machine's late swap drops the
    # standby picked before it (the form then answered 422, no standby).
    expect(operator.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")
    if standby:
        operator.get_by_test_id("standby").select_option(standby)
    operator.get_by_test_id("money-confirmed").check()
    operator.get_by_test_id(f"decide-{action}").click()
    wait_until(
        lambda: Decision.objects.filter(checkpoint=checkpoint).exists(), timeout=30, interval=0.05, what="the decision"
    )
    return Decision.objects.get(checkpoint=checkpoint)


@pytest.mark.postgres
def test_a_tpm_drills_the_demo_agent_reads_passed_then_a_dead_standby_reads_failed(
    new_page, fleet, tess, alice, olivia, settings
):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    agent = fleet.agent("support-bot", owner=olivia)
    able("support-bot", "drill", "drill_sandbox", "failover")
    tpm, operator = new_page(), new_page()
    login(tpm, tess)
    login(operator, alice)

    drill = define_and_start(tpm, "Crash after the refund", "crash_after_step")
    checkpoint = crash_and_catch(agent)
    decision = decide(operator, checkpoint, "resume")
    deliver(fleet, decision)
    tpm.goto(f"/drills/{drill.pk}/report/")
    expect(tpm.get_by_test_id("verdict")).to_have_text("passed")
    expect(tpm.get_by_test_id("state-intact")).to_have_text("intact")

    failover = define_and_start(tpm, "Fail over after the refund", "failover")
    Agent.register("dead-standby", resume_url="http://127.0.0.1:9/agents/dead-standby/resume")
    able("dead-standby", "failover")
    checkpoint = crash_and_catch(agent)
    decision = decide(operator, checkpoint, "failover", standby="dead-standby")
    assert tasks.deliver_decision(decision.pk) == "retry"  # nobody answers at the standby
    tpm.goto(f"/drills/{failover.pk}/report/")
    expect(tpm.get_by_test_id("verdict")).to_have_text("failed")
    expect(tpm.get_by_test_id("verdict-reason").filter(has_text="failover to dead-standby")).to_contain_text(
        "the standby never took the run over"
    )
    SHOTS.mkdir(exist_ok=True)
    tpm.screenshot(path=str(SHOTS / "drill-report-failed.png"), full_page=True)
