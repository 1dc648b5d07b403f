"""The Python client carries out the other drill faults in the agent's process, against a live console (issue
26): silent for N minutes (on a test clock), a rate-limit storm, a failover to the standby, a provider change."""

from datetime import timedelta

import pytest
from recovery_client import (
    ApiError,
    Batching,
    DrillFailover,
    Paused,
    ProviderChanged,
    RecoveryClient,
    drifted,
)

from tests.helpers import make_agent, make_user
from workflows.models import Agent, Checkpoint, Decider, Drill, Step, Workflow
from workflows.tasks import pause_silent_workflows

pytestmark = pytest.mark.django_db(transaction=True)  # the live server runs in another thread


def console_client(live_server, token, **options):
    return RecoveryClient(live_server.url, token, timeout=10, retries=3, backoff=0.01, max_wait=0.05, **options)


def start_drill(agent, fault, at_seq=1, **fields):
    agent.refresh_from_db()  # it advertised drill support over the API
    drill = Drill(agent=agent, name=f"{fault} at {at_seq}", fault=fault, at_seq=at_seq, runs=1, **fields)
    drill.full_clean()
    drill.save()
    assert drill.start()
    return drill


def silence_passes(external_id):
    """What ``seconds`` of the agent's silence look like to the console: its watchdog sweeps a workflow whose
    last sign of life is that long ago (a clock for the test, not a wait)."""

    def sleep(seconds):
        workflow = Workflow.objects.get(external_id=external_id)
        Workflow.objects.filter(pk=workflow.pk).update(
            last_activity_at=workflow.last_activity_at - timedelta(seconds=seconds)
        )
        slept.append((seconds, pause_silent_workflows()))

    slept = []
    return sleep, slept


def support_run(wf, ran, *, check=None):
    """Read, decide (a model), write a note (an effect), tidy up; a resumed run skips what is done."""
    with wf.step("read_ticket", input={"ticket": wf.external_id}) as s:
        if not s.done:
            ran.append("read_ticket")
            s.record({"ticket": wf.external_id, "amount": 42})
    with wf.step("decide", kind="model") as s:
        if not s.done:
            ran.append("decide")
            answer = {"decision": "refund", "amount": 42}
            if check:
                s.verify(answer, check)
            else:
                s.record(answer)
    with wf.effect("write_note", input={"note": "refund agreed"}) as e:
        if not e.done:
            ran.append("write_note")
            e.record({"note_ref": "N-1"}, external_ref="N-1")
    with wf.step("tidy_up") as s:
        if not s.done:
            ran.append("tidy_up")
            s.record({"ok": True})


@pytest.mark.parametrize("batching", [None, Batching()], ids=["step-by-step", "batching"])
def test_go_silent_says_nothing_for_n_minutes_then_finds_the_watchdogs_checkpoint(live_server, batching):
    agent, token = make_agent("silent-bot", owner=make_user("olivia"))
    sleep, slept = silence_passes("T-S1")
    client = console_client(live_server, token, drill_sleep=sleep, batching=batching)
    client.advertise(["drill"])
    Agent.objects.filter(pk=agent.pk).update(silence_seconds=300)  # its watchdog: five minutes of silence
    start_drill(agent, Drill.Fault.GO_SILENT, at_seq=2, silent_minutes=10)
    ran = []
    with pytest.raises(Paused) as paused, client.workflow("T-S1", "support", "Ticket T-S1") as wf:
        support_run(wf, ran)
    # Silent after step 2 was reported, for the drill's ten minutes; the console's watchdog caught it.
    assert slept == [(600.0, 1)]
    assert ran == ["read_ticket", "decide"]
    workflow = Workflow.objects.get(external_id="T-S1")
    assert list(workflow.steps.values_list("seq", "status")) == [(1, "committed"), (2, "committed")]
    checkpoint = Checkpoint.objects.get(workflow=workflow)
    assert paused.value.checkpoint_id == str(checkpoint.pk)
    assert checkpoint.at_seq == 2 and "silent after step 2" in checkpoint.detail
    assert workflow.status == Workflow.Status.PAUSED


def test_a_silence_the_console_did_not_catch_carries_on(live_server):
    agent, token = make_agent("silent-bot", owner=make_user("olivia"))
    sleep, slept = silence_passes("T-S2")
    client = console_client(live_server, token, drill_sleep=sleep)
    client.advertise(["drill"])
    start_drill(agent, Drill.Fault.GO_SILENT, at_seq=1, silent_minutes=1)  # shorter than its watchdog's 15
    ran = []
    with client.workflow("T-S2", "support", "Ticket T-S2") as wf:
        support_run(wf, ran)
    assert slept == [(60.0, 0)]
    assert ran == ["read_ticket", "decide", "write_note", "tidy_up"]
    assert Workflow.objects.get(external_id="T-S2").status == Workflow.Status.COMPLETED


