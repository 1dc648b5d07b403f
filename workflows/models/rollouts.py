"""Rollouts: one decision for a whole incident, applied in waves.

A canary first (``canary_percent`` of the members, at least one), then waves growing by ``growth``,
never more than ``per_minute`` decisions a minute (waves are at least a minute apart, each at most
``per_minute`` members). Between waves it waits until the previous wave settled (each workflow
completed, failed, its decision failed, or it paused at a new checkpoint) or ``watch_seconds``
passed; it halts by itself when a wave's failure share passes ``halt_share``.

The decision is any a single checkpoint takes: resume, retry the step, abort, hand off (``new_owner`` or
``handoff_to``) or fail over (``standby``), the same for every member.

Every member's decision is drafted by ``Decider`` and recorded as it records one (the outbox, delivery, audit
trail and exactly-once guarantees of a single decision; on PostgreSQL a wave's members together,
``wave_decisions``): a member whose decision is not acceptable yet (an unknown effect not
confirmed, money not covered by the rollout's confirmation, a runbook that does not allow the action)
or that another operator holds waits, shown as waiting with the reason, and is tried again at the next
wave. Timers are data: ``next_at`` is read by the periodic sweep (``advance_due``), never a countdown task.

The gates, before any wave goes out:

- **Unknown effects**: a member waits until each unknown effect is confirmed, one by one on its
  workbench or in bulk against the provider's evidence (``models/evidence.py``); the confirmations
  recorded ahead of the decision are the ones its decision carries.
- **Money**: when members can move money, the operator types the total at stake per currency as the
  incident page shows it; a total that differs refuses the start. The confirmation covers the members
  whose money made that total (``money_members``): one that joins later, or whose amount cannot be
  read, waits for its own decision on its workbench.
- **Four eyes**: when a member's runbook asks for a second operator, the rollout as a whole is
  PROPOSED; another eligible operator (never the proposer) approves it, and each member's decision is
  then proposed by the one and approved by the other (``Decision.approve``), or rejects it.

The "minute" of ``per_minute`` is ``settings.ROLLOUT_RATE_WINDOW_SECONDS`` (60); the guarantee tests and
``make chaos`` shorten it (and ``ROLLOUT_RECHECK_SECONDS``, how soon an unsettled wave is looked at again)
so that a 500-member rollout runs in seconds under the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypedDict, Unpack

from django.conf import settings
from django.db import models, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from ..clock import database_now
from ..roles import operators
from . import rollout_gates as gates
from .agents import Agent
from .base import Conflict, Stateful, moves_at_once
from .decisions import Decision
from .drafting import Decider
from .events import Event
from .evidence import EffectConfirmation
from .incidents import Incident
from .notifications import Notification
from .rollout_gates import RememberedTrail
from .runbooks import RESUMING_ACTIONS, Action
from .wave_decisions import decide_members

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


class RolloutStatus(models.TextChoices):
    PROPOSED = "proposed"  # waiting for a second operator (four eyes)
    RUNNING = "running"
    HALTED = "halted"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


ACTIVE = (RolloutStatus.PROPOSED, RolloutStatus.RUNNING, RolloutStatus.HALTED)


@dataclass(frozen=True)
class WaveOutcome:
    size: int
    failed: int
    settled: int

    @property
    def failure_share(self) -> float:
        return self.failed / self.size if self.size else 0.0

    @property
    def all_settled(self) -> bool:
        return self.settled >= self.size


WAVE_CHUNK = 500  # members read (and their confirmations asked) at a time while a wave is decided


@dataclass
class WaveContext:
    """What the drafts of many members share, read once (a wave, or the members the incident page says wait
    for): the money rule's recorded history, the confirmations recorded ahead of them (by checkpoint id), and the
    database's time that stamps a wave's decisions (None: a caller stepping time, or nothing recorded)."""

    trail: RememberedTrail = field(default_factory=RememberedTrail)
    decided_at: datetime | None = None
    verdicts: dict[int, tuple[dict[str, str], dict[str, str]]] = field(default_factory=dict)

    def read(self, members: list[Checkpoint]) -> list[Checkpoint]:
        """``members``, with the confirmations recorded ahead of them read in one query."""
        self.verdicts = EffectConfirmation.objects.verdicts_of(c.pk for c in members)
        return members


def rate_window() -> timedelta:
    """The window ``per_minute`` counts decisions in: a minute, unless the settings shorten it."""
    return timedelta(seconds=settings.ROLLOUT_RATE_WINDOW_SECONDS)


class Wave(TypedDict):
    """One wave of a rollout as ``Rollout.waves`` keeps it: when it went out and the members decided in it."""

    number: int
    at: str  # ISO 8601
    checkpoints: list[int]


class RolloutTerms(TypedDict, total=False):
    """How a rollout goes out, each with the model's default when left out."""

    canary_percent: int
    growth: int
    per_minute: int
    halt_share: float
    watch_seconds: int


