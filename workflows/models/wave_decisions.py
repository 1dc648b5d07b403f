"""A rollout's wave decided together: the rows, audit events and hand-over ``Decider.record`` writes for each
member, in a few statements for a chunk of members instead of seven a member (PostgreSQL).

``Decider.record`` inserts the decision, moves the checkpoint (compare-and-set on the status and the holder as
read) with its event, moves a resumed workflow paused -> resuming with its event, and hands the decision to the
broker after the commit. Here, for the drafts of many members (each drafted by ``Decider.draft``, so every rule
of a single decision was checked for it):

1. one INSERT of the decisions, under a savepoint: a member another decision won already (the partial unique
   index) fails the INSERT, and the chunk falls back to one member at a time (``None``);
2. one UPDATE … RETURNING of the checkpoints per (status, holder) they were read with, the same compare-and-set;
   a member that moved meanwhile (claimed by someone, decided on its workbench) is not taken, and its decision
   row is deleted, as the single path's rollback takes it back;
3. one INSERT of the ``decided`` events, one UPDATE … RETURNING of the paused workflows a resume moves and one
   INSERT of their ``resuming`` events; the Slack outbox touches their messages in one statement;
4. after the commit, the decisions handed to the broker in one go; the relay stays the safety net.

Four-eyes proposals and failovers (a standby taking the workflow over) keep the single path: they are rare in a
wave and do more per member. ``tests/test_wave_decided_together.py`` checks that both paths leave the same rows.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .base import update_returning
from .checkpoints import Checkpoint
from .clocks import SlaClock
from .decisions import Decision
from .events import Event
from .queue import first_claim
from .relay import hand_many_to_broker
from .runbooks import Action
from .workflows import Workflow

if TYPE_CHECKING:
    from .base import Operator
    from .rollouts import Rollout, WaveContext


def decide_members(rollout: Rollout, members: list[Checkpoint], wave: WaveContext, want: int) -> list[int]:
    """Up to ``want`` of ``members`` decided as ``rollout`` decides each (in order; those that must wait are
    passed over): the ids decided. On PostgreSQL the drafts that may go together are recorded together; the
    rest, all of them elsewhere, and a batch another decision got into, go one by one (``Rollout._decide``)."""
    by = rollout.started_by
    decided: list[int] = []
    if connection.vendor != "postgresql":
        for checkpoint in members:
            if len(decided) >= want:
                break
            if rollout._decide(checkpoint, wave):
                decided.append(checkpoint.pk)
        return decided
    batch: list[Decision] = []
    for checkpoint in members:
        if len(decided) >= want:
            break
        try:
            draft = rollout._draft(checkpoint, wave) if checkpoint.may_be_decided_by(by) else None
        except ValueError:
            draft = None  # it waits (an unknown effect, money not covered, a runbook), as ``_decide`` passes it
        if draft is None:
            continue
        if goes_together(draft):
            batch.append(draft)
        elif rollout._decide(checkpoint, wave):  # a four-eyes proposal or a failover: the single path
            decided.append(checkpoint.pk)
        if len(decided) + len(batch) >= want:
            decided += _flush(rollout, batch, wave)
            batch = []
    return decided + _flush(rollout, batch, wave)


def _flush(rollout: Rollout, batch: list[Decision], wave: WaveContext) -> list[int]:
    """The batch recorded together, or one by one when another decision holds one of its members."""
    recorded = record_together(batch, by=rollout.started_by, decided_at=wave.decided_at)
    if recorded is not None:
        return [d.checkpoint_id for d in recorded]
    return [d.checkpoint_id for d in batch if rollout._decide(d.checkpoint, wave)]


def goes_together(draft: Decision) -> bool:
    """Whether this draft may be recorded with others: QUEUED (no second operator asked for), not a failover."""
    return draft.status == Decision.Status.QUEUED and draft.action != Action.FAILOVER


def record_together(
    drafts: list[Decision], *, by: Operator, decided_at: datetime | None = None
) -> list[Decision] | None:
    """Record the drafts (``goes_together`` holds for each; each of an open member that ``by`` may decide, its
    checkpoint read with its workflow and agent) as ``Decider.record`` records one. Returns the decisions
    recorded, in the order given: those whose checkpoint moved. None when another decision already holds one
    of the members (nothing recorded: decide them one by one, which names the winner)."""
    if not drafts:
        return []
    now = timezone.now()
    stamp = decided_at or now  # one instant for the chunk, as the wave's reading of the clock stamps it
    for draft in drafts:
        draft.decided_by, draft.decided_at = by, stamp
        if not draft.is_polled:
            draft.next_attempt_at = now  # due for the relay from its insert on (``Decider.record`` does the same)
    try:
        with transaction.atomic():
            Decision.objects.bulk_create(drafts)
            won = _move_checkpoints(drafts, by=by, now=now, decided_at=stamp)
            if lost := [d.pk for d in drafts if d.checkpoint_id not in won]:
                Decision.objects.filter(pk__in=lost).delete()  # as the single path's rollback takes it back
            recorded = [d for d in drafts if d.checkpoint_id in won]
            _resume_workflows(recorded, by=by)
    except IntegrityError:  # another active decision holds a member: the partial unique index refused the INSERT
        return None
    if pushed := [d.pk for d in recorded if d.next_attempt_at is not None]:
        transaction.on_commit(functools.partial(hand_many_to_broker, pushed))
    return recorded


def _move_checkpoints(drafts: list[Decision], *, by: Operator, now: datetime, decided_at: datetime) -> set[int]:
    """OPEN|CLAIMED -> DECIDED for each draft's checkpoint still as it was read (status and holder), with its
    ``decided`` event; the ids of those that moved."""
    groups: dict[tuple[str, int | None], list[Decision]] = defaultdict(list)
    for draft in drafts:
        groups[(draft.checkpoint.status, draft.checkpoint.assignee_id)].append(draft)
    won: set[int] = set()
    events: list[Event] = []
    for (status, holder), alike in groups.items():
        read = {d.checkpoint_id: d for d in alike}
        # Built from the members as read (their workflow cached), before the rows replace them.
        about = {
            d.checkpoint_id: Event.about(
                d.checkpoint,
                Event.Verb.DECIDED,
                actor=by,
                data={"from": status, "to": Checkpoint.Status.DECIDED, "action": d.action, "four_eyes": False}
                | d.audit_facts(),
            )
            for d in alike
        }
        moved = update_returning(
            Checkpoint.objects.filter(pk__in=list(read), status=status, assignee_id=holder),
            {
                "status": Checkpoint.Status.DECIDED,
                "assignee_id": holder if holder is not None else by.pk,
                "remind_at": None,
                "release_at": None,
                **first_claim(now),
                "first_decision_at": Coalesce(F("first_decision_at"), Value(decided_at)),
                "clock_stopped_at": now,
            },
        )
        for row in moved:
            checkpoint = read[row.pk].checkpoint
            workflow = checkpoint.workflow
            checkpoint._take_row(row)
            checkpoint.workflow = workflow  # the same row: the move does not change it
            won.add(row.pk)
            events.append(about[row.pk])
    Event.record_many(events)
    for draft in drafts:
        if draft.checkpoint_id in won:
            SlaClock(draft.checkpoint).settle_late(now)  # a statement only for a member past a deadline
    return won


def _resume_workflows(recorded: list[Decision], *, by: Operator) -> None:
    """PAUSED -> RESUMING for the workflows the recorded resumes and retried steps take back (``enqueue``)."""
    ids = [d.checkpoint.workflow_id for d in recorded if d.resumes]
    if not ids:
        return
    moved = update_returning(
        Workflow.objects.filter(pk__in=ids, status=Workflow.Status.PAUSED), {"status": Workflow.Status.RESUMING}
    )
    data = {"from": Workflow.Status.PAUSED, "to": Workflow.Status.RESUMING}
    Event.record_many([Event.about(row, Event.Verb.RESUMING, actor=by, data=data) for row in moved])
