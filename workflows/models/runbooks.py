"""Runbooks and the vocabulary they are matched on: actions and reasons."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

User = settings.AUTH_USER_MODEL


class Action(models.TextChoices):
    RESUME = "resume", "Resume"
    HANDOFF = "handoff", "Hand off"
    RETRY_STEP = "retry_step", "Retry step"
    ABORT = "abort", "Abort"
    FAILOVER = "failover", "Fail over"  # resume on a standby agent of the same kind; the original stands down

    @property
    def resumes(self) -> bool:
        """The agent carries on with the workflow (so unknown effects must be confirmed first)."""
        return self in RESUMING_ACTIONS


# The actions after which the agent carries on with the workflow.
RESUMING_ACTIONS = frozenset({Action.RESUME, Action.RETRY_STEP, Action.FAILOVER})


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
    policy = models.ForeignKey("workflows.SLAPolicy", null=True, blank=True, on_delete=models.PROTECT,
                               related_name="runbooks", help_text="The SLA policy of checkpoints it matches.")
    allowed_actions = models.JSONField(default=all_actions)
    requires_four_eyes = models.BooleanField(
        default=False, help_text="A decision that touches money needs a second operator's approval.")
    four_eyes_on_every_resume = models.BooleanField(
        default=False, help_text="Every resume or retry of a matching checkpoint needs a second operator's "
                                 "approval, whether or not it touches money.")

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
