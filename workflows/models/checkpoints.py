"""Checkpoints: the pause points on the operator queue, their state and its transitions.

Deciding one (drafting a decision, the runbook's and four eyes' checks, recording it) is
``drafting.Decider``'s job: decisions sit above checkpoints, and this module never imports them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from .. import via
from ..roles import is_admin
from ..shapes import JsonObject, PlanStep
from .base import Conflict, Stateful
from .checkpoint_money import CheckpointMoney, stake_in
from .clocks import SlaClock
from .events import Event
from .incidents import Incident, signature_of
from .notifications import Notification
from .people import can_take_work
from .queue import OPEN_STATUSES, CheckpointQuerySet, CheckpointStatus, first_claim
from .runbooks import Reason, Runbook, RunbookVersion
from .sla import SLAPolicy, Terms
from .sparse_keys import where_set
from .teams import RoutingRule
from .workflows import Workflow

if TYPE_CHECKING:
    from .base import Actor, Operator
    from .breaches import BreachReason
    from .decisions import Decision
    from .steps import Step

User = settings.AUTH_USER_MODEL


# Checkpoints a fork's checkpoint may come from, through forks of forks: a bound on a corrupted chain.
MAX_ORIGINS = 20


class SinceInterruption(TypedDict):
    """What happened after a checkpoint's interruption, as its workbench shows it beside the resume state."""

    decision: Decision | None
    effects: list[Step]
    next_checkpoint: Checkpoint | None
    workflow_status: str
    summary: str


