"""Incidents at scale: a rollout carried out by real processes, as in production.

Real PostgreSQL, a Redis of the test's own, a real Celery worker (prefork), Celery beat sending the
periodic sweep that advances rollouts, and the outbox relay, delivering to a loopback agent endpoint
that counts the POSTs it receives per idempotency key (the ``X-Recovery-Delivery`` id). The rate
window is shortened to a second (``ROLLOUT_RATE_WINDOW_SECONDS``) so that 500 members go in seconds
under the same rules as a minute: the rate limit is then checked on every window of that length.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest

from tests.helpers import REMAINING_PLAN, make_agent, make_user, make_workflow
from tests.stack import Stack, private_redis, wait_until
from workflows.models import Checkpoint, Decision, Incident, Rollout

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WINDOW = 1.0  # seconds: the rollout's "minute" in these tests


@pytest.fixture
def redis_server():
    with private_redis() as server:
        yield server


@pytest.fixture
def stack(redis_server, tmp_path):
    # The beat sweep once a second (each sweep takes a worker process for a moment; the relay, woken by
    # NOTIFY, hands decisions over at once anyway).
    s = Stack(
        redis_server.url,
        SWEEP_INTERVAL_SECONDS="1",
        ROLLOUT_RATE_WINDOW_SECONDS=str(WINDOW),
        ROLLOUT_RECHECK_SECONDS="0.2",
        DELIVERY_LEASE_SECONDS="30",
        DELIVERY_BACKOFF_SECONDS="0.2",
        DELIVERY_TIMEOUT_SECONDS="30",
        WORKER_WATCHDOG_SECONDS="0",
    )
    s.beat_schedule = tmp_path / "celerybeat-schedule"  # the test's own beat file
    yield s
    s.stop()


def start(stack):
    stack.worker(concurrency=2)
    stack.relay()
    stack.beat(stack.beat_schedule)


def outage(receiver, members: int) -> Incident:
    """One agent, ``members`` workflows stopped at the same step for the same reason: one incident."""
    agent, _ = make_agent("support-bot", resume_url=receiver.url)
    agent.incident_threshold = 5
    agent.save()
    for i in range(members):
        Checkpoint.open_for(
            make_workflow(agent),
            reason="tool_error",
            at_seq=4,
            plan=REMAINING_PLAN,
            detail=f"payments provider answered 502 Bad Gateway for T-{1000 + i} (req {i:08x})",
        )
    incident = Incident.objects.get()
    assert incident.members.count() == members
    return incident


def decisions_of(incident: Incident):
    return Decision.objects.filter(checkpoint__incident=incident)


def most_in_any_window(times, seconds: float) -> int:
    """The largest number of instants in any half-open window [t, t + seconds)."""
    times = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(times):
        while (t - times[first]).total_seconds() >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_a_500_member_incident_is_recovered_in_waves_every_member_delivered_once_within_the_rate(stack, receiver):
    incident = outage(receiver, 500)
    operator = make_user("alice")
    start(stack)
    rollout = Rollout.start(
        incident, action="resume", by=operator, instructions="the provider is back", per_minute=100, watch_seconds=2
    )

    def completed():
        rollout.refresh_from_db()
        return rollout.status == Rollout.Status.COMPLETED

    # Deadlines, not timings: on a loaded machine 500 decisions through the single-decision path take minutes.
    wait_until(completed, timeout=900, interval=0.5, what="the rollout to complete")
    wait_until(
        lambda: decisions_of(incident).filter(status=Decision.Status.SUCCEEDED).count() == 500,
        timeout=900,
        interval=0.5,
        what="every member's decision to be delivered",
    )

    decisions = list(decisions_of(incident))
    assert len(decisions) == 500
    assert len({d.checkpoint_id for d in decisions}) == 500, "one decision per member"
    per_key = Counter(receiver.delivery_ids())
    assert set(per_key) == {str(d.delivery_id) for d in decisions}, "none lost, none invented"
    assert set(per_key.values()) == {1}, f"delivered more than once: {[k for k, n in per_key.items() if n > 1]}"
    assert not Checkpoint.objects.filter(incident=incident).exclude(status=Checkpoint.Status.RESOLVED).exists()

    sizes = [len(wave["checkpoints"]) for wave in rollout.waves]
    assert sizes[0] == 25, "the canary: 5 % of 500"
    assert sizes == [25, 50, 100, 100, 100, 100, 25], sizes
    assert sorted(itertools.chain.from_iterable(w["checkpoints"] for w in rollout.waves)) == sorted(
        d.checkpoint_id for d in decisions
    )
    # The rate limit, on what the rollout decided: never more than per_minute in any window of its length.
    assert most_in_any_window([d.decided_at for d in decisions], WINDOW) <= rollout.per_minute


def test_a_runtime_failing_half_its_resumes_halts_the_rollout_after_the_canary(stack, receiver):
    answered = itertools.count(1)
    lock = threading.Lock()

    def every_other(record):  # the runtime refuses every other resume it is sent (1st, 3rd, ...)
        with lock:
            return 500 if next(answered) % 2 else 200

    receiver.respond = every_other
    stack.overrides["DELIVERY_MAX_ATTEMPTS"] = "1"  # a refused resume fails its decision at once
    incident = outage(receiver, 40)
    operator = make_user("alice")
    start(stack)
    # A long watch window: the halt must come from the canary's failure, never from a window running out.
    rollout = Rollout.start(incident, action="resume", by=operator, per_minute=100, watch_seconds=600)

    def halted():
        rollout.refresh_from_db()
        return rollout.status == Rollout.Status.HALTED

    wait_until(halted, timeout=120, what="the rollout to halt")
    assert [len(w["checkpoints"]) for w in rollout.waves] == [2], "the canary (5 % of 40), nothing after it"
    assert "1 of 2 failed" in rollout.halt_reason
    assert decisions_of(incident).count() == 2
    wait_until(lambda: len(receiver.deliveries) == 2, timeout=60, what="the canary's two deliveries")
    accepted = decisions_of(incident).filter(status=Decision.Status.SUCCEEDED)
    assert accepted.count() <= 2 and decisions_of(incident).filter(status=Decision.Status.FAILED).count() == 1
    # The failed member is back on the queue; the other 38 were never decided.
    assert incident.members.open().count() == 39