@pytest.mark.parametrize("batching", [None, Batching()], ids=["step-by-step", "batching"])
def test_a_rate_limit_storm_refuses_the_model_call_and_the_checkpoint_says_rate_limit(live_server, batching):
    agent, token = make_agent("throttled-bot", owner=make_user("olivia"))
    client = console_client(live_server, token, batching=batching)
    client.advertise(["drill"])
    start_drill(agent, Drill.Fault.RATE_LIMIT_STORM, at_seq=2)
    ran = []
    with pytest.raises(Paused) as paused, client.workflow("T-R1", "support", "Ticket T-R1") as wf:
        support_run(wf, ran)
    assert ran == ["read_ticket"], "the model call at step 2 never ran: the provider refused it"
    assert paused.value.reason == "rate_limit"
    checkpoint = Checkpoint.objects.get(workflow__external_id="T-R1")
    assert checkpoint.reason == "rate_limit" and checkpoint.at_seq == 2
    assert "429" in checkpoint.detail
    step = Step.objects.get(workflow__external_id="T-R1", seq=2)
    assert step.status == Step.Status.FAILED and step.output["error"] == "DrillRateLimitError"


def test_a_provider_change_meets_the_agents_check_and_pauses_as_provider_change(live_server):
    agent, token = make_agent("drifting-bot", owner=make_user("olivia"))
    client = console_client(live_server, token)
    client.advertise(["drill"])
    start_drill(agent, Drill.Fault.PROVIDER_CHANGE, at_seq=2)
    seen = []

    def check(answer):
        seen.append(answer)
        return answer["amount"] < 100  # the agent's own bound on a refund

    ran = []
    with pytest.raises(Paused) as paused, client.workflow("T-P1", "support", "Ticket T-P1") as wf:
        support_run(wf, ran, check=check)
    assert seen == [{"decision": "refund", "amount": 4200}] == [drifted({"decision": "refund", "amount": 42})]
    assert paused.value.reason == "provider_change"
    checkpoint = Checkpoint.objects.get(workflow__external_id="T-P1")
    assert checkpoint.reason == "provider_change" and checkpoint.at_seq == 2
    assert "write_note" not in ran


def test_a_provider_change_at_an_unchecked_model_step_is_stopped_all_the_same(live_server):
    agent, token = make_agent("drifting-bot", owner=make_user("olivia"))
    client = console_client(live_server, token)
    client.advertise(["drill"])
    start_drill(agent, Drill.Fault.PROVIDER_CHANGE, at_seq=1)  # step 1 is a tool: the model step 2 drifts
    with pytest.raises(Paused) as paused, client.workflow("T-P2", "support", "Ticket T-P2") as wf:
        support_run(wf, [])
    assert paused.value.reason == "provider_change"
    checkpoint = Checkpoint.objects.get(workflow__external_id="T-P2")
    assert checkpoint.at_seq == 2 and "does not check its output" in checkpoint.detail
    assert issubclass(ProviderChanged, ValueError)


@pytest.mark.parametrize("batching", [None, Batching()], ids=["step-by-step", "batching"])
def test_a_failover_drill_dies_in_the_effect_and_the_standby_carries_the_workflow_on(live_server, batching):
    olivia, alice = make_user("olivia"), make_user("alice")
    agent, token = make_agent("support-bot", owner=olivia)
    standby, standby_token = make_agent("support-bot-standby", owner=olivia)
    client = console_client(live_server, token, batching=batching)
    client.advertise(["drill"])
    console_client(live_server, standby_token).advertise(["failover"], kinds=["support"])
    start_drill(agent, Drill.Fault.FAILOVER, at_seq=3)
    ran = []
    with pytest.raises(DrillFailover), client.workflow("T-F1", "support", "Ticket T-F1") as first:
        support_run(first, ran)
    # The note was written, and the process died before saying so: its outcome is unknown to the console.
    assert ran == ["read_ticket", "decide", "write_note"]
    workflow = Workflow.objects.get(external_id="T-F1")
    assert list(workflow.steps.values_list("seq", "name", "status")) == [
        (1, "read_ticket", "committed"),
        (2, "decide", "committed"),
        (3, "write_note", "pending"),
    ]
    assert workflow.status == Workflow.Status.RUNNING and not workflow.checkpoints.exists()

    Workflow.objects.filter(pk=workflow.pk).update(last_activity_at=workflow.last_activity_at - timedelta(minutes=30))
    assert pause_silent_workflows() == 1
    checkpoint = Checkpoint.objects.get(workflow=workflow)
    assert [e["idempotency_key"] for e in checkpoint.unknown_effects] == ["T-F1:write_note"]
    Decider(checkpoint).decide(
        by=alice,
        action="failover",
        standby=Agent.objects.get(pk=standby.pk),
        confirmations={"T-F1:write_note": "happened"},
        confirmation_refs={"T-F1:write_note": "N-1"},
        instructions="support-bot is down.",
    )

    # The standby runs the same code: the confirmed note is recorded, not written again; the run completes.
    standby_client = console_client(live_server, standby_token, batching=batching)
    again = []
    with standby_client.workflow("T-F1", "support", "Ticket T-F1", poll_interval=0.05) as wf:
        support_run(wf, again)
    assert again == ["tidy_up"]
    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED and workflow.agent == standby
    assert list(workflow.steps.values_list("seq", "status")) == [(k, "committed") for k in range(1, 5)]
    # The original, if its process comes back to the run it held, is stood down: nothing more is recorded.
    with pytest.raises(ApiError) as refused:
        first.report(5, "write_note", "effect", "pending", input={"note": "again"}, idempotency_key="T-F1:again")
    assert refused.value.stood_down
    assert workflow.steps.count() == 4
