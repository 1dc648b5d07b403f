"""A worker whose Celery consumer stalls exits so that its supervisor starts it again (console/watchdog.py).

Celery's Redis consumer can stop consuming after Redis restarts while the process lives on (the hard chaos
soak lost both workers that way). The stall is made on purpose here: the worker is told to cancel its
consumer of the queue, the way the bug leaves it, and messages are then queued for it.
"""

import socket
import subprocess
import sys

import pytest

from console.watchdog import MARK, ConsumerWatchdog
from tests.stack import Stack, private_redis, wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_watchdog_judges_a_stall_only_when_messages_waited_a_whole_window_and_none_was_taken():
    clock, waiting = Clock(), [0]
    dog = ConsumerWatchdog(lambda: waiting[0], stall_seconds=30, clock=clock)
    clock.now += 100
    assert not dog.stalled()  # idle with an empty queue: healthy however long
    waiting[0] = 5
    assert not dog.stalled()  # messages appear: the window starts now
    clock.now += 20
    dog.took()  # the worker takes one: it is consuming
    clock.now += 20
    assert not dog.stalled()  # 40 s of backlog, but the last take was 20 s ago
    clock.now += 10
    assert dog.stalled()  # 30 s of backlog with no take
    waiting[0] = 0
    assert not dog.stalled()  # drained (by another worker): the window starts again with the next backlog
    waiting[0] = 1
    assert not dog.stalled()
    clock.now += 29
    assert not dog.stalled()


def test_a_worker_whose_every_slot_holds_a_task_is_busy_not_stalled():
    clock, busy = Clock(), [True]
    dog = ConsumerWatchdog(lambda: 10, stall_seconds=30, busy=lambda: busy[0], clock=clock)
    for _ in range(10):  # a long roll-up on every slot, for five minutes, with messages waiting
        clock.now += 30
        assert not dog.stalled()
    busy[0] = False  # a slot frees: from now on it must take one within the window
    assert not dog.stalled()
    clock.now += 29
    assert not dog.stalled()
    clock.now += 1
    assert dog.stalled()


def test_a_broker_that_does_not_answer_is_no_stall_of_the_workers():
    clock = Clock()

    def broker_down() -> int:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    dog = ConsumerWatchdog(broker_down, stall_seconds=30, clock=clock)
    clock.now += 100
    assert not dog.stalled()


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_consumer_stalled_beside_queued_messages_exits_and_an_idle_one_stays():
    with private_redis() as redis:
        stack = Stack(redis.url, WORKER_WATCHDOG_SECONDS="3", CELERY_WORKER_ENABLE_REMOTE_CONTROL="true")
        other = Stack(redis.url, WORKER_WATCHDOG_SECONDS="3")
        try:
            stalled = stack.worker("stalled", concurrency=1)
            idle = other.worker("idle", concurrency=1)
            # The control commands go from a process of the stack's own settings, as `celery control` would.
            node = f"stalled-{stack.queue}@{socket.gethostname()}"
            script = (
                f"import django; django.setup()\n"
                f"from console.celery import app\n"
                f"print(app.control.cancel_consumer({stack.queue!r}, destination=[{node!r}], reply=True))\n"
                f"for _ in range(3): app.send_task('workflows.tasks.sweep', queue={stack.queue!r})\n"
            )
            done = subprocess.run(
                [sys.executable, "-c", script],
                env={**stack.env(), "DJANGO_SETTINGS_MODULE": "console.settings"},
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            assert "no longer consuming" in done.stdout, f"the stall was not made: {done.stdout}{done.stderr}"
            wait_until(lambda: not stalled.alive(), timeout=60, what="the stalled worker to exit")
            assert MARK in stalled.output()
            assert "its consumer has stalled" in stalled.output()
            assert idle.alive()  # an empty queue of its own for as long: no stall, no exit
            assert MARK not in idle.output()
        finally:
            stack.stop()
            other.stop()
