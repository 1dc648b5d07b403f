"""Guarantee 2: an approved decision is never lost — broker down, broker hanging, worker killed.

Real PostgreSQL, a Redis of the test's own (so it can be stopped), real Celery
worker processes and the real outbox relay, delivering to a recording endpoint.
"""

import socket
import threading
import time

import pytest

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from tests.stack import Stack, private_redis, wait_until
from workflows.models import Checkpoint, Decider, Decision, Workflow

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_server():
    with private_redis() as server:
        yield server


@pytest.fixture
def stack(redis_server):
    s = Stack(
        redis_server.url,
        DELIVERY_LEASE_SECONDS="4",
        DELIVERY_BACKOFF_SECONDS="0.2",
        SWEEP_INTERVAL_SECONDS="0.3",
        DELIVERY_TIMEOUT_SECONDS="5",
    )
    yield s
    s.stop()


def approve(receiver, n=1):
    operator = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    decisions = []
    for _ in range(n):
        checkpoint = make_checkpoint(make_worked_example(agent=agent))
        decisions.append(
            Decider(checkpoint).decide(by=operator, action="resume", instructions="go on", money_confirmed=True)
        )
    return decisions


def succeeded(decisions):
    return Decision.objects.filter(pk__in=[d.pk for d in decisions], status="succeeded").count() == len(decisions)


def test_an_approved_decision_is_carried_out_by_a_real_worker(stack, receiver):
    stack.worker()
    stack.relay()
    [decision] = approve(receiver)
    wait_until(lambda: succeeded([decision]), timeout=60, what="delivery")
    assert receiver.delivery_ids() == [str(decision.delivery_id)]
    assert Checkpoint.objects.get(pk=decision.checkpoint_id).status == "resolved"
    assert Workflow.objects.get(checkpoints=decision.checkpoint_id).status == "running"


def test_a_decision_approved_while_the_broker_is_down_goes_out_when_it_is_back(stack, receiver, redis_server):
    stack.worker()
    relay = stack.relay()
    redis_server.stop()
    [decision] = approve(receiver)
    decision.refresh_from_db()
    assert decision.status == "queued"  # saved and shown as queued, nothing raised at the operator
    wait_until(
        lambda: relay.output().count("relay tick failed") >= 2,
        timeout=60,
        what="the relay to fail against the dead broker twice",
    )
    assert receiver.deliveries == []
    redis_server.start()  # nobody touches the decision: the relay and the worker reconnect by themselves
    wait_until(lambda: succeeded([decision]), timeout=90, what="delivery after the broker came back")
    assert set(receiver.delivery_ids()) == {str(decision.delivery_id)}


def test_a_decision_lost_with_a_redis_restarted_empty_is_sent_again_and_delivered_once(stack, receiver, redis_server):
    """The chaos run's hard profile, in one step: the relay handed the decision to Redis, and Redis died before
    any worker took it and came back with nothing. The outbox row's lease runs out and the relay sends it again."""
    import redis

    relay = stack.relay()
    [decision] = approve(receiver)
    broker = redis.Redis.from_url(redis_server.url)
    wait_until(lambda: broker.llen(stack.queue) == 1, timeout=30, what="the relay to hand the decision to Redis")
    broker.close()
    redis_server.stop()  # SIGKILL-like: it keeps nothing on disk, so it comes back empty
    redis_server.start()
    assert redis.Redis.from_url(redis_server.url).llen(stack.queue) == 0  # the message is gone
    stack.worker()
    wait_until(lambda: succeeded([decision]), timeout=90, what="the decision to be sent again and delivered")
    assert receiver.delivery_ids() == [str(decision.delivery_id)]
    assert relay.output().count("relayed 1 decision") >= 2  # sent twice: once into the void, once for real


def test_the_relay_gives_up_a_tick_promptly_when_the_broker_hangs(receiver):
    # A TCP server that accepts and never answers: without socket timeouts, .delay() blocks forever.
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        hole.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(hole.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        [decision] = approve(receiver)
        stack = Stack(f"redis://127.0.0.1:{hole.getsockname()[1]}/0")
        relay = stack.start(
            "relay-once", [str(__import__("tests.stack").stack.BIN / "python"), "manage.py", "run_relay", "--once"]
        )
        wait_until(lambda: not relay.alive(), timeout=90, what="the relay tick to give up on a hanging broker")
        assert "relay tick failed" in relay.output()
        assert Decision.objects.dispatchable().filter(pk=decision.pk).exists()  # still due, not lost
    finally:
        stop.set()
        for conn in held:
            conn.close()
        hole.close()


def test_a_worker_killed_mid_delivery_is_replaced_and_the_decision_delivered_with_the_same_id(stack, receiver, rng):
    """Randomised SIGKILLs of whole workers while deliveries are in flight; the chaos run does many more."""
    receiver.respond = lambda record: time.sleep(rng.uniform(0.0, 0.6)) or 200
    worker = stack.worker("w1")
    stack.relay()
    decisions = approve(receiver, n=12)
    kills = 0
    deadline = time.monotonic() + 120
    while (kills < 4 or not succeeded(decisions)) and time.monotonic() < deadline:
        if kills < 4 and succeeded(decisions):
            # A loaded machine starts a replacement worker slowly: more decisions keep deliveries in flight
            # until every kill has struck one, instead of the loop ending with kills to spare.
            decisions += approve(receiver, n=4)
        if kills < 4 and receiver.deliveries:
            time.sleep(rng.uniform(0.0, 0.8))  # before the POST, while the agent answers, after it answered
            worker.kill()
            kills += 1
            worker = stack.worker(f"w{kills + 1}")
        time.sleep(0.2)
    wait_until(lambda: succeeded(decisions), timeout=90, what="every decision to be delivered after the kills")
    assert kills == 4
    delivered = receiver.delivery_ids()
    assert set(delivered) == {str(d.delivery_id) for d in decisions}  # none lost, none invented
    # The same decision may be POSTed more than once, always with the same delivery id.
    assert Decision.objects.filter(pk__in=[d.pk for d in decisions]).exclude(status="succeeded").count() == 0


def test_a_task_redelivered_past_the_visibility_timeout_does_not_deliver_twice(redis_server, receiver):
    """Redis hands an unacked task to another worker after the visibility timeout; the lease says no."""
    stack = Stack(
        redis_server.url,
        CELERY_VISIBILITY_TIMEOUT="1",
        CELERY_UNACKED_RESTORE_INTERVAL="1",
        DELIVERY_LEASE_SECONDS="30",
        SWEEP_INTERVAL_SECONDS="0.3",
        DELIVERY_TIMEOUT_SECONDS="20",
    )
    try:
        receiver.respond = lambda record: time.sleep(6) or 200  # far longer than the visibility timeout
        w1, w2 = stack.worker("w1", concurrency=1), stack.worker("w2", concurrency=1)
        stack.relay()
        [decision] = approve(receiver)
        wait_until(lambda: succeeded([decision]), timeout=90, what="the slow delivery")
        logs = (w1.output() + w2.output()).splitlines()
        received = sum("deliver_decision[" in line and "received" in line.lower() for line in logs)
        assert len(receiver.deliveries) == 1
        assert received >= 2, "the broker never redelivered: the test did not exercise the pitfall"
    finally:
        stack.stop()
