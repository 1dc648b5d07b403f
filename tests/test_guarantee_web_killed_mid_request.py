"""Guarantee 4 under a web crash: killing the server during a burst leaves nothing half-written.

Real gunicorn processes serve the agent API on PostgreSQL; agents report through the
real client (which retries, safely, because the API is idempotent); the server's whole
process group is SIGKILLed three times mid-burst and restarted.
"""

import functools
import threading
import time

import pytest
from recovery_client import RecoveryClient

from tests.helpers import make_agent
from tests.stack import BIN, Stack, free_port, wait_until
from workflows.models import Checkpoint, Event, Step, Workflow

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENTS, RUNS = 12, 4
WORKFLOWS = AGENTS * RUNS


class CountingClient(RecoveryClient):
    """Counts attempts the crash interrupted, to prove the test hit requests in flight."""

    interrupted = 0

    def _once(self, method, path, data):
        try:
            return super()._once(method, path, data)
        except Exception:
            CountingClient.interrupted += 1
            raise


def serve(stack, port):
    return stack.start(
        "web",
        [str(BIN / "gunicorn"), "console.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--timeout", "30"],
        ready="Booting worker",
    )


def run_agent(client, first, errors):
    for n in range(first, first + RUNS):
        run_workflow(client, n, errors)


def run_workflow(client, n, errors):
    try:
        wf = client.create_workflow(f"T-{n}", "refund", f"Refund for ticket T-{n}")
        client.report_step(wf["id"], 1, "read_ticket", "tool", "committed", output={"n": n}, verified=True)
        client.report_step(wf["id"], 2, "decide_refund", "model", "committed", promise="refund within 5 days")
        client.report_step(
            wf["id"], 3, "issue_refund", "effect", "pending", input={"amount": "42.00"}, idempotency_key=f"T-{n}:refund"
        )
        client.open_checkpoint(wf["id"], "model_timeout", detail="model died", at_seq=4, state={"n": n})
    except Exception as exc:
        errors.append(f"T-{n}: {exc!r}")


def test_killing_the_web_server_mid_burst_leaves_no_half_written_state(rng):
    agent, token = make_agent("support-bot")
    port = free_port()
    stack = Stack("memory://", ALLOWED_HOSTS="127.0.0.1")
    try:
        web = serve(stack, port)
        client = CountingClient(f"http://127.0.0.1:{port}", token, retries=8, backoff=0.3, timeout=10)
        errors: list[str] = []
        threads = [threading.Thread(target=run_agent, args=(client, a * RUNS, errors)) for a in range(AGENTS)]
        for t in threads:
            t.start()
        for _ in range(3):
            # Wait for the burst to be in full flow, then pull the plug on the whole server.
            before = Event.objects.count()
            wait_until(functools.partial(_more_events_than, before + 3), timeout=60, what="requests to be under way")
            time.sleep(rng.uniform(0.0, 0.3))
            web.kill()
            time.sleep(0.5)
            web = serve(stack, port)
        for t in threads:
            t.join(120)
        assert errors == []
        assert CountingClient.interrupted > 0, "no request was in flight when the server was killed"
    finally:
        stack.stop()

    # Every workflow reached its checkpoint exactly once, whatever was retried across the crashes.
    assert Workflow.objects.count() == WORKFLOWS
    assert set(Workflow.objects.values_list("status", flat=True)) == {"paused"}
    assert Checkpoint.objects.count() == WORKFLOWS
    assert Step.objects.count() == 3 * WORKFLOWS
    for checkpoint in Checkpoint.objects.select_related("workflow"):
        assert set(checkpoint.resume_state) >= {
            "committed",
            "pending",
            "last_verified_output",
            "promises",
            "unknown_effects",
        }
        assert [e["idempotency_key"] for e in checkpoint.unknown_effects] == [
            f"{checkpoint.workflow.external_id}:refund"
        ]
        assert checkpoint.events.filter(verb="opened").count() == 1
    # No event without its change, no change without its event.
    assert Event.objects.filter(verb="paused").count() == WORKFLOWS


def _more_events_than(count: int) -> bool:
    return Event.objects.count() > count
