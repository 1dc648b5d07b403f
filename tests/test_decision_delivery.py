"""Delivering a decision to the agent's resume endpoint (tasks called directly, a real HTTP receiver)."""

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows import runtime, tasks
from workflows.clock import database_now
from workflows.models import Checkpoint, Decider, Decision, Event, Workflow


@pytest.fixture
def paused(db, receiver, alice):
    owner = make_user("olivia")
    agent, _ = make_agent("support-bot", resume_url=receiver.url, owner=owner)
    checkpoint = make_checkpoint(make_worked_example(agent=agent, owner=owner))
    checkpoint.claim(by=alice)
    return checkpoint


def decide(checkpoint, by, action="resume", **kwargs):
    kwargs.setdefault("money_confirmed", True)
    return Decider(checkpoint).decide(by=by, action=action, instructions="Write the note, then notify.", **kwargs)


def test_a_resume_is_posted_signed_and_the_workflow_runs_again_with_its_owner(paused, alice, receiver):
    decision = decide(paused, alice)
    assert tasks.deliver_decision(decision.pk) == "delivered"

    [delivery] = receiver.deliveries
    secret = decision.agent.signing_secret
    expected = "sha256=" + hmac.new(secret.encode(), delivery["raw"], hashlib.sha256).hexdigest()
    assert delivery["signature"] == expected
    assert delivery["delivery"] == str(decision.delivery_id)
    body = delivery["body"]
    assert set(body) >= {
        "workflow_id",
        "external_id",
        "checkpoint_id",
        "action",
        "instructions",
        "confirmations",
        "resume_state",
        "new_owner",
        "delivery_id",
    }
    assert body["action"] == "resume" and body["delivery_id"] == str(decision.delivery_id)
    assert [s["name"] for s in body["resume_state"]["committed"]] == ["issue_refund"]

    decision.refresh_from_db()
    paused.refresh_from_db()
    workflow = paused.workflow
    workflow.refresh_from_db()
    assert decision.status == Decision.Status.SUCCEEDED and decision.attempts == 1
    assert paused.status == Checkpoint.Status.RESOLVED
    assert workflow.status == Workflow.Status.RUNNING
    assert workflow.owner.username == "olivia"


def test_the_workflow_shows_resuming_as_soon_as_the_decision_is_saved(paused, alice):
    decide(paused, alice)
    paused.workflow.refresh_from_db()
    assert paused.workflow.status == Workflow.Status.RESUMING


def test_a_failed_attempt_is_retried_later_with_the_same_delivery_id(paused, alice, receiver, settings):
    settings.DELIVERY_BACKOFF_SECONDS = 0
    receiver.respond = lambda record: 503
    decision = decide(paused, alice)
    assert tasks.deliver_decision(decision.pk) == "retry"
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED
    assert "503" in decision.last_error
    assert decision.next_attempt_at is not None

    receiver.respond = lambda record: 204
    assert tasks.deliver_decision(decision.pk) == "delivered"
    assert receiver.delivery_ids() == [str(decision.delivery_id)] * 2


