"""The domain: agents, workflows and their trajectories, checkpoints, decisions.

Every status change goes through ``Stateful.move``: it refuses a transition
that is not in the model's ``TRANSITIONS`` table, applies the allowed one as a
compare-and-set ``UPDATE … WHERE status = <current>`` (so racing operators and
double clicks are harmless) and writes an ``Event`` in the same transaction.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

User = settings.AUTH_USER_MODEL


class IllegalTransition(Exception):
    """A status change that the model's transition table does not allow."""


class Conflict(Exception):
    """The request conflicts with recorded state (the API answers 409)."""


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a fast hash is enough: nothing to brute force.
    return hashlib.sha256(token.encode()).hexdigest()


class Stateful(models.Model):
    """A model with one ``status`` field and a table of allowed transitions."""

    TRANSITIONS: dict[str, set[str]] = {}

    class Meta:
        abstract = True

    def move(self, to: str, *, actor: Any = None, verb: str | None = None, data: dict | None = None,
             **fields: Any) -> bool:
        """Current status -> ``to``. False when the row changed under us first."""
        current = self.status
        if to not in self.TRANSITIONS.get(current, set()):
            raise IllegalTransition(f"{type(self).__name__} {self.pk}: {current} -> {to} is not allowed")
        with transaction.atomic():
            won = type(self).objects.filter(pk=self.pk, status=current).update(status=to, **fields)
            if won:
                Event.record(self, verb or to, actor=actor, data={"from": current, "to": to, **(data or {})})
        self.refresh_from_db()
        return bool(won)


# --- Agents ------------------------------------------------------------------

class Agent(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=12, editable=False, help_text="First characters, to recognise a token.")
    resume_url = models.URLField(blank=True, help_text="Decisions are POSTed here; empty means the agent polls.")
    signing_secret = models.CharField(max_length=64, editable=False,
                                      help_text="HMAC-SHA256 key for X-Recovery-Signature.")
    owner = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                              help_text="Default owner of this agent's workflows.")
    silence_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Open a checkpoint when a running workflow is silent this long.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def register(cls, name: str, *, resume_url: str = "", owner: Any = None,
                 description: str = "") -> tuple[Agent, str]:
        """Create an agent; returns it with its token, which is never stored in clear."""
        agent = cls(name=name, resume_url=resume_url, owner=owner, description=description,
                    signing_secret=secrets.token_hex(32))
        token = agent.set_new_token()
        agent.save()
        return agent, token

    def set_new_token(self) -> str:
        token = "rc_" + secrets.token_urlsafe(32)
        self.token_hash = hash_token(token)
        self.token_prefix = token[:10]
        return token

    @classmethod
    def authenticate(cls, token: str) -> Agent | None:
        return cls.objects.filter(token_hash=hash_token(token), is_active=True).first()

    @property
    def silence_limit(self) -> timedelta:
        return timedelta(seconds=self.silence_seconds or settings.AGENT_SILENCE_SECONDS)


# --- Runbooks ----------------------------------------------------------------

class Action(models.TextChoices):
    RESUME = "resume", "Resume"
    HANDOFF = "handoff", "Hand off"
    RETRY_STEP = "retry_step", "Retry step"
    ABORT = "abort", "Abort"


class Reason(models.TextChoices):
    MODEL_TIMEOUT = "model_timeout", "Model timeout"
    TOOL_ERROR = "tool_error", "Tool error"
    RATE_LIMIT = "rate_limit", "Rate limit"
    PROVIDER_CHANGE = "provider_change", "Provider change"
    UNTRUSTED_OUTPUT = "untrusted_output", "Untrusted output"
    MANUAL = "manual", "Manual"
    OTHER = "other", "Other"


def all_actions() -> list[str]:
    return list(Action.values)


