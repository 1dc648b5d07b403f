"""The append-only audit trail."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from .base import IllegalTransition

User = settings.AUTH_USER_MODEL


class Event(models.Model):
    """The append-only audit trail."""

    class ActorType(models.TextChoices):
        OPERATOR = "operator"
        AGENT = "agent"
        SYSTEM = "system"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor_user = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_agent = models.ForeignKey("workflows.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verb = models.CharField(max_length=64)
    workflow = models.ForeignKey("workflows.Workflow", null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    checkpoint = models.ForeignKey("workflows.Checkpoint", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="events")
    decision = models.ForeignKey("workflows.Decision", null=True, blank=True, on_delete=models.CASCADE, related_name="events")
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
        # Dispatch on the model's name: this module sits below every model it records.
        event = cls(verb=verb, data=data or {})
        if actor is not None and actor._meta.label == "workflows.Agent":
            event.actor_type, event.actor_agent = cls.ActorType.AGENT, actor
        elif actor is not None:
            event.actor_type, event.actor_user = cls.ActorType.OPERATOR, actor
        else:
            event.actor_type = cls.ActorType.SYSTEM
        kind = subject._meta.model_name
        if kind == "decision":
            event.decision = subject
            subject, kind = subject.checkpoint, "checkpoint"
        if kind == "checkpoint":
            event.checkpoint = subject
            subject, kind = subject.workflow, "workflow"
        if kind == "workflow":
            event.workflow = subject
        elif kind == "step":
            event.workflow_id = subject.workflow_id
        event.save()
        return event