def test_after_the_last_attempt_the_checkpoint_returns_to_the_queue_with_the_failure(paused, alice, receiver, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 2
    settings.DELIVERY_BACKOFF_SECONDS = 0
    receiver.respond = lambda record: 500
    decision = decide(paused, alice)
    tasks.deliver_decision(decision.pk)
    tasks.deliver_decision(decision.pk)

    decision.refresh_from_db()
    paused.refresh_from_db()
    paused.workflow.refresh_from_db()
    assert decision.status == Decision.Status.FAILED and "500" in decision.last_error
    assert paused.status == Checkpoint.Status.OPEN and paused.assignee is None
    assert paused.workflow.status == Workflow.Status.PAUSED
    assert Event.objects.filter(checkpoint=paused, verb="returned_to_queue").count() == 1
    # Back on the queue, a new decision can be made.
    paused.claim(by=alice)
    assert decide(paused, alice).status == Decision.Status.QUEUED


@pytest.mark.parametrize("failure", ["unreachable", "timeout", "crash", "bad_signature", "server_error"])
def test_every_failure_of_an_attempt_ends_in_a_visible_state(paused, alice, receiver, settings, monkeypatch, failure):
    settings.DELIVERY_TIMEOUT_SECONDS = 0.5
    if failure == "unreachable":
        receiver.close()
    elif failure == "timeout":
        import time

        receiver.respond = lambda record: time.sleep(2) or 200
    elif failure == "bad_signature":  # the agent refuses what it cannot verify
        receiver.respond = lambda record: 401
    elif failure == "server_error":
        receiver.respond = lambda record: 500
    else:
        monkeypatch.setattr(runtime, "deliver", lambda decision: 1 / 0)
    decision = decide(paused, alice)
    assert tasks.deliver_decision(decision.pk) == "retry"
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED
    assert decision.last_error
    assert decision.lease_expires_at is None


def test_a_repeated_task_message_does_not_deliver_twice(paused, alice, receiver):
    decision = decide(paused, alice)
    assert tasks.deliver_decision(decision.pk) == "delivered"
    assert tasks.deliver_decision(decision.pk) == "skipped"
    assert len(receiver.deliveries) == 1


def test_a_task_for_a_decision_already_running_elsewhere_stands_back(paused, alice, receiver):
    decision = decide(paused, alice)
    assert decision.start_attempt()
    assert tasks.deliver_decision(decision.pk) == "skipped"
    assert receiver.deliveries == []


def test_an_expired_lease_is_reclaimed_and_delivered_again(paused, alice, receiver):
    decision = decide(paused, alice)
    assert decision.start_attempt()  # a worker took it and died
    Decision.objects.filter(pk=decision.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks.reclaim_stuck_deliveries() == 1
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED
    assert tasks.deliver_decision(decision.pk) == "delivered"


def test_handoff_gives_the_workflow_and_its_packet_to_the_new_owner(paused, alice, bob, receiver):
    decision = decide(paused, alice, action="handoff", new_owner=bob)
    tasks.deliver_decision(decision.pk)
    workflow = Workflow.objects.get(pk=paused.workflow_id)
    assert workflow.status == Workflow.Status.HANDED_OFF
    assert workflow.owner == bob
    assert workflow.handoff_note == "Write the note, then notify."
    assert receiver.deliveries[0]["body"]["new_owner"] == "bob"


def test_abort_ends_the_workflow(paused, alice, receiver):
    decision = decide(paused, alice, action="abort")
    tasks.deliver_decision(decision.pk)
    assert Workflow.objects.get(pk=paused.workflow_id).status == Workflow.Status.ABORTED


def lease_ran_out(decision):
    """The decision's wait for a worker is over (its next attempt a second ago, on the database's clock)."""
    Decision.objects.filter(pk=decision.pk).update(next_attempt_at=database_now() - timedelta(seconds=1))


def due_in(decision):
    """Seconds until the relay sends the decision again, on the database's clock, to the second."""
    return round((Decision.objects.get(pk=decision.pk).next_attempt_at - database_now()).total_seconds())


def test_the_relay_sends_a_decision_again_only_when_no_worker_took_it_and_waits_longer_each_time(
    paused, alice, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.DELIVERY_LEASE_SECONDS = 60
    sent = []
    monkeypatch.setattr(tasks.deliver_decision, "apply_async", lambda args, **kw: sent.append(args[0]))
    with django_capture_on_commit_callbacks(execute=True):
        decision = decide(paused, alice)
    assert sent == [decision.pk]  # handed to the broker right after the commit
    assert tasks.relay_outbox() == 1  # and by the relay, in case that process died before it sent
    assert tasks.relay_outbox() == 0
    waits = [due_in(decision)]
    for _ in range(3):  # no worker takes it: a lost message, or workers far behind
        lease_ran_out(decision)
        assert tasks.relay_outbox() == 1
        assert tasks.relay_outbox() == 0
        waits.append(due_in(decision))
    assert waits == [60, 120, 240, 240]  # one lease, then two, then four at the most
    assert sent == [decision.pk] * 5
    # A worker took it and the attempt failed: the retry starts again from one lease.
    assert Decision.objects.get(pk=decision.pk).start_attempt()
    Decision.objects.get(pk=decision.pk).mark_attempt_failed("timed out")
    lease_ran_out(decision)
    assert tasks.relay_outbox() == 1
    assert due_in(decision) == 60


def test_the_relay_keeps_a_decision_due_when_the_broker_is_down(
    paused, alice, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(args, **kw):
        raise ConnectionError("Error 111 connecting to redis: Connection refused.")

    monkeypatch.setattr(tasks.deliver_decision, "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        decision = decide(paused, alice)  # the hand-off right after the commit fails
    due_at = Decision.objects.get(pk=decision.pk).next_attempt_at
    assert Decision.objects.dispatchable().filter(pk=decision.pk).exists()
    with pytest.raises(ConnectionError):
        tasks.relay_outbox()
    assert Decision.objects.get(pk=decision.pk).next_attempt_at == due_at
    assert Decision.objects.dispatchable().filter(pk=decision.pk).exists()


def test_a_polling_agent_is_not_sent_anything(db, alice):
    agent, _ = make_agent("poller")
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    decision = decide(checkpoint, alice)
    assert decision.is_polled
    assert not Decision.objects.dispatchable().exists()
    assert tasks.deliver_decision(decision.pk) == "skipped"


def test_resume_state_travels_with_the_confirmations(db, alice, receiver):
    agent, _ = make_agent("support-bot", resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent, refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = decide(checkpoint, alice, confirmations={key: "happened"}, confirmation_refs={key: "R-88"})
    tasks.deliver_decision(decision.pk)
    body = receiver.deliveries[0]["body"]
    assert body["confirmations"] == {key: "happened"}
    assert body["confirmation_refs"] == {key: "R-88"}
    assert [e["idempotency_key"] for e in body["resume_state"]["unknown_effects"]] == [key]
    assert json.loads(receiver.deliveries[0]["raw"]) == body