class Runbook(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    url = models.URLField(blank=True, help_text="Link to the full runbook.")
    body = models.TextField(blank=True, help_text="What the operator should check and do.")
    workflow_kind = models.CharField(max_length=100, blank=True, help_text="Empty matches every kind.")
    reason = models.CharField(max_length=32, choices=Reason.choices, blank=True,
                              help_text="Empty matches every reason.")
    is_default = models.BooleanField(default=False, help_text="Used when no other runbook matches.")
    sla_target_minutes = models.PositiveIntegerField(default=30)
    sla_warning_minutes = models.PositiveIntegerField(default=10, help_text="Warn this long before the target.")
    escalation_target = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL,
                                          related_name="+", help_text="Who gets a breached checkpoint.")
    allowed_actions = models.JSONField(default=all_actions)
    requires_four_eyes = models.BooleanField(
        default=False, help_text="A decision that touches money needs a second operator's approval.")

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True),
                                    name="one_default_runbook"),
        ]

    def __str__(self) -> str:
        return self.title

    @classmethod
    def match(cls, kind: str, reason: str) -> Runbook | None:
        """The most specific runbook: kind and reason, then kind, then reason, then the default."""
        candidates = cls.objects.filter(
            Q(workflow_kind=kind, reason=reason) | Q(workflow_kind=kind, reason="")
            | Q(workflow_kind="", reason=reason) | Q(is_default=True))

        def rank(runbook: Runbook) -> int:
            return (2 if runbook.workflow_kind else 0) + (1 if runbook.reason else 0)

        best = sorted(candidates, key=lambda r: (-rank(r), not r.is_default, r.slug))
        return best[0] if best else None

    def allows(self, action: str) -> bool:
        return action in (self.allowed_actions or [])


# --- Workflows and steps ------------------------------------------------------

class WorkflowQuerySet(models.QuerySet):
    def owned_by(self, user: Any) -> WorkflowQuerySet:
        return self.filter(owner=user)

    def silent(self, now: Any = None) -> WorkflowQuerySet:
        """Running workflows whose agent said nothing for its silence limit (refined per agent in Python)."""
        now = now or timezone.now()
        shortest = timedelta(seconds=min(
            [settings.AGENT_SILENCE_SECONDS]
            + list(Agent.objects.exclude(silence_seconds=None).values_list("silence_seconds", flat=True))))
        return self.filter(status=Workflow.Status.RUNNING, last_activity_at__lt=now - shortest)


