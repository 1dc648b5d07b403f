"""The Python client carries out drill faults in the agent's process, against a live console (issue 26)."""

import pytest
from recovery_client import GARBAGE, DrillCrash, Paused, RecoveryClient

from tests.helpers import make_agent, make_user
from workflows.models import Checkpoint, Drill, Event, Step, Workflow
from workflows.tasks import pause_silent_workflows

# The live server runs in another thread: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent_and_client(live_server):
    agent, token = make_agent("drilled-bot", owner=make_user("olivia"))
    client = RecoveryClient(live_server.url, token, timeout=10, retries=3, backoff=0.01, max_wait=0.05)
    client.advertise(["drill"])
    return agent, client


def start_drill(agent, fault, at_seq):
    agent.refresh_from_db()  # it advertised drill support over the API
    drill = Drill(agent=agent, name=f"{fault} at {at_seq}", fault=fault, at_seq=at_seq, runs=1)
    drill.full_clean()
    drill.save()
    assert drill.start()
    return drill


def three_steps(wf, *, check=None):
    with wf.step("read_ticket", input={"ticket": "T-1"}) as s:
        s.record({"ticket": "T-1"})
    with wf.step("decide", kind="model") as s:
        answer = {"decision": "note"}
        if check:
            s.verify(answer, check)
        else:
            s.record(answer)
    with wf.step("write_note", kind="message", promise="we will write back") as s:
        s.record({"sent": True})


def test_crash_after_step_k_stops_the_run_silently_and_the_watchdog_opens_the_checkpoint(agent_and_client):
    agent, client = agent_and_client
    drill = start_drill(agent, Drill.Fault.CRASH_AFTER_STEP, 2)
    with pytest.raises(DrillCrash), client.workflow("T-1", "support", "Ticket T-1") as wf:
        three_steps(wf)
    workflow = Workflow.objects.get(external_id="T-1")
    assert workflow.drill == drill
    # The process "died" after step 2 was committed: nothing more was reported, no checkpoint, not finished.
    assert list(workflow.steps.values_list("seq", "status")) == [(1, "committed"), (2, "committed")]
    assert workflow.status == Workflow.Status.RUNNING and not workflow.checkpoints.exists()
    Workflow.objects.filter(pk=workflow.pk).update(last_activity_at=workflow.last_activity_at.replace(year=2000))
    assert pause_silent_workflows() == 1
    checkpoint = Checkpoint.objects.get(workflow=workflow)
    assert checkpoint.at_seq == 2 and "silent after step 2" in checkpoint.detail


def test_the_rerun_after_a_crash_is_not_told_to_crash_again(agent_and_client):
    agent, client = agent_and_client
    start_drill(agent, Drill.Fault.CRASH_AFTER_STEP, 1)
    with pytest.raises(DrillCrash), client.workflow("T-2", "support", "Ticket T-2") as wf:
        three_steps(wf)
    workflow = Workflow.objects.get(external_id="T-2")
    Checkpoint.open_for(workflow, reason="other", detail="silent", at_seq=1, by_console=True)
    assert Drill.instruction_for(Workflow.objects.get(pk=workflow.pk)) == {}


def test_garbage_at_step_k_meets_the_agents_own_check_and_pauses_the_run(agent_and_client):
    agent, client = agent_and_client
    start_drill(agent, Drill.Fault.GARBAGE_AT_STEP, 2)
    seen = []

    def check(output):
        seen.append(output)
        return isinstance(output, dict) and "decision" in output

    with pytest.raises(Paused) as paused, client.workflow("T-3", "support", "Ticket T-3") as wf:
        three_steps(wf, check=check)
    assert seen == [GARBAGE]
    assert paused.value.reason == "tool_error"
    step = Step.objects.get(workflow__external_id="T-3", seq=2)
    assert step.status == Step.Status.FAILED
    assert not Step.objects.filter(workflow__external_id="T-3", seq=3).exists()


def test_garbage_at_an_unchecked_step_is_stopped_as_untrusted_output(agent_and_client):
    agent, client = agent_and_client
    start_drill(agent, Drill.Fault.GARBAGE_AT_STEP, 1)
    with pytest.raises(Paused) as paused, client.workflow("T-4", "support", "Ticket T-4") as wf:
        three_steps(wf)
    assert paused.value.reason == "untrusted_output"
    checkpoint = Checkpoint.objects.get(workflow__external_id="T-4")
    assert checkpoint.reason == "untrusted_output" and checkpoint.at_seq == 1
    assert "garbage answer at step 1" in checkpoint.detail


def test_an_undrilled_run_goes_through_untouched(agent_and_client):
    _agent, client = agent_and_client
    with client.workflow("T-5", "support", "Ticket T-5") as wf:
        three_steps(wf)
        assert wf.drill is None
    assert Workflow.objects.get(external_id="T-5").status == Workflow.Status.COMPLETED
    assert not Event.objects.filter(verb=Event.Verb.DRILL_ENLISTED).exists()
