"""recovery_client.ResumeReceiver behind a WSGI server takes the console's real, signed delivery: the workflow
resumes once, the refund is not repeated, and a resend of the same decision is answered as a duplicate."""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from recovery_client import Delivery, Paused, RecoveryClient, ResumeReceiver

from tests.helpers import make_agent
from workflows import runtime, tasks
from workflows.models import Checkpoint, Decider, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def refund(client: RecoveryClient, refunds: list[str], *, crash: bool, decision=None) -> None:
    with client.workflow("T-RR-1", "refund", "Refund for ticket T-RR-1", decision=decision) as wf:
        with wf.effect("issue_refund", input={"amount": "42.00", "currency": "EUR"}) as effect:
            if not effect.done:
                refunds.append(effect.idempotency_key)
                effect.record(external_ref="R-88")
        with wf.step("draft_note", kind="model") as step:
            if crash:
                raise TimeoutError("the model did not answer")
            step.record("Refunded 42.00 EUR.")


def test_the_receiver_verifies_the_consoles_delivery_resumes_once_and_dedupes_a_resend(live_server, alice):
    refunds: list[str] = []
    outcomes: list[str] = []

    def on_decision(delivery: Delivery) -> None:
        refund(client, refunds, crash=False, decision=delivery.decision)
        outcomes.append(delivery.action)

    agent, token = make_agent("receiver-bot")
    receiver = ResumeReceiver(agent.signing_secret, on_decision)
    server = make_server("127.0.0.1", 0, receiver.wsgi, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        agent.resume_url = f"http://127.0.0.1:{server.server_port}/resume"
        agent.save(update_fields=["resume_url"])
        client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05)

        with pytest.raises(Paused) as paused:
            refund(client, refunds, crash=True)
        checkpoint = Checkpoint.objects.get(pk=paused.value.checkpoint_id)
        decision = Decider(checkpoint).decide(by=alice, action="resume", instructions="Carry on.", money_confirmed=True)

        assert tasks.deliver_decision(decision.pk) == "delivered"  # the worker's POST, signed by the console
        assert receiver.join(60)
        assert outcomes == ["resume"]
        assert runtime.deliver(decision) == 200  # the same decision again: a duplicate, not acted on
        assert receiver.join(60)
        assert outcomes == ["resume"]
    finally:
        server.shutdown()
        server.server_close()

    assert refunds == ["T-RR-1:issue_refund"]
    workflow = Workflow.objects.get(external_id="T-RR-1")
    assert workflow.status == Workflow.Status.COMPLETED
    assert list(workflow.steps.order_by("seq").values_list("name", "status")) == [
        ("issue_refund", "committed"),
        ("draft_note", "failed"),
        ("draft_note", "committed"),
    ]