class Workflow(Stateful):
    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        RESUMING = "resuming"
        COMPLETED = "completed"
        FAILED = "failed"
        HANDED_OFF = "handed_off"
        ABORTED = "aborted"

    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.HANDED_OFF, Status.ABORTED}
    TRANSITIONS = {
        Status.RUNNING: {Status.PAUSED, Status.COMPLETED, Status.FAILED},
        Status.PAUSED: {Status.RESUMING, Status.HANDED_OFF, Status.ABORTED},
        # A resuming workflow may be paused again before the agent confirms (it crashed again).
        Status.RESUMING: {Status.RUNNING, Status.PAUSED},
        # Handed-off work is finished by its new (human) owner.
        Status.HANDED_OFF: {Status.COMPLETED, Status.FAILED},
    }

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="workflows")
    external_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)
    title = models.CharField(max_length=300)
    owner = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="workflows")
    context = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    summary = models.TextField(blank=True)
    handoff_note = models.TextField(blank=True, help_text="The handoff packet for the new owner.")
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = WorkflowQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "external_id"], name="one_workflow_per_external_id"),
        ]
        indexes = [
            models.Index(fields=["status", "last_activity_at"], name="workflow_silence_scan"),
            models.Index(fields=["owner", "status"], name="workflow_by_owner"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    def touch(self) -> None:
        Workflow.objects.filter(pk=self.pk).update(last_activity_at=timezone.now())

    def finish(self, status: str, summary: str, *, actor: Any) -> bool:
        if self.checkpoints.unresolved().exists():
            raise Conflict("The workflow has an open checkpoint; it cannot finish until it is resolved.")
        return self.move(status, actor=actor, verb=f"finished_{status}", data={"summary": summary},
                         summary=summary, finished_at=timezone.now())

    def resume_state(self, *, at_seq: int | None = None, agent_state: Any = None) -> dict:
        """The minimum that makes the next step safe, computed from the recorded steps."""
        steps = list(self.steps.order_by("seq"))
        committed = [s.as_dict() for s in steps if s.kind == Step.Kind.EFFECT and s.status == Step.Status.COMMITTED]
        unknown = [s.as_dict() for s in steps if s.is_unknown_effect]
        verified = [s for s in steps if s.verified and s.status == Step.Status.COMMITTED]
        pending = next((s for s in steps if s.seq == at_seq and s.status != Step.Status.COMMITTED), None)
        if pending is None:
            pending = next((s for s in reversed(steps)
                            if s.status == Step.Status.PENDING and not s.is_unknown_effect), None)
        return {
            "committed": committed,
            "pending": pending.as_dict() if pending else None,
            "last_verified_output": verified[-1].output if verified else None,
            "promises": [s.promise for s in steps if s.promise and s.status != Step.Status.FAILED],
            "unknown_effects": unknown,
            "state": agent_state if agent_state is not None else {},
        }


class Step(Stateful):
    class Kind(models.TextChoices):
        MODEL = "model"
        TOOL = "tool"
        EFFECT = "effect"
        MESSAGE = "message"

    class Status(models.TextChoices):
        PENDING = "pending"
        COMMITTED = "committed"
        FAILED = "failed"

    TRANSITIONS = {Status.PENDING: {Status.COMMITTED, Status.FAILED}}

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    verified = models.BooleanField(default=False)
    # NULL, not "", means "none sent": the API echoes null, and the partial unique
    # index on idempotency_key must ignore steps without one.
    promise = models.TextField(null=True, blank=True)  # noqa: DJ001
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    external_ref = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workflow", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "seq"], name="one_step_per_seq"),
            models.UniqueConstraint(fields=["workflow", "idempotency_key"],
                                    condition=Q(idempotency_key__isnull=False),
                                    name="one_step_per_idempotency_key"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="step_seq_positive"),
            models.CheckConstraint(condition=~Q(kind="effect") | Q(idempotency_key__isnull=False),
                                   name="effect_has_idempotency_key"),
        ]

    def __str__(self) -> str:
        return f"{self.seq}. {self.name}"

    RECORDED_FIELDS = ("name", "kind", "status", "input", "output", "verified", "promise",
                       "idempotency_key", "external_ref")

    @property
    def is_unknown_effect(self) -> bool:
        return self.kind == self.Kind.EFFECT and self.status == self.Status.PENDING

    def as_dict(self) -> dict:
        return {"seq": self.seq, **{f: getattr(self, f) for f in self.RECORDED_FIELDS}}


# --- Checkpoints ---------------------------------------------------------------

class CheckpointQuerySet(models.QuerySet):
    def unresolved(self) -> CheckpointQuerySet:
        return self.exclude(status=Checkpoint.Status.RESOLVED)

    def open(self) -> CheckpointQuerySet:
        """On the operator queue: waiting for someone to decide."""
        return self.filter(status__in=[Checkpoint.Status.OPEN, Checkpoint.Status.CLAIMED])

    def breached(self) -> CheckpointQuerySet:
        return self.filter(breached_at__isnull=False)

    def due(self, now: Any = None) -> CheckpointQuerySet:
        """Open checkpoints past their SLA target whose breach is not recorded yet."""
        return self.open().filter(breached_at__isnull=True, due_at__lte=now or timezone.now())

    def warning(self, now: Any = None) -> CheckpointQuerySet:
        return self.open().filter(warned_at__isnull=True, warn_at__lte=now or timezone.now())

    def for_queue(self) -> CheckpointQuerySet:
        return self.select_related("workflow__agent", "workflow__owner", "assignee", "runbook")


class Checkpoint(Stateful):
    class Status(models.TextChoices):
        OPEN = "open"
        CLAIMED = "claimed"
        DECIDED = "decided"
        RESOLVED = "resolved"

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
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    opened_by_console = models.BooleanField(default=False)
    runbook = models.ForeignKey(Runbook, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    assignee = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    claimed_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(default=timezone.now)
    warn_at = models.DateTimeField()
    due_at = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    breached_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = CheckpointQuerySet.as_manager()

    class Meta:
        ordering = ["due_at"]
        constraints = [
            models.UniqueConstraint(fields=["workflow"], condition=~Q(status="resolved"),
                                    name="one_unresolved_checkpoint_per_workflow"),
        ]
        indexes = [
            # The operator queue (open/claimed by due time) and the SLA scan.
            models.Index(fields=["status", "due_at"], name="checkpoint_queue"),
            models.Index(fields=["status", "breached_at", "due_at"], name="checkpoint_sla_scan"),
            models.Index(fields=["assignee", "status"], name="checkpoint_by_assignee"),
            # The queue page in its order: an ordered walk that stops after one page,
            # where (status, due_at) would sort every open row for `status IN (open, claimed)`.
            models.Index(fields=["due_at", "id"], condition=Q(status__in=["open", "claimed"]),
                         name="checkpoint_queue_order"),
        ]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} on {self.workflow}"

    @classmethod
    def open_for(cls, workflow: Workflow, *, reason: str, detail: str = "", at_seq: int | None = None,
                 state: Any = None, actor: Any = None, by_console: bool = False) -> Checkpoint:
        """Pause the workflow at a new checkpoint. Conflict if one is already unresolved."""
        with transaction.atomic():
            workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
            if workflow.checkpoints.unresolved().exists():
                raise Conflict("The workflow already has an open checkpoint.")
            if workflow.status not in (Workflow.Status.RUNNING, Workflow.Status.RESUMING):
                raise Conflict(f"A {workflow.status} workflow cannot be paused.")
            runbook = Runbook.match(workflow.kind, reason)
            now = timezone.now()
            target = timedelta(minutes=runbook.sla_target_minutes if runbook else 30)
            warning = timedelta(minutes=runbook.sla_warning_minutes if runbook else 10)
            try:
                with transaction.atomic():
                    checkpoint = cls.objects.create(
                        workflow=workflow, reason=reason, detail=detail, at_seq=at_seq, state=state or {},
                        resume_state=workflow.resume_state(at_seq=at_seq, agent_state=state or {}),
                        runbook=runbook, opened_at=now, due_at=now + target,
                        warn_at=now + max(target - warning, timedelta(0)), opened_by_console=by_console)
            except IntegrityError as exc:  # a concurrent open won the partial unique index
                raise Conflict("The workflow already has an open checkpoint.") from exc
            Event.record(checkpoint, "opened", actor=actor, data={
                "reason": reason, "detail": detail[:500],
                # Who the workflow goes back to on resume, as it was when it was interrupted.
                "owner": workflow.owner.get_username() if workflow.owner else None})
            workflow.move(Workflow.Status.PAUSED, actor=actor, verb="paused", last_activity_at=now)
        return checkpoint

    @property
    def is_breached(self) -> bool:
        return self.breached_at is not None

    @property
    def unknown_effects(self) -> list[dict]:
        return self.resume_state.get("unknown_effects", [])

    def claim(self, *, by: Any) -> bool:
        """OPEN -> CLAIMED. False when someone else got there first."""
        if self.status != self.Status.OPEN:
            return False
        return self.move(self.Status.CLAIMED, actor=by, verb="claimed", assignee=by, claimed_at=timezone.now())

    def release(self, *, by: Any) -> bool:
        if self.status != self.Status.CLAIMED:
            return False
        return self.move(self.Status.OPEN, actor=by, verb="released", assignee=None, claimed_at=None)

    def assign(self, *, to: Any, by: Any, note: str = "") -> bool:
        """Give a queued checkpoint to another operator (claimed on their behalf)."""
        if self.status not in (self.Status.OPEN, self.Status.CLAIMED):
            return False
        return self.move(self.Status.CLAIMED, actor=by, verb="assigned",
                         data={"to": to.get_username(), "note": note[:1000]},
                         assignee=to, claimed_at=timezone.now())

    def record_breach(self, now: Any = None) -> bool:
        """Record the SLA breach once, whatever the number of schedulers racing here."""
        now = now or timezone.now()
        with transaction.atomic():
            won = Checkpoint.objects.filter(
                pk=self.pk, breached_at__isnull=True, status__in=[self.Status.OPEN, self.Status.CLAIMED]
            ).update(breached_at=now)
            if won:
                escalate_to = self.runbook.escalation_target if self.runbook else None
                Event.record(self, "sla_breached", data={
                    "due_at": self.due_at.isoformat(),
                    "escalated_to": escalate_to.get_username() if escalate_to else None})
        self.refresh_from_db()
        return bool(won)

    def touches_money(self) -> bool:
        """True when the resume state holds an unknown or pending effect that moves money."""
        pending = self.resume_state.get("pending")
        effects = self.unknown_effects + ([pending] if pending and pending.get("kind") == "effect" else [])
        return any(isinstance(e.get("input"), dict) and "amount" in e["input"] for e in effects)

    def missing_confirmations(self, confirmations: dict) -> list[str]:
        return [e["idempotency_key"] for e in self.unknown_effects
                if confirmations.get(e["idempotency_key"]) not in Decision.CONFIRMATION_VALUES]

    def current_decision(self) -> Decision | None:
        return self.decisions.active().select_related("decided_by", "new_owner").first()

    def decide(self, *, by: Any, action: str, instructions: str = "", confirmations: dict | None = None,
               confirmation_refs: dict | None = None, new_owner: Any = None, handoff_to: str = "",
               money_confirmed: bool = False) -> Decision:
        """Record the operator's decision; the row is the outbox entry a worker carries out.

        Raises Conflict (naming the winner) when another decision got there first,
        and ValueError when the decision itself is not acceptable.
        """
        confirmations = {k: v for k, v in (confirmations or {}).items() if v}
        if action not in Action.values:
            raise ValueError(f"Unknown action {action!r}.")
        if self.runbook and not self.runbook.allows(action):
            raise ValueError(f"The runbook “{self.runbook.title}” does not allow {Action(action).label.lower()}.")
        unknown_keys = {e["idempotency_key"] for e in self.unknown_effects}
        if bad := [k for k, v in confirmations.items() if k not in unknown_keys or v not in Decision.CONFIRMATION_VALUES]:
            raise ValueError(f"Confirmations name no unknown effect or carry a bad value: {', '.join(bad)}.")
        if action in (Action.RESUME, Action.RETRY_STEP) and (missing := self.missing_confirmations(confirmations)):
            raise ValueError("Confirm what happened to every unknown effect before resuming: " + ", ".join(missing))
        if action == Action.HANDOFF and not (new_owner or handoff_to.strip()):
            raise ValueError("A handoff needs a new owner or the human process that takes it over.")
        money = action in (Action.RESUME, Action.RETRY_STEP) and self.touches_money()
        if money and not money_confirmed:
            raise ValueError("This decision touches money: tick the explicit confirmation.")
        four_eyes = money and bool(self.runbook and self.runbook.requires_four_eyes)
        with transaction.atomic():
            if self.status not in (self.Status.OPEN, self.Status.CLAIMED):
                raise Conflict(self.conflict_message())
            if self.status == self.Status.CLAIMED and self.assignee_id not in (None, by.pk):
                raise Conflict(f"{self.assignee.get_username()} has claimed this checkpoint.")
            try:
                with transaction.atomic():
                    decision = Decision.objects.create(
                        checkpoint=self, action=action, instructions=instructions, confirmations=confirmations,
                        confirmation_refs=confirmation_refs or {}, new_owner=new_owner,
                        handoff_to=handoff_to.strip(), decided_by=by,
                        status=Decision.Status.PROPOSED if four_eyes else Decision.Status.QUEUED)
            except IntegrityError as exc:
                raise Conflict(self.conflict_message()) from exc
            if not self.move(self.Status.DECIDED, actor=by, verb="decided",
                             data={"action": action, "four_eyes": four_eyes},
                             assignee=self.assignee or by):
                raise Conflict(self.conflict_message())  # rolls the decision back too
            if not four_eyes:
                decision.enqueue()
        return decision

    def conflict_message(self) -> str:
        self.refresh_from_db()
        decision = self.current_decision()
        if decision:
            return (f"Already decided: {decision.get_action_display().lower()} by "
                    f"{decision.decided_by.get_username()} at {decision.decided_at:%Y-%m-%d %H:%M:%S} UTC.")
        return f"The checkpoint is {self.status}; it cannot be decided now."

    def record_warning(self, now: Any = None) -> bool:
        with transaction.atomic():
            won = Checkpoint.objects.filter(pk=self.pk, warned_at__isnull=True).update(
                warned_at=now or timezone.now())
            if won:
                Event.record(self, "sla_warning", data={"due_at": self.due_at.isoformat()})
        return bool(won)


# --- Decisions -------------------------------------------------------------------

class DecisionQuerySet(models.QuerySet):
    def active(self) -> DecisionQuerySet:
        return self.exclude(status__in=[Decision.Status.FAILED, Decision.Status.REJECTED])

    def dispatchable(self, now: Any = None) -> DecisionQuerySet:
        """The outbox: queued decisions whose next attempt is due."""
        return self.filter(status=Decision.Status.QUEUED, next_attempt_at__lte=now or timezone.now())

    def stuck(self, now: Any = None) -> DecisionQuerySet:
        """Running decisions whose delivery lease expired: the worker died or hung."""
        return self.filter(status=Decision.Status.RUNNING, lease_expires_at__lt=now or timezone.now())


class Decision(Stateful):
    """What an operator approved on a checkpoint. The row is its own outbox entry."""

    class Status(models.TextChoices):
        PROPOSED = "proposed"  # waiting for a second operator (four eyes)
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        REJECTED = "rejected"  # the second operator said no

    TRANSITIONS = {
        Status.PROPOSED: {Status.QUEUED, Status.REJECTED},
        Status.QUEUED: {Status.RUNNING, Status.SUCCEEDED},
        # RUNNING -> QUEUED: an attempt failed (or its lease expired) and another one is due.
        Status.RUNNING: {Status.SUCCEEDED, Status.FAILED, Status.QUEUED},
    }

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="decisions")
    action = models.CharField(max_length=16, choices=Action.choices)
    instructions = models.TextField(blank=True)
    confirmations = models.JSONField(default=dict, blank=True,
                                     help_text="idempotency_key -> happened | did_not_happen")
    confirmation_refs = models.JSONField(default=dict, blank=True,
                                         help_text="idempotency_key -> external reference an operator saw")
    new_owner = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    handoff_to = models.CharField(max_length=200, blank=True, help_text="A human process, when not a person.")
    decided_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(default=timezone.now)
    approved_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = DecisionQuerySet.as_manager()

    class Meta:
        ordering = ["-decided_at"]
        constraints = [
            # One decision per checkpoint: failed and rejected ones stay as history.
            models.UniqueConstraint(fields=["checkpoint"], condition=~Q(status__in=["failed", "rejected"]),
                                    name="one_active_decision_per_checkpoint"),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="decision_outbox"),
            models.Index(fields=["status", "lease_expires_at"], name="decision_leases"),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} on {self.checkpoint}"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED, self.Status.REJECTED)

    CONFIRMATION_VALUES = ("happened", "did_not_happen")

    @property
    def agent(self) -> Agent:
        return self.checkpoint.workflow.agent

    @property
    def is_polled(self) -> bool:
        """Agents without a resume endpoint fetch their decision from the API."""
        return not self.agent.resume_url

    def enqueue(self) -> None:
        """Ready for delivery: resuming workflows show it at once; the relay picks the row up."""
        workflow = self.checkpoint.workflow
        if self.action in (Action.RESUME, Action.RETRY_STEP) and workflow.status == Workflow.Status.PAUSED:
            workflow.move(Workflow.Status.RESUMING, actor=self.decided_by, verb="resuming")
        if not self.is_polled:
            Decision.objects.filter(pk=self.pk).update(next_attempt_at=timezone.now())
            transaction.on_commit(wake_relay)

    def approve(self, *, by: Any) -> bool:
        """Four eyes: a second operator lets a money decision go out."""
        if by.pk == self.decided_by_id:
            raise ValueError("The second approval must come from another operator.")
        with transaction.atomic():
            if not self.move(self.Status.QUEUED, actor=by, verb="approved", approved_by=by):
                return False
            self.enqueue()
        return True

    def reject(self, *, by: Any, note: str = "") -> bool:
        with transaction.atomic():
            if not self.move(self.Status.REJECTED, actor=by, verb="rejected", data={"note": note[:1000]},
                             finished_at=timezone.now(), last_error=f"Rejected by {by.get_username()}: {note}"[:2000]):
                return False
            self.checkpoint.move(Checkpoint.Status.CLAIMED, actor=by, verb="reopened", assignee=self.decided_by)
        return True

    def start_attempt(self, *, lease_seconds: int | None = None) -> bool:
        """QUEUED -> RUNNING under a lease. Only the holder of a live lease may deliver."""
        lease = timedelta(seconds=lease_seconds or settings.DELIVERY_LEASE_SECONDS)
        if self.status != self.Status.QUEUED:
            return False
        return self.move(self.Status.RUNNING, verb="delivery_started", data={"attempt": self.attempts + 1},
                         attempts=models.F("attempts") + 1, lease_expires_at=timezone.now() + lease,
                         next_attempt_at=None)

    def mark_succeeded(self, *, how: str = "delivered") -> bool:
        with transaction.atomic():
            if not self.move(self.Status.SUCCEEDED, verb=how, finished_at=timezone.now(),
                             lease_expires_at=None, next_attempt_at=None, last_error=""):
                return False
            self.carry_out()
        return True

    def carry_out(self) -> None:
        """The decision reached the agent: resolve the checkpoint and move the workflow on."""
        checkpoint = self.checkpoint
        checkpoint.move(Checkpoint.Status.RESOLVED, verb="resolved", resolved_at=timezone.now())
        workflow = checkpoint.workflow
        workflow.refresh_from_db()
        now = timezone.now()
        if self.action in (Action.RESUME, Action.RETRY_STEP):
            if workflow.status == Workflow.Status.RESUMING:
                workflow.move(Workflow.Status.RUNNING, verb="resumed", last_activity_at=now)
        elif self.action == Action.HANDOFF:
            packet = self.handoff_packet()
            workflow.move(Workflow.Status.HANDED_OFF, verb="handed_off", actor=self.decided_by,
                          data={"to": packet["to"]}, owner=self.new_owner or workflow.owner,
                          handoff_note=packet["note"], last_activity_at=now)
        elif self.action == Action.ABORT:
            workflow.move(Workflow.Status.ABORTED, verb="aborted", actor=self.decided_by,
                          summary=self.instructions, finished_at=now, last_activity_at=now)

    def handoff_packet(self) -> dict:
        to = self.new_owner.get_username() if self.new_owner else self.handoff_to
        return {"to": to, "note": self.instructions}

    def mark_attempt_failed(self, error: str) -> bool:
        """An attempt failed: retry with backoff, or after the last one fail and requeue the checkpoint."""
        self.refresh_from_db()
        if self.status != self.Status.RUNNING:
            return False
        if self.attempts < settings.DELIVERY_MAX_ATTEMPTS:
            delay = settings.DELIVERY_BACKOFF_SECONDS * (2 ** (self.attempts - 1))
            return self.move(self.Status.QUEUED, verb="delivery_retry",
                             data={"attempt": self.attempts, "error": error[:500]},
                             last_error=error[:2000], lease_expires_at=None,
                             next_attempt_at=timezone.now() + timedelta(seconds=delay))
        with transaction.atomic():
            if not self.move(self.Status.FAILED, verb="delivery_failed",
                             data={"attempts": self.attempts, "error": error[:500]},
                             last_error=error[:2000], lease_expires_at=None, finished_at=timezone.now()):
                return False
            self.checkpoint.move(Checkpoint.Status.OPEN, verb="returned_to_queue",
                                 data={"error": error[:500]}, assignee=None, claimed_at=None)
            workflow = self.checkpoint.workflow
            workflow.refresh_from_db()
            if workflow.status == Workflow.Status.RESUMING:
                workflow.move(Workflow.Status.PAUSED, verb="paused", data={"error": error[:500]})
        return True

    def payload(self) -> dict:
        """What the agent's resume endpoint receives (API.md)."""
        checkpoint = self.checkpoint
        workflow = checkpoint.workflow
        return {
            "workflow_id": str(workflow.pk),
            "external_id": workflow.external_id,
            "checkpoint_id": str(checkpoint.pk),
            "action": self.action,
            "instructions": self.instructions,
            "confirmations": self.confirmations,
            # Beyond API.md: the external reference the operator saw for each effect confirmed as happened.
            "confirmation_refs": self.confirmation_refs,
            "resume_state": checkpoint.resume_state,
            "new_owner": self.new_owner.get_username() if self.new_owner else (self.handoff_to or None),
            "delivery_id": str(self.delivery_id),
        }


