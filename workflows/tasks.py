"""Celery tasks: thin, idempotent, take ids, re-read under a lock.

The approving request hands a decision to the broker when its transaction
commits (``relay.hand_to_broker``); the decision row stays its own outbox
entry, and ``relay_outbox`` (run by ``manage.py run_relay``, and by beat as a
fallback) sends again what the broker refused or lost. A database lease per
attempt decides who may deliver; ``sweep`` reclaims expired leases.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypedDict

from celery import shared_task
from celery.app.task import Task
from django.conf import settings
from django.db import transaction
from django.db.models import Model, QuerySet

from . import notify, runtime
from .clock import database_now
from .models import (
    Checkpoint,
    CheckpointQuerySet,
    Conflict,
    Decision,
    Delivery,
    Drill,
    Event,
    Reason,
    ReplayRun,
    Rollout,
    Runbook,
    Workflow,
    leases,
)
from .models.broker import BrokerStatus, repair_folder_broker
from .models.clocks import SlaClock
from .models.slack import SlackMessage
from .slack.outbox import send_slack_message

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def deliver_decision(decision_id: int) -> str:
    decision = leases.take(decision_id)  # PostgreSQL: the lease and the read in one statement
    if isinstance(decision, str):
        return decision  # "skipped" (finished, leased elsewhere, polled) or "lost" (leased meanwhile)
    # Outside any transaction: the runtime may be slow. The delivery id makes a repeat harmless.
    try:
        runtime.deliver(decision)
    except runtime.DeliveryError as exc:
        decision.mark_attempt_failed(str(exc))
        return "retry"
    except Exception as exc:  # a bug must still end in a visible state, never in running forever
        log.exception("delivering decision %s", decision_id)
        decision.mark_attempt_failed(f"Internal error while delivering: {type(exc).__name__}: {exc}")
        return "retry"
    leases.record_delivered(decision)  # PostgreSQL: its moves and events in one statement when it resumed
    return "delivered"


@shared_task(acks_late=True, ignore_result=True)
def deliver_decisions(decision_ids: list[int]) -> dict[str, int]:
    """Decisions committed together (a rollout's wave), handed over in one message: each delivered in turn as
    ``deliver_decision`` delivers it, with its own lease, POST and record, so exactly-once is each decision's
    as before. One broker message and one task's overhead for the batch instead of one a decision. A decision
    this worker does not reach (it died, or the database failed under it) stays due: the relay sends it again
    on its own, and a copy of this message re-delivered after a crash skips the ones already delivered."""
    outcomes: dict[str, int] = {}
    for decision_id in decision_ids:
        try:
            outcome = deliver_decision(decision_id)
        except Exception:  # the rest of the batch still goes; this one is left to the relay and the lease sweep
            log.exception("delivering decision %s of a batch", decision_id)
            outcome = "error"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


@shared_task(acks_late=True, ignore_result=True)
def run_replay(replay_id: int) -> str:
    """Ask the runtime to replay; record its answer. Every failure ends the run failed with its reason."""
    run = ReplayRun.objects.select_related("agent", "workflow").filter(pk=replay_id).first()
    if run is None or not run.start():
        return "skipped"  # cancelled, expired or taken by another worker meanwhile
    try:
        answer = runtime.replay(run)
    except runtime.ReplayError as exc:
        run.fail(str(exc))
        return "failed"
    except Exception as exc:  # a bug must still end the replay visibly, never leave it running
        log.exception("replaying %s", replay_id)
        run.fail(f"Internal error while replaying: {type(exc).__name__}: {exc}")
        return "failed"
    if answer is None:
        return "waiting"  # accepted: the runtime posts its results before the deadline, or the sweep fails it
    run.record_results(answer)
    return "recorded"


def settle_replays(now: datetime | None = None) -> tuple[int, int]:
    """Fail replays past their deadline (never stuck); send again queued ones a lost broker message left."""
    now = now or database_now()
    expired = sum(
        run.fail(
            f"No result before the deadline ({settings.REPLAY_DEADLINE_SECONDS} s after it was "
            "asked for): the runtime is too slow or never answered."
        )
        for run in ReplayRun.objects.expired(now)
    )
    stale = ReplayRun.objects.filter(
        status=ReplayRun.Status.QUEUED, requested_at__lt=now - timedelta(seconds=settings.DELIVERY_LEASE_SECONDS)
    )
    for run in stale[:100]:
        run.dispatch()
    return expired, stale.count()


def relay_outbox(limit: int = 100) -> int:
    """Send due decisions to the broker. Rows stay due until a worker takes them.

    A row's next attempt moves a lease ahead (then two, then four: ``Decision.redispatched``), so a
    message lost by the broker is sent again later without flooding a queue that is only slow.
    """
    now = database_now()
    repair_folder_broker()
    return relay(
        Decision.objects.dispatchable(now),
        deliver_decision,
        limit,
        sent=lambda pk: Decision.objects.filter(pk=pk, status=Decision.Status.QUEUED).update(
            **Decision.redispatched(now)
        ),
    )


def relay(due: QuerySet[Model], task: Task[[int], str], limit: int, *, sent: Callable[[int], object]) -> int:
    """Hand the due rows of one outbox to the broker, oldest first; ``sent`` moves a row's lease ahead.

    ``SKIP LOCKED`` lets several relays run side by side. A broker that refuses a message (down, or its
    disk full) leaves that row and the rest due for the next pass.
    """
    count, refusal = 0, None
    with transaction.atomic():
        for pk in list(
            due.select_for_update(skip_locked=True).order_by("next_attempt_at").values_list("pk", flat=True)[:limit]
        ):
            try:
                task.apply_async((pk,), retry=False)
            except Exception as exc:
                refusal = exc
                break
            sent(pk)
            count += 1
    return reported(count, refusal)


def reported(sent: int, refusal: Exception | None) -> int:
    """Tell the console whether the broker took the messages (its banner and gauge); a refusal still raises,
    so the relay's log and Celery's say so too."""
    if refusal is not None:
        BrokerStatus.refused(refusal)
        raise refusal
    if sent:
        BrokerStatus.took()
    return sent


def reclaim_stuck_deliveries(now: datetime | None = None) -> int:
    """Fail (and retry) attempts whose lease expired, judged by the database's clock as the lease was set."""
    reclaimed = 0
    for decision in Decision.objects.stuck(now):
        if decision.mark_attempt_failed("The delivery attempt did not finish before its lease expired.", now=now):
            reclaimed += 1
    return reclaimed


# Each SLA step is (its count's name, the query of due rows, the clock's record of one); order matters on
# catch-up: a checkpoint the scheduler missed for an hour is warned, then breached, then escalated, in one sweep.
SlaStep = tuple[str, Callable[[CheckpointQuerySet, datetime], CheckpointQuerySet], Callable[[SlaClock, datetime], bool]]
SLA_STEPS: tuple[SlaStep, ...] = (
    ("claim_warnings", CheckpointQuerySet.claim_warning, SlaClock.record_claim_warning),
    ("claim_breaches", CheckpointQuerySet.claim_due, SlaClock.record_claim_breach),
    ("warnings", CheckpointQuerySet.warning, SlaClock.record_warning),
    ("breaches", CheckpointQuerySet.due, SlaClock.record_breach),
    ("escalations", CheckpointQuerySet.escalating, SlaClock.fire_escalation),
    ("reminders", CheckpointQuerySet.reminding, SlaClock.remind_claim),
    ("releases", CheckpointQuerySet.stale_claims, SlaClock.release_stale_claim),
)
SLA_BATCH = 500


def sweep_clocks(now: datetime | None = None) -> dict[str, int]:
    """Apply every SLA deadline that has passed, each once, stamped at its own time.

    Only due rows are read, through the partial deadline indexes, in batches. A step
    repeats until nothing is due, so a backlog after downtime drains in one sweep and
    an escalation chain fires each of its levels that fell due meanwhile. "Now" is the database's
    (``workflows.clock``): a scheduler with a clock running ahead must not breach a clock early.
    """
    now = now or database_now()
    counts = dict.fromkeys((name for name, _, _ in SLA_STEPS), 0)
    for name, query, record in SLA_STEPS:
        seen: set[tuple[int, int]] = set()  # (checkpoint, escalations fired): a row done at this stage
        while True:
            due = [
                c
                for c in query(Checkpoint.objects.all(), now)
                .select_related("workflow", "assignee")
                .order_by("pk")[:SLA_BATCH]
            ]
            fresh = [c for c in due if (c.pk, c.escalations_fired) not in seen]
            if not fresh:
                break
            for checkpoint in fresh:
                seen.add((checkpoint.pk, checkpoint.escalations_fired))
                # Every record is at the sweep's instant (an escalation also picks whom to reassign by it).
                counts[name] += record(SlaClock(checkpoint), now)
    return counts


def record_sla(now: datetime | None = None) -> tuple[int, int]:
    """The decision clock's (warnings, breaches) recorded by one sweep of every clock."""
    counts = sweep_clocks(now)
    return counts["warnings"], counts["breaches"]


def relay_notifications(limit: int = 200) -> int:
    """Hand due notification deliveries to the broker; a lease keeps each from being sent twice meanwhile."""
    now = database_now()
    lease = timedelta(seconds=settings.NOTIFY_TIMEOUT_SECONDS * 3)
    return relay(
        Delivery.objects.dispatchable(now),
        deliver_notification,
        limit,
        sent=lambda pk: Delivery.objects.filter(pk=pk, status=Delivery.Status.PENDING).update(
            next_attempt_at=now + lease
        ),
    )


@shared_task(acks_late=True, ignore_result=True)
def deliver_notification(delivery_id: int) -> str:
    """Send one notification on one channel; the attempt is recorded and a failure retried with backoff."""
    delivery = (
        Delivery.objects.select_related("channel__user", "notification__checkpoint").filter(pk=delivery_id).first()
    )
    if delivery is None or delivery.status != Delivery.Status.PENDING:
        return "skipped"
    if not delivery.start_attempt():
        return "lost"  # another worker holds this attempt
    try:  # outside any transaction: a slow mail server or webhook holds no lock
        status = notify.send(delivery)
    except notify.NotifyError as exc:
        delivery.record_attempt(ok=False, detail=str(exc), status_code=exc.status_code, final=exc.permanent)
        return "retry" if delivery.status == Delivery.Status.PENDING else "failed"
    except Exception as exc:  # a bug still ends as a recorded, retried attempt
        log.exception("delivering notification %s", delivery_id)
        delivery.record_attempt(ok=False, detail=f"Internal error: {type(exc).__name__}: {exc}")
        return "retry" if delivery.status == Delivery.Status.PENDING else "failed"
    delivery.record_attempt(ok=True, status_code=status)
    return "sent"


def pause_silent_workflows(now: datetime | None = None) -> int:
    """A crashed agent process also reaches the pause surface. Silence is measured on the database's
    clock, which the agent API's stamps of activity agree with, not on this worker's."""
    now = now or database_now()
    opened = 0
    for workflow in Workflow.objects.silent(now).select_related("agent"):
        if workflow.last_activity_at > now - workflow.agent.silence_limit:
            continue
        last = workflow.steps.order_by("-seq").values_list("seq", flat=True).first()
        try:
            # Opened (and its SLA clocks started) at the database's time, whatever instant silence was judged at.
            Checkpoint.open_for(
                workflow,
                reason=Reason.OTHER,
                by_console=True,
                at_seq=last,
                now=database_now(),
                detail=f"agent went silent after step {last or 0}",
            )
            opened += 1
        except Conflict:
            continue  # a checkpoint opened meanwhile, or the workflow finished
    return opened


def refresh_sqlite_statistics() -> None:
    """SQLite has no autovacuum: without statistics its planner sorts the whole queue for the first page."""
    from django.db import connection

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA optimize")


class SweepResult(TypedDict):
    """What one sweep did, step by step (for the worker's log)."""

    relayed: int
    reclaimed: int
    sla: dict[str, int]
    silent: int
    replays: tuple[int, int]
    stale_runbooks: int
    notifications: int
    slack: int
    rollouts: int
    drills: int


@shared_task(acks_late=True, ignore_result=True)
def sweep() -> SweepResult:
    """The periodic sweep: every step is a conditional update, so many schedulers are harmless."""
    result: SweepResult = {
        "relayed": relay_outbox(),
        "reclaimed": reclaim_stuck_deliveries(),
        "sla": sweep_clocks(),
        "silent": pause_silent_workflows(),
        "replays": settle_replays(),
        "stale_runbooks": Runbook.announce_stale(),
        "notifications": relay_notifications(),
        "slack": relay_slack_messages(),
        "rollouts": Rollout.advance_due(),
        "drills": Drill.start_due(),
    }
    refresh_sqlite_statistics()
    return result


# Rolling a busy day judges every workflow interrupted that day (about a minute for 10,000 on the 2-core
# bench machine): far past the default limits, and harmless to redo if killed (each day is one transaction).
@shared_task(acks_late=True, ignore_result=True, time_limit=3600, soft_time_limit=3500)
def roll_figures() -> int:
    """Re-roll the daily rollups of the days touched since the last roll, and today (see workflows.rollups).
    While another worker rolls, this one leaves it: the next tick covers what changed meanwhile."""
    from . import rollups

    with rollups.one_roll_at_a_time() as mine:
        return len(rollups.roll_recent()) if mine else 0


# The stand-down notice is retried until the replaced agent's endpoint answers again (an agent that failed
# over is often one that is down): doubling from 15 s, at most 5 minutes apart (below the broker's
# visibility timeout, so a waiting retry is not handed out twice), for about two hours. It is a courtesy:
# from the failover on, the API answers the replaced agent 409 ``stood_down`` on that workflow anyway.
STAND_DOWN_RETRIES = 26
STAND_DOWN_FIRST_RETRY_SECONDS = 15
STAND_DOWN_MAX_RETRY_SECONDS = 300


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=STAND_DOWN_RETRIES)
def send_stand_down(self: Task[[int], str], decision_id: int) -> str:
    """After a failover: tell the replaced agent to stand down (its API access to the workflow already ended)."""
    decision = (
        Decision.objects.select_related("replaced_agent", "standby", "checkpoint__workflow")
        .filter(pk=decision_id)
        .first()
    )
    agent = decision.replaced_agent if decision is not None else None
    if decision is None or agent is None:
        return "skipped"  # gone, or not a failover: nobody to tell
    workflow = decision.checkpoint.workflow
    if not agent.resume_url:
        Event.record(
            workflow,
            Event.Verb.STAND_DOWN_SENT,
            data={"agent": agent.name, "how": "it polls: its next look at the workflow answers 409 stood_down"},
        )
        return "polls"
    try:
        runtime.stand_down(decision)
    except runtime.DeliveryError as exc:
        retries = self.request.retries or 0
        retrying = not self.request.called_directly and retries < STAND_DOWN_RETRIES
        Event.record(
            workflow,
            Event.Verb.STAND_DOWN_FAILED,
            data={"agent": agent.name, "error": str(exc)[:500], "attempt": retries + 1, "retrying": retrying},
        )
        if not retrying:
            return "failed"
        raise self.retry(
            countdown=min(STAND_DOWN_FIRST_RETRY_SECONDS * 2**retries, STAND_DOWN_MAX_RETRY_SECONDS)
        ) from exc
    Event.record(workflow, Event.Verb.STAND_DOWN_SENT, data={"agent": agent.name, "how": "notice delivered"})
    return "sent"


def relay_slack_messages(limit: int = 200) -> int:
    """Hand Slack messages that are behind their checkpoint to the broker (the safety net of the send
    made after each commit); a lease keeps each from being sent twice meanwhile."""
    now = database_now()
    lease = timedelta(seconds=settings.SLACK_TIMEOUT_SECONDS * 3)
    return relay(
        SlackMessage.objects.dispatchable(now),
        send_slack_message,
        limit,
        sent=lambda pk: SlackMessage.objects.filter(pk=pk).update(next_attempt_at=now + lease),
    )
