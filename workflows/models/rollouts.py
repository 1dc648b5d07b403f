"""Rollouts: one decision for a whole incident, applied in waves.

A canary first (``canary_percent`` of the members, at least one), then waves growing by ``growth``,
never more than ``per_minute`` decisions a minute (waves are at least a minute apart, each at most
``per_minute`` members). Between waves it waits until the previous wave settled (each workflow
completed, failed, its decision failed, or it paused at a new checkpoint) or ``watch_seconds``
passed; it halts by itself when a wave's failure share passes ``halt_share``.

Every member's decision goes through ``Checkpoint.draft_decision`` and ``record_decision`` (the outbox,
delivery, audit trail and exactly-once guarantees of a single decision): a member whose decision is not
acceptable yet (an unknown effect not confirmed, money not confirmed, a runbook that does not allow the
action) or that another operator holds waits, and is tried again at the next wave. Timers are data:
``next_at`` is read by the periodic sweep (``advance_due``), never a countdown task.

The "minute" of ``per_minute`` is ``settings.ROLLOUT_RATE_WINDOW_SECONDS`` (60); the guarantee tests and
``make chaos`` shorten it (and ``ROLLOUT_RECHECK_SECONDS``, how soon an unsettled wave is looked at again)
so that a 500-member rollout runs in seconds under the same rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from .base import Conflict, Stateful
from .drafting import Decider
from .events import Event
from .incidents import Incident
from .runbooks import Action

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


class RolloutStatus(models.TextChoices):
    RUNNING = "running"
    HALTED = "halted"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


ACTIVE = (RolloutStatus.RUNNING, RolloutStatus.HALTED)


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


def rate_window() -> timedelta:
    """The window ``per_minute`` counts decisions in: a minute, unless the settings shorten it."""
    return timedelta(seconds=settings.ROLLOUT_RATE_WINDOW_SECONDS)


class Rollout(Stateful):
    Status = RolloutStatus
    TRANSITIONS = {
        Status.RUNNING: {Status.HALTED, Status.COMPLETED, Status.CANCELLED},
        Status.HALTED: {Status.RUNNING, Status.CANCELLED},
    }

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="rollouts")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    action = models.CharField(max_length=16, choices=Action.choices)
    instructions = models.TextField(blank=True)
    money_confirmed = models.BooleanField(default=False)
    started_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
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
        constraints = [models.UniqueConstraint(fields=["incident"], condition=Q(status__in=list(ACTIVE)),
                                               name="one_active_rollout_per_incident")]
        indexes = [models.Index(fields=["next_at"], condition=Q(status="running"), name="rollout_due")]

    def __str__(self) -> str:
        return f"Rollout {self.pk} of incident {self.incident_id}: {self.action}"

    @classmethod
    def start(cls, incident: Incident, *, action: str, by: Operator, instructions: str = "",
              money_confirmed: bool = False, **terms: Any) -> Rollout:
        if action not in Action.values or action in (Action.HANDOFF, Action.FAILOVER):
            raise ValueError("A rollout resumes, retries the step or aborts; hand off or fail over one by one.")
        if incident.is_resolved:
            raise Conflict("The incident is resolved.")
        with transaction.atomic():
            if cls.objects.filter(incident=incident, status__in=ACTIVE).exists():
                raise Conflict("This incident already has a rollout: cancel it first.")
            rollout = cls.objects.create(incident=incident, action=action, instructions=instructions[:10_000],
                                         money_confirmed=money_confirmed, started_by=by, next_at=timezone.now(),
                                         **terms)
            Event.record(incident, Event.Verb.ROLLOUT_STARTED, actor=by,
                         data={"rollout": rollout.pk, "action": action, "canary_percent": rollout.canary_percent})
        return rollout

    @classmethod
    def advance_due(cls, now: datetime | None = None) -> int:
        """The sweep's step: advance every running rollout whose ``next_at`` passed. Returns how many."""
        stepped = now  # None: the sweep, on the real clock (see ``_send_wave``)
        now = now or timezone.now()
        due = list(cls.objects.filter(status=cls.Status.RUNNING, next_at__lte=now).values_list("pk", flat=True))
        return sum(cls.objects.get(pk=pk).advance(stepped) for pk in due)

    def outcome(self, wave: dict[str, Any]) -> WaveOutcome:
        """How a wave's members fared since it went out: failed (decision failed, workflow failed, or paused
        again at a new checkpoint) and settled (those, or the workflow completed)."""
        from .checkpoints import Checkpoint
        from .decisions import Decision
        from .workflows import Workflow

        at = datetime.fromisoformat(wave["at"])
        failed = settled = 0
        # One statement for the whole wave (a wave of 4,000 was 8,000 queries a sweep): each member's latest
        # decision, whether its workflow paused again since the wave went out, and the workflow's status.
        latest = Decision.objects.filter(checkpoint=OuterRef("pk")).order_by("-pk").values("status")[:1]
        again = Checkpoint.objects.filter(workflow=OuterRef("workflow_id"), opened_at__gt=at)
        for decision, paused_again, workflow in Checkpoint.objects.filter(pk__in=wave["checkpoints"]).annotate(
                last_decision=Subquery(latest), paused_again=Exists(again)).values_list(
                "last_decision", "paused_again", "workflow__status"):
            bad = decision == Decision.Status.FAILED or paused_again or workflow == Workflow.Status.FAILED
            failed += bad
            settled += bad or workflow == Workflow.Status.COMPLETED
        return WaveOutcome(len(wave["checkpoints"]), failed, settled)

    def advance(self, now: datetime | None = None) -> bool:
        """Judge the last wave and send the next one, under a row lock (many sweeps are harmless)."""
        live = now is None
        now = now or timezone.now()
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
            if outcome.failure_share > self.halt_share:
                why = (f"Wave {last['number']}: {outcome.failed} of {outcome.size} failed "
                       f"({outcome.failure_share:.0%} > {self.halt_share:.0%}).")
                self.move(self.Status.HALTED, verb=Event.Verb.ROLLOUT_HALTED, data={"why": why}, halt_reason=why,
                          next_at=None)
                Event.record(self.incident, Event.Verb.ROLLOUT_HALTED, data={"rollout": self.pk, "why": why})
                return True
            if not outcome.all_settled and not watched:
                Rollout.objects.filter(pk=self.pk).update(
                    next_at=now + timedelta(seconds=settings.ROLLOUT_RECHECK_SECONDS))
                return False
        return self._send_wave(now, live=live)

    def _wave_size(self, remaining: int) -> int:
        if not self.waves:
            total = remaining + sum(len(w["checkpoints"]) for w in self.waves)
            size = max(1, math.ceil(total * self.canary_percent / 100))
        else:
            size = len(self.waves[-1]["checkpoints"]) * max(self.growth, 1)
        return max(1, min(size, self.per_minute))

    def _send_wave(self, now: datetime, *, live: bool = False) -> bool:
        candidates = list(self.incident.members.open().select_related("workflow__agent", "runbook_version")
                          .order_by("due_at", "pk"))
        size = self._wave_size(len(candidates))
        decided: list[int] = []
        for c in candidates:
            if len(decided) >= size:
                break
            if self._decide(c):
                decided.append(c.pk)
        if not decided:
            if not candidates:
                self.move(self.Status.COMPLETED, verb=Event.Verb.ROLLOUT_COMPLETED, next_at=None)
                Event.record(self.incident, Event.Verb.ROLLOUT_COMPLETED, data={"rollout": self.pk})
                return True
            # Members wait (unknown effects, money, held by someone): look again in a minute.
            Rollout.objects.filter(pk=self.pk).update(next_at=now + rate_window())
            return False
        wave = {"number": len(self.waves) + 1, "at": now.isoformat(), "checkpoints": decided}
        # On the real clock (the sweep) the window starts when this wave's last decision was recorded, not
        # when the sweep began: deciding 100 members takes a while, and any window of the rate's length must
        # hold one wave at most (tests/test_guarantee_incident_rollout.py counts decided_at in every window).
        # A caller stepping time (the unit tests) keeps its ``now``.
        sent_at = timezone.now() if live else now
        Rollout.objects.filter(pk=self.pk).update(waves=[*self.waves, wave], next_at=sent_at + rate_window())
        Event.record(self.incident, Event.Verb.ROLLOUT_WAVE, data={"rollout": self.pk, "wave": wave["number"],
                                                                   "members": len(decided)})
        return True

    def _decide(self, checkpoint: Checkpoint) -> bool:
        """This member's decision through the single-decision path; False when it must wait."""
        try:
            draft = Decider(checkpoint).draft(action=self.action, instructions=self.instructions,
                                              money_confirmed=self.money_confirmed)
            Decider(checkpoint).record(draft, by=self.started_by)
        except (ValueError, Conflict):
            return False
        return True

    def carry_on(self, *, by: Operator) -> bool:
        """HALTED -> RUNNING: an operator judged the halt and lets the next wave go."""
        return self.move(self.Status.RUNNING, from_=[self.Status.HALTED], verb=Event.Verb.ROLLOUT_STARTED,
                         actor=by, data={"rollout": self.pk, "action": self.action, "continued": True},
                         next_at=timezone.now(), halt_reason="")

    def cancel(self, *, by: Operator) -> bool:
        """Stop sending waves (decisions already sent go on)."""
        won = self.move(self.Status.CANCELLED, from_=ACTIVE, verb=Event.Verb.ROLLOUT_CANCELLED, actor=by,
                        next_at=None)
        if won:
            Event.record(self.incident, Event.Verb.ROLLOUT_CANCELLED, actor=by, data={"rollout": self.pk})
        return won