def wake_relay() -> None:
    """Nudge the outbox relay (LISTEN/NOTIFY on PostgreSQL); polling covers every other case."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("NOTIFY recovery_outbox")


# --- Events ----------------------------------------------------------------------

class Event(models.Model):
    """The append-only audit trail."""

    class ActorType(models.TextChoices):
        OPERATOR = "operator"
        AGENT = "agent"
        SYSTEM = "system"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor_user = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verb = models.CharField(max_length=64)
    workflow = models.ForeignKey(Workflow, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="events")
    decision = models.ForeignKey(Decision, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [models.Index(fields=["workflow", "at"], name="event_by_workflow")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.verb}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk and not kwargs.get("force_insert"):
            raise IllegalTransition("Events are append-only.")
        super().save(*args, **kwargs)

    @property
    def actor(self) -> str:
        if self.actor_user_id:
            return self.actor_user.get_username()
        if self.actor_agent_id:
            return f"agent {self.actor_agent.name}"
        return "system"

    @classmethod
    def record(cls, subject: models.Model, verb: str, *, actor: Any = None, data: dict | None = None) -> Event:
        event = cls(verb=verb, data=data or {})
        if isinstance(actor, Agent):
            event.actor_type, event.actor_agent = cls.ActorType.AGENT, actor
        elif actor is not None:
            event.actor_type, event.actor_user = cls.ActorType.OPERATOR, actor
        else:
            event.actor_type = cls.ActorType.SYSTEM
        if isinstance(subject, Decision):
            event.decision = subject
            subject = subject.checkpoint
        if isinstance(subject, Checkpoint):
            event.checkpoint = subject
            subject = subject.workflow
        if isinstance(subject, Workflow):
            event.workflow = subject
        elif isinstance(subject, Step):
            event.workflow_id = subject.workflow_id
        event.save()
        return event
