"""The article's test: "can it disappear for ten minutes, fail over, and come back with its state intact?"

Real HTTP throughout: the demo agents report to ``live_server`` through the Python client, the console
delivers to their resume servers. The clock is the silence sweep's ``now`` (ten minutes on), never a wait.
The stages are ``demo.failover_drill``, which ``make failover-drill`` runs for an operator to watch.
"""

import functools

import pytest
from django.db import connection
from django.urls import reverse
from recovery_client import ApiError

from demo.failover_drill import FailoverDrill
from tests.fleet_fixtures import HoldingServer
from tests.helpers import make_user
from workflows.models import Agent, Decider, Decision, Event, Step, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drill(live_server, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    settings.DELIVERY_TIMEOUT_SECONDS = 5.0
    # On SQLite the live server shares the test's connection: an agent acts once the task has returned.
    server = functools.partial(HoldingServer, hold=connection.vendor == "sqlite")
    drill = FailoverDrill(live_server.url, tmp_path, owner=make_user("olivia"), server_class=server)
    drill.start()
    yield drill
    drill.close()


def spy_on_deliveries(agent):
    received = []
    carry_out = agent.on_delivery
    agent.on_delivery = lambda payload: received.append(payload) or carry_out(payload)
    return received


def test_an_agent_silent_for_ten_minutes_fails_over_and_comes_back_to_stand_down_with_its_state_intact(drill, client):
    # 1. support-bot dies right after the ticket system wrote the note, before it could report it.
    workflow = drill.disappear()
    refund_key, note_key, message_key = drill.key("refund"), drill.key("note"), drill.key("message")
    assert drill.executed() == {"refund": 1, "note": 1, "message": 0}
    refund = workflow.steps.get(idempotency_key=refund_key)
    assert refund.status == Step.Status.COMMITTED and refund.external_ref.startswith("R-")
    assert workflow.steps.get(idempotency_key=note_key).status == Step.Status.PENDING  # written, never reported
    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.RUNNING and not workflow.checkpoints.exists()

    # 2. Four minutes of silence are within support-bot's five; ten are not: the sweep pauses it.
    assert drill.sweep_after(minutes=4) == 0
    assert drill.sweep_after(minutes=10) == 1
    assert drill.sweep_after(minutes=11) == 0  # paused once, not again
    checkpoint = drill.checkpoint()
    assert checkpoint.opened_by_console and checkpoint.detail == "agent went silent after step 4"
    state = checkpoint.resume_state
    assert [(s["name"], s["external_ref"]) for s in state["committed"]] == [("issue_refund", refund.external_ref)]
    assert state["promises"] == ["refund within 5 days"]
    assert [e["idempotency_key"] for e in state["unknown_effects"]] == [note_key]
    assert state["last_verified_output"]["ticket"] == workflow.external_id

    # 3. An operator checks the ledgers for the unknown note and fails over on the workbench's form.
    alice = make_user("alice")
    client.force_login(alice)
    client.post(reverse("claim", args=[checkpoint.pk]))
    note_ref = drill.ledgers.lookup(note_key)
    assert note_ref and note_ref.startswith("N-")
    received = spy_on_deliveries(drill.agent("standby"))
    client.post(
        reverse("decide", args=[checkpoint.pk]),
        {
            "action": "failover",
            "standby": "support-bot-standby",
            "confirm_0": "happened",
            "ref_0": note_ref,
            "instructions": "support-bot is gone; carry on from the customer message.",
            "money_confirmed": "1",
        },
    )
    decision = checkpoint.decisions.get()
    assert (decision.action, decision.standby.name, decision.replaced_agent.name) == (
        "failover",
        "support-bot-standby",
        "support-bot",
    )

    assert drill.deliver(decision) == "delivered"
    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED and workflow.agent.name == "support-bot-standby"
    assert workflow.owner.username == "olivia"
    assert drill.executed() == {"refund": 1, "note": 1, "message": 1}
    assert drill.ledgers.duplicates() == {}
    # The standby was handed the state exactly as the checkpoint holds it, and carried on from it:
    # it reported only the note's confirmation and the message, never the ticket read or the model's decision.
    [payload] = received
    assert payload["resume_state"] == state and payload["failover"] == {"from_agent": "support-bot"}
    by_standby = Event.objects.filter(
        workflow=workflow, verb__startswith="step_", actor_agent__name="support-bot-standby"
    )
    assert sorted({e.data["seq"] for e in by_standby}) == [4, 5]

    # The stand-down notice cannot reach support-bot while it is gone: recorded, to be retried.
    assert drill.stand_down(decision) == "failed"
    failed = Event.objects.get(workflow=workflow, verb=Event.Verb.STAND_DOWN_FAILED)
    assert failed.data["agent"] == "support-bot"

    # 4. support-bot comes back: its restarted runtime asks about the run it left and is told to stand down,
    assert drill.come_back()
    assert drill.journal_status() == "stood_down"
    # receives the notice when the console tries again,
    stood_down = spy_on_deliveries(drill.agent("original"))
    assert drill.stand_down(decision) == "sent"
    assert [(p["action"], p["taken_over_by"]) for p in stood_down] == [("stand_down", "support-bot-standby")]
    # and the run its frozen process still held, carrying on, is refused at its first report: nothing executes.
    assert drill.frozen_run_carries_on() == "stood_down"
    assert drill.executed() == {"refund": 1, "note": 1, "message": 1}
    assert drill.ledgers.duplicates() == {}
    refused = Event.objects.get(workflow=workflow, verb=Event.Verb.STOOD_DOWN_REFUSED)
    assert refused.actor_agent.name == "support-bot" and refused.data["taken_over_by"] == "support-bot-standby"
    with pytest.raises(ApiError) as answer:
        drill.frozen.client.get_workflow(str(workflow.pk))
    assert (answer.value.status, answer.value.code) == (409, "stood_down")
    assert f"Workflow {workflow.pk} was failed over to support-bot-standby" in answer.value.message
    assert "stand down and do not act on it again" in answer.value.message

    # The state is intact end to end: each effect once, under its key, with the reference the systems gave.
    steps = list(workflow.steps.order_by("seq").values_list("seq", "name", "status", "idempotency_key", "external_ref"))
    assert steps == [
        (1, "read_ticket", "committed", None, None),
        (2, "decide_refund", "committed", None, None),
        (3, "issue_refund", "committed", refund_key, refund.external_ref),
        (4, "write_ticket_note", "committed", note_key, note_ref),
        (5, "notify_customer", "committed", message_key, drill.ledgers.lookup(message_key)),
    ]
    assert workflow.steps.get(seq=5).promise.startswith("customer told: refund within 5 days")
    assert Decision.objects.filter(checkpoint__workflow=workflow).count() == 1
    verbs = list(Event.objects.filter(workflow=workflow).values_list("verb", flat=True))
    for earlier, later in [
        ("failed_over", "resumed"),
        ("resumed", "finished_completed"),
        ("stand_down_failed", "stand_down_sent"),
        ("finished_completed", "stood_down_refused"),
    ]:
        assert verbs.index(earlier) < verbs.index(later), (earlier, later, verbs)


def test_an_agent_that_was_never_failed_over_still_gets_404_for_another_agents_workflow(drill):
    """The clear answer leaks nothing: only the agent a failover replaced learns where its workflow went."""
    workflow = drill.disappear()
    assert drill.sweep_after(minutes=10) == 1
    stranger = drill.agent("standby")
    with pytest.raises(ApiError) as answer:
        stranger.client.get_workflow(str(workflow.pk))
    assert (answer.value.status, answer.value.code) == (404, "not_found")
    with pytest.raises(ApiError) as answer:
        stranger.client.get_checkpoint(str(drill.checkpoint().pk))
    assert (answer.value.status, answer.value.code) == (404, "not_found")


def test_a_stand_down_notice_the_replaced_agent_cannot_receive_is_retried_with_backoff_then_given_up(monkeypatch):
    """An agent that failed over is often one that is down: the notice waits for it, within bounds."""
    from celery.exceptions import Retry

    from tests.helpers import make_agent, make_checkpoint, make_worked_example
    from workflows import tasks

    original, _ = make_agent("gone-bot", resume_url="http://127.0.0.1:9/agents/gone-bot/resume")
    standby, _ = make_agent("standby-bot")
    Agent.objects.filter(pk=standby.pk).update(capabilities=["failover"], kinds=["refund"])
    checkpoint = make_checkpoint(make_worked_example(agent=original))
    decision = Decider(checkpoint).decide(
        by=make_user("alice"), action="failover", standby=Agent.objects.get(pk=standby.pk), money_confirmed=True
    )
    retries = []
    monkeypatch.setattr(tasks.send_stand_down, "retry", lambda **kwargs: retries.append(kwargs) or Retry())

    def attempt(number):  # as a worker runs it: the request says how many retries came before
        # celery-types knows push_request's signature as (*args, **kwargs) of a Context; these are its fields
        tasks.send_stand_down.push_request(retries=number - 1, called_directly=False)  # type: ignore[call-arg]
        try:
            return tasks.send_stand_down.run(decision.pk)
        finally:
            tasks.send_stand_down.pop_request()

    for number in (1, 2, 5, 6, 9):
        with pytest.raises(Retry):
            attempt(number)
    assert [r["countdown"] for r in retries] == [15, 30, 240, 300, 300]  # doubling, at most 5 minutes apart
    assert attempt(tasks.STAND_DOWN_RETRIES + 1) == "failed"  # the last one gives up: the 409 still holds
    assert len(retries) == 5
    failures = Event.objects.filter(workflow=checkpoint.workflow, verb=Event.Verb.STAND_DOWN_FAILED)
    assert [(e.data["attempt"], e.data["retrying"]) for e in failures] == [
        (1, True),
        (2, True),
        (5, True),
        (6, True),
        (9, True),
        (tasks.STAND_DOWN_RETRIES + 1, False),
    ]
