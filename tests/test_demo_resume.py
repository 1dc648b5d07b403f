"""The demo fleet's resume never repeats a committed effect: real agent runs against the real API.

Each test drives a demo agent over HTTP against ``live_server``, forces a fault,
decides like an operator and carries the decision out with the delivery task
called directly; then it counts what the simulated systems really executed.
"""

import json
import urllib.error
import urllib.request

import pytest
from recovery_client import sign

from demo.journal import Journal
from demo.server import ResumeServer
from workflows import runtime, tasks
from workflows.models import Checkpoint, Decider, Decision, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def paused_run(fleet, owner, forced, **kwargs):
    agent = fleet.agent(owner=owner, forced=forced, **kwargs)
    run, outcome = agent.start()
    assert outcome == "paused"
    workflow = Workflow.objects.get(agent__name=agent.name, external_id=run.external_id)
    return agent, workflow, workflow.checkpoints.get()


def deliver(fleet, decision):
    assert tasks.deliver_decision(decision.pk) == "delivered"
    fleet.server.release()
    assert fleet.server.join(timeout=30), "the agent did not finish carrying the decision out"


def resume(fleet, checkpoint, by, **kwargs):
    decision = Decider(checkpoint).decide(by=by, action="resume", instructions="Carry on.", **kwargs)
    deliver(fleet, decision)
    return decision


def test_a_crash_between_refund_and_note_resumes_without_a_second_refund(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})

    state = checkpoint.resume_state
    assert checkpoint.reason == "model_timeout" and checkpoint.at_seq == 4
    [refund] = state["committed"]
    assert refund["name"] == "issue_refund" and refund["external_ref"].startswith("R-")
    assert state["promises"] == ["refund within 5 days"]
    assert state["unknown_effects"] == []
    assert state["state"]["remaining"] == ["write_ticket_note", "notify_customer"]
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}

    resume(fleet, checkpoint, operator)

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert workflow.owner == olivia  # the same owner gets the workflow back
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    assert fleet.ledgers.duplicates() == {}
    steps = list(workflow.steps.order_by("seq").values_list("name", "status", "external_ref"))
    assert [(name, status) for name, status, _ in steps] == [
        ("read_ticket", "committed"),
        ("decide_refund", "committed"),
        ("issue_refund", "committed"),
        ("write_ticket_note", "committed"),
        ("notify_customer", "committed"),
    ]
    assert steps[2][2] == refund["external_ref"]


@pytest.mark.parametrize(
    ("fault", "executed_before", "confirmation"),
    [
        ("timeout_after_commit", 1, "happened"),  # it really happened: confirmed, not repeated
        ("timeout_before_commit", 0, "did_not_happen"),  # it did not: issued once, with the same key
    ],
    ids=["after_commit", "before_commit"],
)
def test_a_refund_that_timed_out_is_confirmed_and_issued_exactly_once(
    fleet, olivia, operator, fault, executed_before, confirmation
):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"issue_refund": fault})
    key = f"{workflow.external_id}:refund"
    assert [e["idempotency_key"] for e in checkpoint.unknown_effects] == [key]
    assert fleet.executed(workflow.external_id)["refund"] == executed_before

    # What the operator saw on the ledgers: the refund's reference when it happened.
    refs = {key: fleet.ledgers.executions_for(key)[0].ref} if executed_before else {}
    resume(fleet, checkpoint, operator, confirmations={key: confirmation}, confirmation_refs=refs, money_confirmed=True)

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    step = workflow.steps.get(idempotency_key=key)
    assert step.status == "committed" and step.seq == 3
    assert step.external_ref == fleet.ledgers.executions_for(key)[0].ref


def test_a_refund_the_payment_system_refused_is_retried_under_its_key_and_commits_once(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"issue_refund": "service_error"})
    key = f"{workflow.external_id}:refund"
    failed = workflow.steps.get(idempotency_key=key)
    assert failed.status == "failed" and checkpoint.unknown_effects == []  # refused: known not to have happened
    assert fleet.executed(workflow.external_id)["refund"] == 0

    decision = Decider(checkpoint).decide(
        by=operator, action="retry_step", instructions="Try the refund again.", money_confirmed=True
    )
    assert decision.payload()["retry"] == {
        "seq": failed.seq,
        "name": "issue_refund",
        "idempotency_key": key,
        "attempt": 2,
    }
    deliver(fleet, decision)

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    step = workflow.steps.get(idempotency_key=key)
    assert (step.seq, step.status, step.attempts) == (failed.seq, "committed", 2)
    assert step.history[0]["status"] == "failed" and "500" in step.history[0]["output"]["error"]
    assert step.external_ref == fleet.ledgers.executions_for(key)[0].ref


def test_a_delivery_retried_with_the_same_id_is_acted_on_once(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    calls = []
    original = agent.on_delivery
    agent.on_delivery = lambda payload: calls.append(payload["delivery_id"]) or original(payload)

    decision = resume(fleet, checkpoint, operator)
    # The console retries when it never saw the 2xx: same body, same X-Recovery-Delivery.
    assert runtime.deliver(decision) == 200
    assert fleet.server.join(timeout=30)

    assert calls == [str(decision.delivery_id)]
    assert fleet.journal.delivery_count(str(decision.delivery_id)) == 1
    assert fleet.journal.acted_more_than_once() == {}  # what make chaos reads: each delivery acted on once
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}