class Checkpoint(CheckpointMoney, Stateful):
    Status = CheckpointStatus
    OPEN_STATUSES = OPEN_STATUSES

    TRANSITIONS = {
        Status.OPEN: {Status.CLAIMED, Status.DECIDED},
        Status.CLAIMED: {Status.OPEN, Status.CLAIMED, Status.DECIDED},
        # A failed delivery puts the checkpoint back on the queue; a rejected
        # four-eyes proposal gives it back to its proposer (claimed).
        Status.DECIDED: {Status.RESOLVED, Status.OPEN, Status.CLAIMED},
    }

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="checkpoints")
    reason = models.CharField(max_length=32, choices=Reason.choices)
    detail = models.TextField(blank=True)
    at_seq = models.PositiveIntegerField(null=True, blank=True)
    state = models.JSONField(default=dict, blank=True, help_text="The agent's own state, as sent.")
    resume_state = models.JSONField(default=dict, help_text="Computed from the steps when the checkpoint opened.")
    # Read from the resume state with it (``stake_in``), kept in step wherever one is written: None only for a
    # row written around the model, which the readers then read from its resume state.
    at_stake = models.JSONField(
        null=True, blank=True, default=None, help_text="What its resume state puts at stake (stake_in), read once."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    opened_by_console = models.BooleanField(default=False)
    runbook = models.ForeignKey(
        Runbook, on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )
    # The version it opened with: what it allows and what operators read, whatever edits came later.
    # PROTECT: deleting the runbook must not take its four eyes and allowed decisions away from here.
    runbook_version = models.ForeignKey(
        RunbookVersion, on_delete=models.PROTECT, related_name="checkpoints", null=True, blank=True, db_index=False
    )
    assignee = models.ForeignKey(
        User, on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )  # checkpoint_by_assignee
    claimed_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(default=timezone.now)
    warn_at = models.DateTimeField()
    due_at = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    breached_at = models.DateTimeField(null=True, blank=True, help_text="Stamped with the due time it passed.")
    resolved_at = models.DateTimeField(null=True, blank=True)
    # The SLA terms in force when it opened (SLAPolicy.freeze), and the clocks computed from them.
    policy = models.ForeignKey(
        "workflows.SLAPolicy", on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )
    sla = models.JSONField(default=dict, blank=True, help_text="The SLA terms frozen when it opened.")
    claim_warn_at = models.DateTimeField(null=True, blank=True)
    claim_due_at = models.DateTimeField(null=True, blank=True)
    claim_warned_at = models.DateTimeField(null=True, blank=True)
    claim_breached_at = models.DateTimeField(null=True, blank=True)
    first_claimed_at = models.DateTimeField(null=True, blank=True)
    # The channel the first claim came through (workflows/via.py), set with first_claimed_at: time to claim by
    # channel. Empty until claimed, and when the first "claim" was an escalation's reassignment (no person's channel).
    first_claim_channel = models.CharField(max_length=16, choices=via.Via.choices, blank=True, default="")
    # When its first decision (or four-eyes proposal) was made: time to decision, read without a join.
    first_decision_at = models.DateTimeField(null=True, blank=True)
    clock_stopped_at = models.DateTimeField(
        null=True, blank=True, help_text="Decided: the decision clock waits until it reopens."
    )
    escalation_at = models.DateTimeField(null=True, blank=True, help_text="When the next escalation fires.")
    escalations_fired = models.PositiveIntegerField(default=0)
    remind_at = models.DateTimeField(null=True, blank=True)
    release_at = models.DateTimeField(null=True, blank=True)
    # Why it breached, as a TPM recorded it in the breach review.
    breach_reason = models.ForeignKey(
        "workflows.BreachReason",
        on_delete=models.PROTECT,
        related_name="checkpoints",
        null=True,
        blank=True,
        db_index=False,
    )
    breach_note = models.TextField(blank=True)
    # A fork's checkpoint: the original's checkpoint it started from. Its runbook version binds this one too
    # (``runbook_versions``): a fork is never weaker than the checkpoint it comes from.
    origin = models.ForeignKey(
        "self", on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )
    # The team it belongs to, routed when it opened (frozen); only teams.transfer moves it.
    team = models.ForeignKey(
        "workflows.Team", on_delete=models.SET_NULL, related_name="checkpoints", null=True, blank=True, db_index=False
    )
    # Incidents (models/incidents.py): its failure signature, and the incident it belongs to, if any.
    signature = models.CharField(max_length=32, blank=True, db_default="")
    incident = models.ForeignKey(
        "workflows.Incident", on_delete=models.SET_NULL, related_name="members", null=True, blank=True, db_index=False
    )

    objects = CheckpointQuerySet.as_manager()

    # Not fields: the queue view sets them on a page of rows (one URL reversal per page, not three per row).
    workbench_url: str
    claim_url: str
    workflow_url: str

    class Meta:
        ordering = ["due_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow"],
                condition=~Q(status=CheckpointStatus.RESOLVED),
                name="one_unresolved_checkpoint_per_workflow",
            ),
        ]
        indexes = [
            *where_set("checkpoint", "runbook", "runbook_version", "policy", "team", "incident"),  # sparse_keys.py
            *where_set("checkpoint", "breach_reason", "origin"),
            # The operator queue (open/claimed by due time) and the SLA scan.
            models.Index(fields=["status", "due_at"], name="checkpoint_queue"),
            models.Index(fields=["status", "breached_at", "due_at"], name="checkpoint_sla_scan"),
            models.Index(fields=["assignee", "status"], name="checkpoint_by_assignee"),
            # The queue page in its order: an ordered walk that stops after one page,
            # where (status, due_at) would sort every open row for `status IN (open, claimed)`.
            models.Index(
                fields=["due_at", "id"], condition=Q(status__in=list(OPEN_STATUSES)), name="checkpoint_queue_order"
            ),
            # The SLA sweep reads only what is due: one partial index per deadline, holding pending rows only.
            models.Index(
                fields=["warn_at"],
                condition=Q(status__in=list(OPEN_STATUSES), warned_at__isnull=True),
                name="sla_decision_warning",
            ),
            models.Index(
                fields=["due_at"],
                condition=Q(status__in=list(OPEN_STATUSES), breached_at__isnull=True),
                name="sla_decision_due",
            ),
            models.Index(
                fields=["claim_warn_at"],
                condition=Q(status=CheckpointStatus.OPEN, first_claimed_at__isnull=True, claim_warned_at__isnull=True),
                name="sla_claim_warning",
            ),
            models.Index(
                fields=["claim_due_at"],
                condition=Q(
                    status=CheckpointStatus.OPEN, first_claimed_at__isnull=True, claim_breached_at__isnull=True
                ),
                name="sla_claim_due",
            ),
            models.Index(
                fields=["escalation_at"],
                condition=Q(status__in=list(OPEN_STATUSES), escalation_at__isnull=False),
                name="sla_escalation",
            ),
            models.Index(
                fields=["remind_at"],
                condition=Q(status=CheckpointStatus.CLAIMED, remind_at__isnull=False),
                name="sla_claim_reminder",
            ),
            models.Index(
                fields=["release_at"],
                condition=Q(status=CheckpointStatus.CLAIMED, release_at__isnull=False),
                name="sla_claim_release",
            ),
            models.Index(fields=["breached_at"], condition=Q(breached_at__isnull=False), name="sla_breached"),
            # "Awaiting approval" (a tab's count on every queue page, the on-clock figures): only the
            # checkpoints whose decision is in flight, not a scan of every resolved one (160 ms at 1M, now 16 ms).
            models.Index(fields=["id"], condition=Q(status=CheckpointStatus.DECIDED), name="checkpoint_decided"),
            # Grouping counts the recent checkpoints of one failure signature.
            models.Index(fields=["signature", "opened_at"], name="checkpoint_signature", condition=~Q(signature="")),
            # The figures of a period (breach review, resume dashboard) read the checkpoints opened in it;
            # on PostgreSQL the clocks they count ride in the index, so they never visit the table.
            models.Index(
                fields=["opened_at"],
                name="checkpoint_opened",
                include=[
                    "id",
                    "first_claimed_at",
                    "first_decision_at",
                    "clock_stopped_at",
                    "breached_at",
                    "claim_due_at",
                    "claim_breached_at",
                ],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} on {self.workflow}"

    @classmethod
    def open_for(
        cls,
        workflow: Workflow,
        *,
        reason: str,
        detail: str = "",
        at_seq: int | None = None,
        state: JsonObject | None = None,
        plan: list[PlanStep] | None = None,
        actor: Actor | None = None,
        by_console: bool = False,
        now: datetime | None = None,
        origin: Checkpoint | None = None,
    ) -> Checkpoint:
        """Pause the workflow at a new checkpoint. Conflict if one is already unresolved.

        ``now``: when it opens, which starts its SLA clocks; a worker passes the database's time.
        ``origin``: the checkpoint it comes from, whose runbook binds it too; a fork's later checkpoints come
        from its previous one, so the rules of the checkpoint it was forked from hold for the fork's life."""
        with transaction.atomic():
            workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
            if workflow.checkpoints.unresolved().exists():
                raise Conflict("The workflow already has an open checkpoint.")
            if workflow.status not in (Workflow.Status.RUNNING, Workflow.Status.RESUMING):
                raise Conflict(f"A {workflow.status} workflow cannot be paused.")
            if origin is None and workflow.forked_from_id is not None:
                origin = workflow.checkpoints.order_by("-opened_at", "-pk").first()
            runbook = Runbook.match(workflow.kind, reason, workflow.agent_id)
            version = (runbook.current_version or runbook.snapshot()) if runbook else None
            now = now or timezone.now()
            team = RoutingRule.route(workflow.kind, workflow.agent_id)
            policy = (runbook.policy if runbook else None) or (team.policy if team else None)
            frozen = policy.freeze() if policy else SLAPolicy.fallback()
            try:
                with transaction.atomic():
                    resume_state = workflow.resume_state(at_seq=at_seq, agent_state=state or {}, plan=plan)
                    checkpoint = cls.objects.create(
                        workflow=workflow,
                        reason=reason,
                        detail=detail,
                        at_seq=at_seq,
                        state=state or {},
                        resume_state=resume_state,
                        runbook=runbook,
                        runbook_version=version,
                        opened_at=now,
                        policy=policy,
                        sla=frozen,
                        opened_by_console=by_console,
                        origin=origin,
                        team=team,
                        **Terms(frozen).deadlines(now),
                    )
            except IntegrityError as exc:  # a concurrent open won the partial unique index
                raise Conflict("The workflow already has an open checkpoint.") from exc
            Event.record(
                checkpoint,
                Event.Verb.OPENED,
                actor=actor,
                at=now,
                data={
                    "reason": reason,
                    "detail": detail[:500],
                    # Who the workflow goes back to on resume, as it was when it was interrupted.
                    "owner": workflow.owner.get_username() if workflow.owner else None,
                },
            )
            workflow.move(Workflow.Status.PAUSED, actor=actor, verb=Event.Verb.PAUSED, at=now, last_activity_at=now)
            checkpoint.signature = signature_of(checkpoint)
            # What it puts at stake, read from the resume state as the database gives it back (PostgreSQL's
            # jsonb orders the keys of an object, and the order amounts are read in is the money rule's): the
            # figures every reader of the stored resume state got before the column.
            stored = Checkpoint.objects.values_list("resume_state", flat=True).get(pk=checkpoint.pk)
            checkpoint.at_stake = stake_in(stored, kind=workflow.kind)
            Checkpoint.objects.filter(pk=checkpoint.pk).update(
                signature=checkpoint.signature, at_stake=checkpoint.at_stake
            )
            Incident.gather(checkpoint, now=now)
        return checkpoint

    def get_absolute_url(self) -> str:
        """The workbench (the admin's "View on site" leads there)."""
        return reverse("workbench", args=[self.pk])

    @property
    def is_open(self) -> bool:
        """On the operator queue: open or claimed, not decided yet."""
        return self.status in OPEN_STATUSES

    @property
    def is_awaiting_approval(self) -> bool:
        """Four eyes: decided by one operator, waiting for a second."""
        return self.status == self.Status.DECIDED and self.decisions.proposed().exists()

    @property
    def clock_runs(self) -> bool:
        return self.is_open or self.is_awaiting_approval

    UNDO_CLAIM_SECONDS = 120

    @property
    def claimed_recently(self) -> bool:
        """A claim this fresh is offered as "Undo claim" (a release by another name)."""
        return (
            self.status == self.Status.CLAIMED
            and self.claimed_at is not None
            and (timezone.now() - self.claimed_at).total_seconds() < self.UNDO_CLAIM_SECONDS
        )

    @property
    def is_unclaimed(self) -> bool:
        """On the queue and nobody holds it: it may be claimed."""
        return self.status == self.Status.OPEN

    @property
    def is_breached(self) -> bool:
        return self.breached_at is not None

    @property
    def unknown_effects(self) -> list[dict[str, Any]]:
        effects: list[dict[str, Any]] = self.resume_state.get("unknown_effects", [])
        return effects

    @property
    def terms(self) -> Terms:
        return Terms(self.sla)

    def claim(self, *, by: Any) -> bool:
        """OPEN -> CLAIMED. False when someone else got there first."""
        return self._hand_to(by, actor=by, verb=Event.Verb.CLAIMED, from_=[self.Status.OPEN])

    def release(self, *, by: Any) -> bool:
        """CLAIMED -> OPEN, unassigned. False when it changed hands (or status) since it was read."""
        return self.move(
            self.Status.OPEN,
            from_=[self.Status.CLAIMED],
            expect={"assignee_id": self.assignee_id},
            actor=by,
            verb=Event.Verb.RELEASED,
            assignee=None,
            claimed_at=None,
            remind_at=None,
            release_at=None,
        )

    def may_reassign(self, by: Any) -> bool:
        """A checkpoint someone holds is given away by its holder or an admin, never taken by another
        operator (who could then decide it): they ask the holder to release or hand it over."""
        return self.status != self.Status.CLAIMED or self.assignee_id in (None, by.pk) or is_admin(by)

    def assign(self, *, to: Operator, by: Any, note: str = "") -> bool:
        """Give a queued checkpoint to another operator (claimed on their behalf).

        False when it changed hands (or was decided) since it was read, and when ``by`` may not take it
        from its holder (``may_reassign``): the holder read here is the one the compare-and-set expects."""
        if not self.may_reassign(by):
            return False
        with transaction.atomic():
            won = self._hand_to(
                to,
                actor=by,
                verb=Event.Verb.ASSIGNED,
                from_=OPEN_STATUSES,
                expect={"assignee_id": self.assignee_id},
                data={"to": to.get_username(), "note": note[:1000]},
            )
            if won and to.pk != by.pk:  # the new holder hears it at once (the bell, their channels, their phone)
                Notification.send(
                    kind=Notification.Kind.ASSIGNED,
                    checkpoint=self,
                    users=[to],
                    title=f"{by.get_username()} assigned it to you: {self.workflow.title}"[:300],
                    body=note[:1000] or self.detail[:500],
                    key=f"cp{self.pk}:assigned:{self.claimed_at.timestamp() if self.claimed_at else 0}",
                )
        return won

    def _hand_to(
        self,
        user: Operator,
        *,
        actor: Actor | None,
        verb: Event.Verb,
        from_: Iterable[str],
        data: Mapping[str, object] | None = None,
        at: datetime | None = None,
        expect: Mapping[str, object] | None = None,
        now: datetime | None = None,
        **fields: object,
    ) -> bool:
        """-> CLAIMED by ``user``: the claim clock stops (a late first claim records its breach) and the
        no-progress timers start (from ``now``: a sweep passes its own, the database's)."""
        now = now or timezone.now()
        with transaction.atomic():
            won = self.move(
                self.Status.CLAIMED,
                from_=from_,
                actor=actor,
                verb=verb,
                data=data,
                at=at,
                expect=expect,
                assignee=user,
                claimed_at=now,
                **first_claim(now, by_person=actor is not None),
                **self._claim_timers(now),
                **fields,
            )
            if won and self.claimed_late():
                SlaClock(self).record_claim_breach(now, notify=False)
        return won

    def claimed_late(self) -> bool:
        """The first claim came after the time-to-claim target (False without a claim clock or a claim)."""
        return (
            self.claim_due_at is not None
            and self.first_claimed_at is not None
            and self.first_claimed_at > self.claim_due_at
        )

    def _claim_timers(self, now: datetime) -> dict[str, datetime | None]:
        reminder, release = self.terms.data.get("reminder"), self.terms.data.get("release")
        return {
            "remind_at": self.terms.after(now, reminder) if reminder else None,
            "release_at": self.terms.after(now, release) if release else None,
        }

    # --- the transitions the SLA clocks make; the clocks themselves are SlaClock (models/clocks.py) ---

    def reassign_by_escalation(self, to: Operator, *, at: datetime, now: datetime) -> bool:
        """An escalation level hands it to ``to``; False when it changed hands since it was read."""
        return self._hand_to(
            to,
            actor=None,
            verb=Event.Verb.ASSIGNED,
            at=at,
            now=now,
            from_=OPEN_STATUSES,
            expect={"assignee_id": self.assignee_id},
            data={"to": to.get_username(), "note": "escalation"},
        )

    def release_for_no_progress(self, *, at: datetime) -> bool:
        """CLAIMED -> OPEN when a claim made no progress for the release time (stamped at it)."""
        holder = self.assignee
        return self.move(
            self.Status.OPEN,
            verb=Event.Verb.RELEASED,
            at=at,
            data={"why": "no progress", "from_assignee": holder.get_username() if holder else None},
            expect={"release_at": at, "assignee_id": self.assignee_id},
            assignee=None,
            claimed_at=None,
            remind_at=None,
            release_at=None,
        )

    def explain_breach(self, *, reason: BreachReason | None, note: str, by: Operator) -> bool:
        """A TPM records why the SLA was breached (a reason from the list, and free text). False when it
        did not breach."""
        if self.breached_at is None and self.claim_breached_at is None:
            return False
        with transaction.atomic():
            Checkpoint.objects.filter(pk=self.pk).update(breach_reason=reason, breach_note=note[:2000])
            Event.record(
                self,
                Event.Verb.BREACH_EXPLAINED,
                actor=by,
                data={"reason": reason.name if reason else None, "note": note[:500]},
            )
        self.refresh_from_db()
        return True

    def continued_clock(self, now: datetime | None = None) -> dict[str, Any]:
        """Fields that reopen a decided checkpoint's clock where it stopped (not from zero)."""
        now = now or timezone.now()
        stopped = self.clock_stopped_at
        if stopped is None:
            return {}
        terms = self.terms

        def shifted(deadline: datetime | None) -> datetime | None:
            if deadline is None or deadline <= stopped:
                return deadline
            return terms.after(now, terms.left(stopped, deadline).total_seconds())

        fields = {"clock_stopped_at": None, "escalation_at": shifted(self.escalation_at)}
        if self.warned_at is None:
            fields["warn_at"] = shifted(self.warn_at)
        if self.breached_at is None:
            fields["due_at"] = shifted(self.due_at)
        return fields

    def give_back(
        self, to: Operator | None, *, actor: Actor | None, verb: Event.Verb, data: Mapping[str, object] | None = None
    ) -> bool:
        """Return a decided checkpoint to its previous holder, or to the queue when they cannot take it
        (inactive, no longer an operator, outside their working hours). The decision clock continues."""
        now = timezone.now()
        clock = self.continued_clock(now)
        ok, why = can_take_work(to, now)
        if ok and to is not None:  # can_take_work says no to nobody
            return self._hand_to(to, actor=actor, verb=verb, data=data, from_=[self.Status.DECIDED], **clock)
        return self.move(
            self.Status.OPEN,
            from_=[self.Status.DECIDED],
            actor=actor,
            verb=Event.Verb.RETURNED_TO_QUEUE,
            data={**(data or {}), "fallback": why},
            assignee=None,
            claimed_at=None,
            remind_at=None,
            release_at=None,
            **clock,
        )

    def runbook_versions(self) -> list[RunbookVersion]:
        """The runbook versions that bind a decision here: its own, and for a fork's checkpoint those of the
        checkpoints it came from (the stricter wins: any refusal refuses, any four eyes applies)."""
        versions: list[RunbookVersion] = []
        seen: set[int] = set()
        checkpoint: Checkpoint | None = self
        while checkpoint is not None and checkpoint.pk not in seen and len(seen) <= MAX_ORIGINS:
            seen.add(checkpoint.pk)
            if checkpoint.runbook_version is not None:
                versions.append(checkpoint.runbook_version)
            checkpoint = checkpoint.origin
        return versions

    def current_decision(self) -> Decision | None:
        return self.decisions.active().select_related("decided_by", "new_owner").first()

    def decision_for_agent(self) -> Decision | None:
        """The decision the agent may act on. A proposal awaiting four eyes is not one yet; a failed
        delivery is not one any more (the checkpoint went back to the operators)."""
        decision = self.current_decision()
        return decision if decision is not None and decision.is_in_delivery else None

    def may_be_decided_by(self, user: Any) -> bool:
        """On the queue, and not held by another operator."""
        return self.is_open and self.assignee_id in (None, user.pk)

    def since_interruption(self) -> SinceInterruption:
        """What happened after the interruption, beside the resume state frozen at it: the decision (with
        its confirmations), the effects committed since, the next checkpoint if it paused again, and where
        the workflow stands now."""
        at_interruption = {e.get("idempotency_key") for e in self.resume_state.get("committed", [])}
        effects = [
            s
            for s in self.workflow.steps.filter(kind="effect", status="committed").order_by("seq")
            if s.idempotency_key not in at_interruption
        ]
        later = self.workflow.checkpoints.filter(opened_at__gt=self.opened_at).order_by("opened_at", "pk").first()
        return {
            "decision": self.current_decision(),
            "effects": effects,
            "next_checkpoint": later,
            "workflow_status": self.workflow.get_status_display(),
            "summary": self.workflow.summary,
        }
