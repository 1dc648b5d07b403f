"""A Celery worker that stopped taking messages from a queue that holds them exits, so that its supervisor
(docker compose's restart policy, systemd, the chaos run's) starts it again.

Celery's Redis consumer can stop consuming after Redis restarts while the process lives on and says
nothing (celery/celery#8030, #9054, #10302, still reported on 5.6). The hard chaos run found it: after
one Redis kill both workers sat idle beside hundreds of queued decisions. Nothing is lost (the outbox
keeps every decision due and sends it again) but nothing is delivered either, until a person restarts
the workers. This thread notices instead: messages waited in the worker's queues through a whole
``WORKER_WATCHDOG_SECONDS`` window and the worker took none of them.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

EXIT_CODE = 75  # EX_TEMPFAIL: start me again
MARK = "consumer watchdog: stalled"  # only the leaving line carries it: the chaos run tells these exits from crashes


class ConsumerWatchdog:
    """Decides, from the queues' backlog and the worker's last take, whether the consumer has stalled."""

    def __init__(
        self,
        backlog: Callable[[], int],
        *,
        stall_seconds: float,
        busy: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backlog, self.stall_seconds, self.busy, self.clock = backlog, stall_seconds, busy, clock
        self.last_taken = clock()
        self.waiting_since: float | None = None

    def took(self) -> None:
        """The worker received a message (Celery's task_received signal)."""
        self.last_taken = self.clock()

    def stalled(self) -> bool:
        """True when messages have waited a whole window and the worker, with room for more, took none
        meanwhile. A worker whose every slot holds a task (a long roll-up, a slow delivery) takes nothing
        because it is busy, not stalled; a broker that cannot be asked is not a stall of this worker's
        (the relay and the banner report it)."""
        if self.busy():
            self.took()  # full: it asks for more when a slot frees; the window starts from then
            return False
        try:
            waiting = self.backlog()
        except Exception as exc:  # the broker is down or restarting: judge again next time
            log.info("consumer watchdog: the broker did not answer (%s); judging again later", exc)
            self.waiting_since = None
            return False
        now = self.clock()
        if waiting == 0:
            self.waiting_since = None
            return False
        if self.waiting_since is None:
            self.waiting_since = now
        return now - max(self.waiting_since, self.last_taken) >= self.stall_seconds


def full(concurrency: int) -> Callable[[], bool]:
    """Every pool slot holds a task this worker received (with a prefetch of one, it takes no more)."""
    from celery.worker import state

    return lambda: len(state.reserved_requests) >= concurrency


def queue_backlog(app: Any, queues: list[str]) -> Callable[[], int]:
    """Messages waiting in ``queues`` (not those a worker already holds), asked on a connection of its own."""
    from kombu.exceptions import ChannelError

    def backlog() -> int:
        waiting = 0
        with app.connection_for_read() as connection:
            channel = connection.default_channel
            for name in queues:
                try:
                    waiting += channel.queue_declare(queue=name, passive=True).message_count
                except ChannelError:  # no such queue yet: nothing waits in it
                    continue
        return int(waiting)

    return backlog


def watch(
    watchdog: ConsumerWatchdog, *, interval: float, stop: threading.Event, leave: Callable[[], None]
) -> threading.Thread:
    def run() -> None:
        while not stop.wait(interval):
            if watchdog.stalled():
                log.critical(
                    "%s: messages waited in the worker's queues for %.0f s and it took none: its "
                    "consumer has stalled (celery/celery#10302); exiting so that the supervisor starts it "
                    "again",
                    MARK,
                    watchdog.stall_seconds,
                )
                leave()
                return

    thread = threading.Thread(target=run, name="consumer-watchdog", daemon=True)
    thread.start()
    return thread


def leave_process(grace: float = 10.0) -> None:
    """A cold shutdown (the pool's processes too), then out for good if the stalled loop never runs it."""
    os.kill(os.getpid(), signal.SIGQUIT)
    time.sleep(grace)
    os._exit(EXIT_CODE)