def post(url, body, headers):
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_delivery_with_a_bad_signature_gets_401_and_does_nothing(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    decision = Decider(checkpoint).decide(by=operator, action="resume")
    body = json.dumps(decision.payload()).encode()
    url = fleet.server.url(f"/agents/{agent.name}/resume")
    headers = {"Content-Type": "application/json", "X-Recovery-Delivery": str(decision.delivery_id)}

    assert post(url, body, {**headers, "X-Recovery-Signature": sign("not-the-secret", body)}) == 401
    assert post(url, body, headers) == 401  # unsigned
    assert post(url, body + b" ", {**headers, "X-Recovery-Signature": sign(agent.signing_secret, body)}) == 401

    assert fleet.journal.delivery_count(str(decision.delivery_id)) == 0
    assert fleet.server.join(timeout=1)
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}
    assert workflow.steps.count() == 3


def test_a_polling_agent_finds_its_decision_and_resumes_without_a_second_refund(fleet, olivia, operator):
    agent = fleet.agent(owner=olivia, polls=True, forced={"write_ticket_note": "model_timeout"})
    run = agent.create_run()
    assert agent.proceed(run) == "paused"  # what drive() does before it starts polling
    with pytest.raises(TimeoutError):
        agent.client.wait_for_decision(run.checkpoint_id, timeout=0)  # nothing decided yet

    checkpoint = Checkpoint.objects.get(pk=run.checkpoint_id)
    decision = Decider(checkpoint).decide(by=operator, action="resume")
    assert tasks.deliver_decision(decision.pk) == "skipped"  # nothing to POST: the agent fetches it
    assert agent.drive(run, waiting=True) == "completed"

    workflow = checkpoint.workflow
    workflow.refresh_from_db()
    decision.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED and workflow.owner == olivia
    assert decision.status == Decision.Status.SUCCEEDED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}


def test_a_handoff_stops_the_agent_and_nothing_more_is_executed(fleet, olivia, operator):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    decision = Decider(checkpoint).decide(
        by=operator, action="handoff", new_owner=operator, instructions="Write the note by hand."
    )
    deliver(fleet, decision)

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.HANDED_OFF
    assert fleet.journal.run(workflow.external_id)["status"] == "handed_off"
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}


def test_a_delivery_accepted_just_before_a_crash_is_carried_out_once_after_the_restart(
    fleet, olivia, operator, tmp_path
):
    agent, workflow, checkpoint = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    fleet.server.dispatch = lambda *args: None  # the process dies after answering 202, before acting

    decision = Decider(checkpoint).decide(by=operator, action="resume")
    assert tasks.deliver_decision(decision.pk) == "delivered"
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 0, "message": 0}

    restarted = ResumeServer(fleet.agents, journal=Journal(fleet.journal.path), ledgers=fleet.ledgers, port=0)
    try:
        assert restarted.recover() == 1
        assert restarted.join(timeout=30)
        assert restarted.recover() == 0  # done now: a second restart does nothing
    finally:
        restarted.httpd.server_close()

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}


def test_a_delivery_overtaken_by_a_later_checkpoint_is_not_acted_on_after_a_restart(fleet, olivia, operator):
    """Found by the chaos run: the fleet died after carrying a decision out and pausing again, before it
    marked that delivery done; at the restart the old delivery ran beside the new decision's, and both
    reported the same pending effect (each report a "resend" of the other) and executed it."""
    agent, workflow, first = paused_run(fleet, olivia, {"write_ticket_note": "model_timeout"})
    agent.faults.forced["notify_customer"] = "model_timeout"
    overtaken = resume(fleet, first, operator)  # the note is written, then the run pauses again
    second = workflow.checkpoints.get(status="open")
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 0}
    with fleet.journal.connect() as conn:  # the process died before it marked the first delivery done
        conn.execute("UPDATE deliveries SET status = 'accepted' WHERE delivery_id = ?", (str(overtaken.delivery_id),))
    fleet.server.dispatch = lambda *args: None  # the second delivery is answered 202, then the process dies too
    current = Decider(second).decide(by=operator, action="resume")
    assert tasks.deliver_decision(current.pk) == "delivered"  # the workflow runs again, by the second decision

    restarted = ResumeServer(fleet.agents, journal=Journal(fleet.journal.path), ledgers=fleet.ledgers, port=0)
    try:
        [stale] = [
            d for d in restarted.journal.unfinished_deliveries() if d["delivery_id"] == str(overtaken.delivery_id)
        ]
        restarted.dispatch(stale["agent"], stale["delivery_id"], stale["payload"])
        assert restarted.join(timeout=30)
        assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 0}

        assert restarted.recover() == 1  # the current decision, carried out as usual
        assert restarted.join(timeout=30)
    finally:
        restarted.httpd.server_close()

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED
    assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
    assert fleet.ledgers.duplicates() == {}