class Rollout(Stateful):
    Status = RolloutStatus
    ACTIVE = ACTIVE
    TRANSITIONS = {
        Status.PROPOSED: {Status.RUNNING, Status.REJECTED, Status.CANCELLED},
        Status.RUNNING: {Status.HALTED, Status.COMPLETED, Status.CANCELLED},
        Status.HALTED: {Status.RUNNING, Status.CANCELLED},
    }

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="rollouts")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    action = models.CharField(max_length=16, choices=Action.choices)
    instructions = models.TextField(blank=True)
    # What a handoff or a failover needs, for every member alike (as on a single decision).
    new_owner = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="A handoff: the operator every member is handed to.",
    )
    handoff_to = models.CharField(
        max_length=200, blank=True, help_text="A handoff: the human process that takes the members over."
    )
    standby = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="A failover: the standby agent that takes every member over.",
    )
    money_confirmed = models.BooleanField(default=False)
    money_total = models.JSONField(
        default=dict,
        blank=True,
        help_text="The total at stake per currency the operator typed and the console matched.",
    )
    money_members = models.JSONField(
        default=list, blank=True, help_text="The members whose money that total covers (checkpoint ids)."
    )
    started_by = models.ForeignKey(
        User, on_delete=models.PROTECT, related_name="+", help_text="Who started it (under four eyes: who proposed it)."
    )
    approved_by = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Four eyes: the second operator who approved it.",
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_members = models.JSONField(
        default=list,
        blank=True,
        help_text="Four eyes: the open members the second operator approved (checkpoint ids); one that joins "
        "later waits for a second operator of its own.",
    )
    started_at = models.DateTimeField(default=timezone.now)
    canary_percent = models.PositiveIntegerField(default=5)
    growth = models.PositiveIntegerField(default=2)
    per_minute = models.PositiveIntegerField(default=30, help_text="Decisions per minute, at most.")
    halt_share = models.FloatField(default=0.2, help_text="Halt when a wave's failure share passes this.")
    watch_seconds = models.PositiveIntegerField(default=600)
    next_at = models.DateTimeField(null=True, blank=True, help_text="When the sweep looks at it next.")
    # [{"number", "at", "checkpoints": [ids]}]: the members decided in each wave, in order.
    waves = models.JSONField(default=list, blank=True)
    halt_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["incident"], condition=Q(status__in=list(ACTIVE)), name="one_active_rollout_per_incident"
            )
        ]
        indexes = [models.Index(fields=["next_at"], condition=Q(status="running"), name="rollout_due")]

    def __str__(self) -> str:
        return f"Rollout {self.pk} of incident {self.incident_id}: {self.action}"

    @property
    def halt_percent(self) -> int:
        return round(self.halt_share * 100)

    @property
    def watch_minutes(self) -> int:
        return max(1, round(self.watch_seconds / 60)) if self.watch_seconds else 0

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    @property
    def awaits_approval(self) -> bool:
        return self.status == self.Status.PROPOSED

    # The gates a rollout is started through (``rollout_gates``), asked of the class as before.
    stake_of = staticmethod(gates.stake_of)
    needs_four_eyes = staticmethod(gates.needs_four_eyes)
    check_standby = staticmethod(gates.check_standby)

    @classmethod
    def start(
        cls,
        incident: Incident,
        *,
        action: str,
        by: Operator,
        instructions: str = "",
        money_total: Mapping[str, str] | None = None,
        new_owner: Operator | None = None,
        handoff_to: str = "",
        standby: Agent | None = None,
        **terms: Unpack[RolloutTerms],
    ) -> Rollout:
        """Start (or, under four eyes, propose) a rollout. ValueError when the decision, its new owner or
        standby, or the money total is not acceptable, Conflict when the incident is resolved or has an active
        rollout. A handoff names a new owner (an operator) or the human process that takes the members over;
        a failover names the standby agent, which must be able to take over at least one open member (one it
        cannot take waits, with the reason, for its own decision)."""
        if action not in Action.values:
            raise ValueError(f"Unknown action {action!r}.")
        if incident.is_resolved:
            raise Conflict("The incident is resolved.")
        handoff_to = handoff_to.strip()[:200] if action == Action.HANDOFF else ""
        new_owner = new_owner if action == Action.HANDOFF else None
        standby = standby if action == Action.FAILOVER else None
        if action == Action.HANDOFF:
            if new_owner is None and not handoff_to:
                raise ValueError("A handoff needs a new owner or the human process that takes the members over.")
            if new_owner is not None and not operators().filter(pk=new_owner.pk).exists():
                raise ValueError(f"{new_owner.get_username()} is not an active operator: hand off to someone who is.")
        if action == Action.FAILOVER:
            cls.check_standby(incident, standby)
        stake = cls.stake_of(incident, action)
        stake.check(money_total)
        four_eyes = cls.needs_four_eyes(incident, action)
        with transaction.atomic():
            if cls.objects.filter(incident=incident, status__in=ACTIVE).exists():
                raise Conflict("This incident already has a rollout: cancel it first.")
            total = {c: str(v) for c, v in stake.totals.items()}
            rollout = cls.objects.create(
                incident=incident,
                action=action,
                instructions=instructions[:10_000],
                new_owner=new_owner,
                handoff_to=handoff_to,
                standby=standby,
                money_confirmed=bool(stake.members),
                money_total=total,
                money_members=stake.members,
                started_by=by,
                status=cls.Status.PROPOSED if four_eyes else cls.Status.RUNNING,
                next_at=None if four_eyes else timezone.now(),
                **terms,
            )
            Event.record(
                incident,
                Event.Verb.ROLLOUT_PROPOSED if four_eyes else Event.Verb.ROLLOUT_STARTED,
                actor=by,
                data={
                    "rollout": rollout.pk,
                    "action": action,
                    **({"new_owner": new_owner.get_username()} if new_owner is not None else {}),
                    **({"handoff_to": handoff_to} if handoff_to else {}),
                    **({"standby": standby.name} if standby is not None else {}),
                    "canary_percent": rollout.canary_percent,
                    "money_total": total,
                },
            )
        return rollout

    # --- four eyes ---

    def may_be_approved_by(self, user: Operator) -> bool:
        return self.awaits_approval and user.pk != self.started_by_id and operators().filter(pk=user.pk).exists()

    def refusal(self, *, by: Operator) -> str:
        """Why ``by`` could not approve or reject this rollout, as it stands now."""
        self.refresh_from_db()
        if not self.awaits_approval:
            return f"The rollout is {self.status}; it no longer waits for approval."
        if by.pk == self.started_by_id:
            return "The second approval must come from another operator than the one who proposed it."
        return "Only an active operator may approve a rollout."

    def approve(self, *, by: Operator) -> bool:
        """PROPOSED -> RUNNING by a second eligible operator: the canary goes out with the next sweep."""
        if not self.may_be_approved_by(by):
            return False
        with transaction.atomic():
            won = self.move(
                self.Status.RUNNING,
                from_=[self.Status.PROPOSED],
                actor=by,
                verb=Event.Verb.ROLLOUT_APPROVED,
                expect={"started_by_id": self.started_by_id},
                data={"rollout": self.pk, "proposed_by": self.started_by.get_username()},
                approved_by=by,
                approved_at=timezone.now(),
                approved_members=list(self.incident.members.open().values_list("pk", flat=True)),
                next_at=timezone.now(),
            )
            if won:
                Event.record(
                    self.incident,
                    Event.Verb.ROLLOUT_APPROVED,
                    actor=by,
                    data={"rollout": self.pk, "proposed_by": self.started_by.get_username()},
                )
        return won

    def reject(self, *, by: Operator, note: str = "") -> bool:
        """PROPOSED -> REJECTED by a second eligible operator: no wave ever goes out."""
        if not self.may_be_approved_by(by):
            return False
        with transaction.atomic():
            facts = {"rollout": self.pk, "proposed_by": self.started_by.get_username(), "note": note[:1000]}
            won = self.move(
                self.Status.REJECTED,
                from_=[self.Status.PROPOSED],
                actor=by,
                verb=Event.Verb.ROLLOUT_REJECTED,
                data=facts,
                next_at=None,
            )
            if won:
                Event.record(self.incident, Event.Verb.ROLLOUT_REJECTED, actor=by, data=facts)
        return won

    @classmethod
    def advance_due(cls, now: datetime | None = None) -> int:
        """The sweep's step: advance every running rollout whose ``next_at`` passed. Returns how many.

        On the database's clock (workflows/clock.py), as every timer a worker judges: a worker whose clock
        runs ahead would otherwise send the next wave before its rate window ended."""
        stepped = now  # None: the sweep, on the real clock (see ``_send_wave``)
        now = now or database_now()
        due = list(cls.objects.filter(status=cls.Status.RUNNING, next_at__lte=now).values_list("pk", flat=True))
        return sum(cls.objects.get(pk=pk).advance(stepped) for pk in due)

    def outcome(self, wave: Wave) -> WaveOutcome:
        """How a wave's members fared since it went out: failed (decision failed, workflow failed, or paused
        again at a new checkpoint) and settled (those, or the workflow ended: completed, or handed off or aborted
        as a handoff or abort rollout decided)."""
        from .checkpoints import Checkpoint
        from .decisions import Decision
        from .workflows import Workflow

        at = datetime.fromisoformat(wave["at"])
        failed = settled = 0
        # One statement for the whole wave (a wave of 4,000 was 8,000 queries a sweep): each member's latest
        # decision, whether its workflow paused again since the wave went out, and the workflow's status.
        latest = Decision.objects.filter(checkpoint=OuterRef("pk")).order_by("-pk").values("status")[:1]
        # A later checkpoint of the workflow, never the member itself (whatever its clock said when it opened).
        again = Checkpoint.objects.filter(workflow=OuterRef("workflow_id"), opened_at__gt=at).exclude(pk=OuterRef("pk"))
        for decision, paused_again, workflow in (
            Checkpoint.objects.filter(pk__in=wave["checkpoints"])
            .annotate(last_decision=Subquery(latest), paused_again=Exists(again))
            .values_list("last_decision", "paused_again", "workflow__status")
        ):
            bad = decision == Decision.Status.FAILED or paused_again or workflow == Workflow.Status.FAILED
            failed += bad
            settled += bad or workflow in Workflow.TERMINAL  # completed, or handed off / aborted as decided
        return WaveOutcome(len(wave["checkpoints"]), failed, settled)

    def advance(self, now: datetime | None = None) -> bool:
        """Judge the last wave and send the next one, under a row lock (many sweeps are harmless)."""
        live = now is None
        now = now or database_now()
        with transaction.atomic():
            rollout = Rollout.objects.select_for_update().get(pk=self.pk)
            if rollout.status != self.Status.RUNNING or (rollout.next_at and rollout.next_at > now):
                return False
            done = rollout._advance(now, live=live)
        self.refresh_from_db()
        return done

    def _advance(self, now: datetime, *, live: bool = False) -> bool:
        if self.waves:
            last = self.waves[-1]
            outcome = self.outcome(last)
            watched = now >= datetime.fromisoformat(last["at"]) + timedelta(seconds=self.watch_seconds)
            # A wave an operator judged after it halted the rollout (``carry_on``) is not judged again.
            if outcome.failure_share > self.halt_share and not last.get("continued"):
                why = (
                    f"Wave {last['number']}: {outcome.failed} of {outcome.size} failed "
                    f"({outcome.failure_share:.0%} > {self.halt_share:.0%})."
                )
                self.move(
                    self.Status.HALTED, verb=Event.Verb.ROLLOUT_HALTED, data={"why": why}, halt_reason=why, next_at=None
                )
                Event.record(self.incident, Event.Verb.ROLLOUT_HALTED, data={"rollout": self.pk, "why": why})
                self._tell_halt(last["number"], why, now)
                return True
            if not outcome.all_settled and not watched:
                Rollout.objects.filter(pk=self.pk).update(
                    next_at=now + timedelta(seconds=settings.ROLLOUT_RECHECK_SECONDS)
                )
                return False
        return self._send_wave(now, live=live)

    def _tell_halt(self, wave: int, why: str, now: datetime) -> None:
        """The incident's commander (else who started the rollout) hears once that it halted by itself."""
        incident = self.incident
        Notification.send(
            kind=Notification.Kind.ROLLOUT_HALTED,
            users=[incident.commander or self.started_by],
            title=f"Rollout halted on incident #{incident.pk}: {incident.title}",
            body=f"The rollout ({self.get_action_display().lower()}) halted by itself. {why} "
            "Nothing more goes out until an operator continues or cancels it.",
            path=incident.get_absolute_url(),
            at=now,
            now=now,
            key=f"rollout{self.pk}:halted:{wave}",
        )

    def _wave_size(self, remaining: int) -> int:
        if not self.waves:
            total = remaining + sum(len(w["checkpoints"]) for w in self.waves)
            size = max(1, math.ceil(total * self.canary_percent / 100))
        else:
            size = len(self.waves[-1]["checkpoints"]) * max(self.growth, 1)
        return max(1, min(size, self.per_minute))

    def _send_wave(self, now: datetime, *, live: bool = False) -> bool:
        members = (
            self.incident.members.open().select_related("workflow__agent", "runbook_version").order_by("due_at", "pk")
        )
        # Ids first, then the members a chunk at a time (no cursor left open over rows being updated).
        ids = list(members.values_list("pk", flat=True))
        remaining = len(ids)
        size = self._wave_size(remaining)
        decided: list[int] = []
        # What every member's decision asks alike, asked once for the wave: the money rule's recorded history,
        # and (on the sweep) the database's clock, which stamps the wave's decisions (their rate window).
        context = WaveContext(decided_at=database_now() if live else None)
        # PostgreSQL: a chunk's members decided together (``wave_decisions``); one at a time, each decision's moves
        # (the checkpoint's, the workflow's) are one statement with their event.
        with moves_at_once():
            for start in range(0, len(ids), WAVE_CHUNK):
                if len(decided) >= size:
                    break
                chunk = context.read(list(members.filter(pk__in=ids[start : start + WAVE_CHUNK])))
                decided += decide_members(self, chunk, context, size - len(decided))
        if not decided:
            if not remaining:
                self.move(self.Status.COMPLETED, verb=Event.Verb.ROLLOUT_COMPLETED, next_at=None)
                Event.record(self.incident, Event.Verb.ROLLOUT_COMPLETED, data={"rollout": self.pk})
                return True
            # Members wait (unknown effects, money, held by someone): look again in a minute.
            Rollout.objects.filter(pk=self.pk).update(next_at=now + rate_window())
            return False
        wave: Wave = {"number": len(self.waves) + 1, "at": now.isoformat(), "checkpoints": decided}
        # On the real clock (the sweep) the window starts when this wave's last decision was recorded, not
        # when the sweep began: deciding 100 members takes a while, and any window of the rate's length must
        # hold one wave at most (tests/test_guarantee_incident_rollout.py counts decided_at in every window).
        # A caller stepping time (the unit tests) keeps its ``now``. The database's clock, as ``now`` is.
        sent_at = database_now() if live else now
        Rollout.objects.filter(pk=self.pk).update(waves=[*self.waves, wave], next_at=sent_at + rate_window())
        Event.record(
            self.incident,
            Event.Verb.ROLLOUT_WAVE,
            data={"rollout": self.pk, "wave": wave["number"], "members": len(decided)},
        )
        return True

    def _draft(self, checkpoint: Checkpoint, wave: WaveContext) -> Decision:
        """This member's decision as the single-decision path drafts it, carrying the confirmations recorded
        ahead of it (``wave``: what was read for all the members at once); ValueError saying why it must wait."""
        confirmations, references = wave.verdicts.get(checkpoint.pk, ({}, {}))
        trail = wave.trail
        covered = self.money_confirmed and checkpoint.pk in self.money_members
        if not covered and self.action in RESUMING_ACTIONS and checkpoint.touches_money(trail):
            raise ValueError(
                "It moves money the rollout's confirmed total does not cover (it joined later, or "
                "its amount cannot be read): decide it on its workbench."
            )
        return Decider(checkpoint, history=trail).draft(
            action=self.action,
            instructions=self.instructions,
            confirmations=confirmations,
            confirmation_refs=references,
            money_confirmed=covered,
            new_owner=self.new_owner,
            handoff_to=self.handoff_to,
            standby=self.standby,
        )

    def _decide(self, checkpoint: Checkpoint, wave: WaveContext) -> bool:
        """This member's decision through the single-decision path; False when it must wait. Under four
        eyes the rollout's approver approves each member's proposal, as on its workbench. On the sweep
        it is stamped by the database's clock, the one its rate window is judged by (the wave's reading)."""
        try:
            draft = self._draft(checkpoint, wave)
            if wave.decided_at is not None:
                draft.decided_at = wave.decided_at
            decision = Decider(checkpoint).record(draft, by=self.started_by)
        except (ValueError, Conflict):
            return False
        if decision.awaits_approval and self.approved_by is not None and checkpoint.pk in self.approved_members:
            decision.approve(by=self.approved_by)  # a member that joined later is proposed, for a second operator
        return True

    WAITING_SCANNED = 200

    def waiting(self, limit: int = 50) -> list[tuple[Checkpoint, str]]:
        """The open members a wave would skip now, each with why (the first ``limit`` among the first
        ``WAITING_SCANNED`` by due time: the page shows a sample, the sweep judges every member)."""
        if not self.is_active:
            return []
        found: list[tuple[Checkpoint, str]] = []
        context = WaveContext()  # the scanned members' confirmations and money history, each asked once
        scanned = context.read(
            list(
                self.incident.members.open()
                .select_related("workflow", "assignee", "runbook_version")
                .order_by("due_at", "pk")[: self.WAITING_SCANNED]
            )
        )
        for c in scanned:
            if len(found) >= limit:
                break
            if not c.may_be_decided_by(self.started_by):
                found.append((c, f"{c.assignee.get_username() if c.assignee else 'Someone'} holds it."))
                continue
            try:
                self._draft(c, context)
            except ValueError as exc:
                found.append((c, str(exc)))
        return found

    def carry_on(self, *, by: Operator) -> bool:
        """HALTED -> RUNNING: an operator judged the halt and lets the next wave go. The wave that halted it is
        marked judged, or the next sweep would halt again on the same failures (its rate window has passed: the
        halt was judged no earlier than it). Under four eyes, not by the proposer alone: the approver or another
        operator judges the halt."""
        if self.approved_by_id is not None and by.pk == self.started_by_id:
            return False
        waves = [*self.waves[:-1], {**self.waves[-1], "continued": True}] if self.waves else []
        return self.move(
            self.Status.RUNNING,
            from_=[self.Status.HALTED],
            verb=Event.Verb.ROLLOUT_STARTED,
            actor=by,
            data={"rollout": self.pk, "action": self.action, "continued": True},
            next_at=timezone.now(),
            halt_reason="",
            waves=waves,
        )

    def cancel(self, *, by: Operator) -> bool:
        """Stop sending waves (decisions already sent go on)."""
        won = self.move(self.Status.CANCELLED, from_=ACTIVE, verb=Event.Verb.ROLLOUT_CANCELLED, actor=by, next_at=None)
        if won:
            Event.record(self.incident, Event.Verb.ROLLOUT_CANCELLED, actor=by, data={"rollout": self.pk})
        return won
