"""Workflows (one run of an agent on one job) and the steps of their trajectory."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .agents import Agent
from .base import Conflict, Stateful
from .events import Event

User = settings.AUTH_USER_MODEL


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

    def matching(self, text: str) -> WorkflowQuerySet:
        """The navigation search: an id, the external id a customer quotes, a title or an agent's name.

        Exact matches (id, external id, agent) rank first; titles and external ids also match in part.
        """
        text = text.strip()[:200]
        if not text:
            return self.none()
        exact = Q(external_id__iexact=text) | Q(agent__name__iexact=text)
        if text.isdigit() and int(text) <= 2_147_483_647:
            exact |= Q(pk=int(text))
        loose = Q(external_id__icontains=text) | Q(title__icontains=text)
        return (self.filter(exact | loose).select_related("agent", "owner")
                .annotate(exact_match=models.Case(models.When(exact, then=0), default=1))
                .order_by("exact_match", "-last_activity_at", "-pk"))


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
    # How an agent may finish its own workflow (the new owner finishes handed-off work the same way).
    FINISHED_BY_AGENT = (Status.COMPLETED, Status.FAILED)
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
        return self.move(status, actor=actor, verb=Event.Verb.finished(status), data={"summary": summary},
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
