"""Handing a decision to the workers: at once after its commit, with the outbox relay as the safety net.

The one module of the models that reaches the Celery tasks (which import the models: the imports are lazy).
``wake_relay`` is shared by the outboxes the relay drains (decisions, notifications)."""

from __future__ import annotations

import logging

from django.db import connection

log = logging.getLogger(__name__)


def wake_relay() -> None:
    """Nudge the outbox relay (LISTEN/NOTIFY on PostgreSQL); polling covers every other case."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("NOTIFY recovery_outbox")


def hand_to_broker(decision_id: int) -> None:
    """Right after the decision commits: send it to the workers now (no relay hop on the happy path).

    The row is left due, so the relay is the safety net: if this send fails (broker down) the
    relay is woken and retries; if the message is lost, the relay sends it again at its next
    tick unless a worker took the decision by then. A second message is harmless: the
    delivery lease lets one worker deliver and the other stands back.
    """
    from ..tasks import deliver_decision
    from .broker import BrokerStatus

    try:
        deliver_decision.apply_async((decision_id,), retry=False)
    except Exception as exc:
        log.warning("decision %s: broker unavailable, the outbox relay will send it: %s", decision_id, exc)
        BrokerStatus.refused(exc)
        wake_relay()
    else:
        BrokerStatus.took()


# How many decisions committed together go in one broker message (``tasks.deliver_decisions``): enough to spare
# the broker and the workers a message each, few enough that both worker processes get batches of a wave.
BATCH = 25


def hand_many_to_broker(decision_ids: list[int]) -> None:
    """``hand_to_broker`` for decisions that committed together (a rollout's wave): sent now in batches of
    ``BATCH`` a message, the broker's recovery recorded once; after a refusal the rest are left to the relay,
    which is woken (every row stays due until a worker takes it, as for a single decision)."""
    from ..tasks import deliver_decisions
    from .broker import BrokerStatus

    for start in range(0, len(decision_ids), BATCH):
        batch = decision_ids[start : start + BATCH]
        try:
            deliver_decisions.apply_async((batch,), retry=False)
        except Exception as exc:
            left = len(decision_ids) - start
            log.warning("%d decisions: broker unavailable, the relay will send them: %s", left, exc)
            BrokerStatus.refused(exc)
            wake_relay()
            return
    if decision_ids:
        BrokerStatus.took()


def stand_down(decision_id: int) -> None:
    """After a failover's commit: the replaced agent is told to stand down, by a worker."""
    from ..tasks import send_stand_down  # tasks import the models

    send_stand_down.delay(decision_id)
