"""The operator queue: a checkpoint's statuses and the reads that find checkpoints on it and on its clocks.

Apart from ``Checkpoint`` (models/checkpoints.py) so that the queue's questions read in one place; the
model's Meta names ``OPEN_STATUSES`` in its partial indexes, and the first claim's stamps are shared by
every way a checkpoint is claimed (``first_claim``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce

from .. import via
from ..clock import database_now
from .agents import Agent

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint  # noqa: F401 - the queryset's model, named in a string
    from .decision_queries import DecisionQuerySet
    from .decisions import Decision


class CheckpointStatus(models.TextChoices):
    OPEN = "open"
    CLAIMED = "claimed"
    DECIDED = "decided"
    RESOLVED = "resolved"


# On the operator queue: waiting for someone to decide. Module level so that Meta's index can name it.
OPEN_STATUSES = (CheckpointStatus.OPEN, CheckpointStatus.CLAIMED)


class CheckpointQuerySet(models.QuerySet["Checkpoint"]):
    def _proposals(self) -> DecisionQuerySet:
        """Four-eyes proposals waiting for a second operator. Decisions sit above checkpoints (a decision names
        its checkpoint): their model is reached through the relation, never imported here."""
        decisions = cast("type[Decision]", self.model._meta.get_field("decisions").related_model)
        return decisions.objects.proposed()

    def unresolved(self) -> CheckpointQuerySet:
        return self.exclude(status=CheckpointStatus.RESOLVED)

    def open(self) -> CheckpointQuerySet:
        """On the operator queue: waiting for someone to decide."""
        return self.filter(status__in=OPEN_STATUSES)

    def awaiting_approval(self, *, by: Operator | None = None) -> CheckpointQuerySet:
        """Decided by one operator under four eyes, waiting for a second; ``by``: one who may approve it
        (never its proposer)."""
        proposals = self._proposals()
        if by is not None:
            proposals = proposals.exclude(decided_by=by)
        return self.filter(status=CheckpointStatus.DECIDED, pk__in=proposals.values("checkpoint_id"))

    def on_clock(self) -> CheckpointQuerySet:
        """The decision clock runs until a decision goes out: open, claimed, or a proposal waiting."""
        proposals = self._proposals().values("checkpoint_id")
        return self.filter(Q(status__in=OPEN_STATUSES) | Q(status=CheckpointStatus.DECIDED, pk__in=proposals))

    def breached(self) -> CheckpointQuerySet:
        return self.filter(breached_at__isnull=False)

    def due(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Checkpoints on the clock past their SLA target whose breach is not recorded yet."""
        return self.on_clock().filter(breached_at__isnull=True, due_at__lte=now or database_now())

    def warning(self, now: datetime | None = None) -> CheckpointQuerySet:
        return self.on_clock().filter(warned_at__isnull=True, warn_at__lte=now or database_now())

    def claim_warning(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Never claimed yet, past the claim clock's warning."""
        return self.filter(
            status=CheckpointStatus.OPEN,
            first_claimed_at__isnull=True,
            claim_warned_at__isnull=True,
            claim_warn_at__lte=now or database_now(),
        )

    def claim_due(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Never claimed yet, past the time-to-claim target, breach not recorded."""
        return self.filter(
            status=CheckpointStatus.OPEN,
            first_claimed_at__isnull=True,
            claim_breached_at__isnull=True,
            claim_due_at__lte=now or database_now(),
        )

    def escalating(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Breached, with the next level of the escalation chain due."""
        return self.open().filter(escalation_at__lte=now or database_now())

    def reminding(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Claimed with no progress for the policy's reminder time."""
        return self.filter(status=CheckpointStatus.CLAIMED, remind_at__lte=now or database_now())

    def stale_claims(self, now: datetime | None = None) -> CheckpointQuerySet:
        """Claimed with no progress for the policy's release time: back to the queue."""
        return self.filter(status=CheckpointStatus.CLAIMED, release_at__lte=now or database_now())

    def for_queue(self) -> CheckpointQuerySet:
        """What a queue row shows: the workflow, its agent, the assignee. Only those joins: at 100,000 open
        checkpoints PostgreSQL spent longer planning the eight-table join the queue once made than running it."""
        return self.select_related("workflow__agent", "assignee")

    # What a queue row never reads: the agent's raw state (it can be large), the workflow's context and notes,
    # the agent's secrets and settings, the assignee's password hash. Not fetched, not decoded, not kept.
    NOT_IN_A_ROW = (
        "state",
        "breach_note",
        "workflow__context",
        "workflow__summary",
        "workflow__handoff_note",
        "workflow__drill_journal",
        *(f"workflow__agent__{name}" for name in Agent.NOT_IN_A_LIST),
        "assignee__password",
    )

    def for_queue_rows(self) -> CheckpointQuerySet:
        """for_queue() without the columns no queue row reads (console/queue_rows.py keys a row by the rest)."""
        return self.for_queue().defer(*self.NOT_IN_A_ROW)

    def for_workbench(self) -> CheckpointQuerySet:
        """The queue's joins, the workflow's owner, the team, the runbook (its version, its current version and
        owner: is there a newer one, is it stale)."""
        return self.for_queue().select_related(
            "workflow__owner", "runbook_version", "team", "runbook__current_version", "runbook__owner"
        )


def first_claim(now: datetime, *, by_person: bool = True) -> dict[str, Any]:
    """The first claim's stamps for a conditional update: its time and the channel it came through, each
    kept once set. An UPDATE's SET reads the row as it was, so both test the old ``first_claimed_at``."""
    channel = via.current() if by_person else ""
    return {
        "first_claimed_at": Coalesce(F("first_claimed_at"), Value(now)),
        "first_claim_channel": Case(
            When(first_claimed_at__isnull=True, then=Value(channel)), default=F("first_claim_channel")
        ),
    }
