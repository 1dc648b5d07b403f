"""Runbooks and the vocabulary they are matched on: actions and reasons.

A runbook is edited by admins (the console's runbook pages, or the Django admin
as a fallback). Every save that changes it writes an immutable ``RunbookVersion``
(``Runbook.snapshot``); the runbook row is the head, always equal to its current
version. A checkpoint keeps the version it opened with: what it allows, its four
eyes and the text operators read do not move when the runbook is edited later.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

if TYPE_CHECKING:
    from .agents import Agent
    from .base import Operator

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
    # Opened by the console, not an agent: the agent's incident put it on hold (models/incidents.py).
    HELD = "held", "Held"


# What an agent may report as a checkpoint's reason: every reason but the console's own.
AGENT_REASONS = tuple(r for r in Reason.values if r != Reason.HELD)


def all_actions() -> list[str]:
    return list(Action.values)


# What a version holds: the content, the match rules and the terms. Same names on both models.
VERSIONED = (
    "title",
    "url",
    "body",
    "workflow_kind",
    "reason",
    "agent",
    "priority",
    "is_default",
    "policy",
    "allowed_actions",
    "requires_four_eyes",
    "four_eyes_on_every_resume",
    "owner",
    "review_by",
)

# How the history names each of them, and the column each is stored in (foreign keys as ids).
LABELS = {
    "title": "title",
    "url": "link",
    "body": "body",
    "workflow_kind": "workflow kind",
    "reason": "reason",
    "agent": "agent",
    "priority": "priority",
    "is_default": "default",
    "policy": "SLA policy",
    "allowed_actions": "allowed decisions",
    "requires_four_eyes": "four eyes on money",
    "four_eyes_on_every_resume": "four eyes on every resume",
    "owner": "owner",
    "review_by": "review date",
}
COLUMNS = {name: f"{name}_id" if name in ("agent", "policy", "owner") else name for name in VERSIONED}

ONE_DEFAULT = (
    "Another runbook is already the default: only one runbook can be. Untick “Default” here, "
    "or untick it on the current default first."
)


class RunbookContent(models.Model):
    """The fields a runbook and each of its versions share."""

    title = models.CharField(max_length=200)
    url = models.URLField(blank=True, help_text="Link to the full runbook.")
    body = models.TextField(blank=True, help_text="What the operator should check and do (Markdown).")
    workflow_kind = models.CharField(max_length=100, blank=True, help_text="Empty matches every kind.")
    reason = models.CharField(
        max_length=32, choices=Reason.choices, blank=True, help_text="Empty matches every reason."
    )
    priority = models.IntegerField(default=0, help_text="Among equally specific runbooks, the higher wins.")
    is_default = models.BooleanField(default=False, help_text="Used when no other runbook matches.")
    allowed_actions = models.JSONField(default=all_actions)
    requires_four_eyes = models.BooleanField(
        default=False, help_text="A decision that touches money needs a second operator's approval."
    )
    four_eyes_on_every_resume = models.BooleanField(
        default=False,
        help_text="Every resume or retry of a matching checkpoint needs a second operator's "
        "approval, whether or not it touches money.",
    )
    review_by = models.DateField(
        null=True, blank=True, help_text="After this date the runbook is flagged stale and its owner is told."
    )

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.title

    def allows(self, action: str) -> bool:
        return action in (self.allowed_actions or [])

    def content(self) -> dict[str, object]:
        """The versioned values, foreign keys as ids: equal dicts mean nothing changed."""
        return {column: getattr(self, column) for column in COLUMNS.values()}

    def changed_since(self, previous: RunbookContent) -> list[str]:
        """The names of the versioned fields that differ from ``previous``, as an admin reads them."""
        mine, theirs = self.content(), previous.content()
        return [LABELS[name] for name, column in COLUMNS.items() if mine[column] != theirs[column]]

    @property
    def allowed_labels(self) -> list[str]:
        return [Action(a).label for a in Action.values if self.allows(a)]

    @property
    def rules(self) -> str:
        """The match rules in words."""
        if self.is_default:
            return "the default: any checkpoint no other runbook matches"
        agent = getattr(self, "agent", None)
        parts = [
            f"kind {self.workflow_kind}" if self.workflow_kind else "",
            f"reason {Reason(self.reason).label.lower()}" if self.reason else "",
            f"agent {agent.name}" if agent else "",
        ]
        said = ", ".join(p for p in parts if p)
        return said or "every checkpoint (no rule set)"

    def lines(self) -> list[str]:
        """The version as text lines, rules first: what a diff compares."""

        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        agent = getattr(self, "agent", None)
        policy = getattr(self, "policy", None)
        owner = getattr(self, "owner", None)
        return [
            f"Title: {self.title}",
            f"Link: {self.url or '(none)'}",
            f"Workflow kind: {self.workflow_kind or '(any)'}",
            f"Reason: {Reason(self.reason).label if self.reason else '(any)'}",
            f"Agent: {agent.name if agent else '(any)'}",
            f"Priority: {self.priority}",
            f"Default: {yes(self.is_default)}",
            f"Allowed decisions: {', '.join(self.allowed_labels) or '(none)'}",
            f"Four eyes on money: {yes(self.requires_four_eyes)}",
            f"Four eyes on every resume: {yes(self.four_eyes_on_every_resume)}",
            f"SLA policy: {policy.name if policy else '(the fallback terms)'}",
            f"Owner: {owner.get_username() if owner else '(nobody)'}",
            f"Review by: {self.review_by.isoformat() if self.review_by else '(no date)'}",
            "",
            "Body:",
            *(self.body or "").splitlines(),
        ]


class RunbookQuerySet(models.QuerySet["Runbook"]):
    def stale(self, today: datetime.date | None = None) -> RunbookQuerySet:
        """Past their review-by date."""
        return self.filter(review_by__lt=today or timezone.localdate())

    def stale_unannounced(self, today: datetime.date | None = None) -> RunbookQuerySet:
        """Stale, with an owner not yet told for this review date."""
        return (
            self.stale(today)
            .filter(owner__isnull=False)
            .filter(Q(stale_notified_for__isnull=True) | ~Q(stale_notified_for=F("review_by")))
        )


class Runbook(RunbookContent):
    slug = models.SlugField(max_length=80, unique=True)
    agent = models.ForeignKey(
        "workflows.Agent",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runbooks",
        help_text="Empty matches every agent.",
    )
    policy = models.ForeignKey(
        "workflows.SLAPolicy",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runbooks",
        help_text="The SLA policy of checkpoints it matches.",
    )
    owner = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runbooks",
        help_text="Who keeps it up to date; told when it passes its review date.",
    )
    current_version = models.ForeignKey(
        "workflows.RunbookVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    stale_notified_for = models.DateField(
        null=True, blank=True, editable=False, help_text="The review date its owner was last told it passed."
    )

    objects = RunbookQuerySet.as_manager()

    # Who is saving (the console's editor and the admin set it): the author of the version a save writes.
    editor: Operator | None = None

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=Q(is_default=True),
                name="one_default_runbook",
                violation_error_message=ONE_DEFAULT,
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Save the head and, when its content changed, write the next version (one transaction)."""
        fields = kwargs.get("update_fields")
        with transaction.atomic():
            super().save(*args, **kwargs)
            if fields is None or set(fields) & (set(COLUMNS) | set(COLUMNS.values())):
                self.snapshot(by=self.editor)

    def get_absolute_url(self) -> str:
        return reverse("runbook", args=[self.pk])

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not self.allowed_actions:
            errors["allowed_actions"] = "Choose at least one decision operators may take."
        elif any(a not in Action.values for a in self.allowed_actions):
            errors["allowed_actions"] = f"Choose among the real decisions: {', '.join(Action.values)}."
        if self.is_default:
            other = Runbook.objects.filter(is_default=True).exclude(pk=self.pk).first()
            if other is not None:
                errors["is_default"] = (
                    f"“{other.title}” is already the default runbook, and only one can be. "
                    "Untick “Default” here, or untick it on that runbook first."
                )
            elif self.workflow_kind or self.reason or self.agent_id:
                errors["is_default"] = (
                    "The default applies when nothing else matches: leave its workflow kind, reason and agent empty."
                )
        if errors:
            raise ValidationError(errors)

    def snapshot(self, *, by: Operator | None = None) -> RunbookVersion:
        """The current version; a new one first when the stored head differs from it."""
        with transaction.atomic():
            head = Runbook.objects.select_for_update(of=("self",)).select_related("current_version").get(pk=self.pk)
            current = head.current_version
            if current is not None and current.content() == head.content():
                self.current_version = current
                return current
            last = head.versions.order_by("-number").values_list("number", flat=True).first() or 0
            version = RunbookVersion.objects.create(runbook=head, number=last + 1, created_by=by, **head.content())
            Runbook.objects.filter(pk=self.pk).update(current_version=version)
        self.current_version = version
        return version

    @property
    def is_stale(self) -> bool:
        return self.review_by is not None and self.review_by < timezone.localdate()

    @property
    def stale_owner_told(self) -> bool:
        """Its owner has been notified of this review date (by the sweep's ``tell_owner_stale``)."""
        return self.owner_id is not None and self.review_by is not None and self.stale_notified_for == self.review_by

    @classmethod
    def announce_stale(cls, today: datetime.date | None = None) -> int:
        """Tell the owner of each runbook past its review date, once per review date (the sweep calls it)."""
        return sum(
            runbook.tell_owner_stale() for runbook in cls.objects.stale_unannounced(today).select_related("owner")
        )

    def tell_owner_stale(self) -> bool:
        """One in-console notification (and its channels) for this review date; False if it was sent already."""
        from .notifications import Notification

        if self.owner is None or self.review_by is None:
            return False
        with transaction.atomic():
            # Compare-and-set on the date: two sweeps at once write one notification between them.
            won = (
                Runbook.objects.filter(pk=self.pk, review_by=self.review_by)
                .exclude(stale_notified_for=self.review_by)
                .update(stale_notified_for=self.review_by)
            )
            if won:
                Notification.send(
                    kind=Notification.Kind.RUNBOOK_STALE,
                    users=[self.owner],
                    title=f"Runbook “{self.title}” is past its review date ({self.review_by:%d %b %Y})",
                    body="Checkpoints that use it show it as stale until it is reviewed: read it, fix what is out "
                    "of date and set the next review date.",
                    path=self.get_absolute_url(),
                    key=f"runbook-stale:{self.pk}:{self.review_by.isoformat()}",
                )
        return bool(won)

    @property
    def specificity(self) -> int:
        """How many match rules it sets: the more, the more specific."""
        return bool(self.workflow_kind) + bool(self.reason) + bool(self.agent_id)

    def _rank(self) -> tuple[int, int, int, int, str]:
        # Most specific first; the admin's priority breaks ties; then agent > kind > reason (as runbooks
        # matched before priorities existed); the slug keeps the choice stable. The default comes last.
        weight = 4 * bool(self.agent_id) + 2 * bool(self.workflow_kind) + bool(self.reason)
        return (int(self.is_default), -self.specificity, -self.priority, -weight, self.slug)

    @classmethod
    def candidates(cls, kind: str, reason: str, agent: Agent | int | None = None) -> list[Runbook]:
        """Every runbook that would take a checkpoint of this kind, reason and agent, the winner first."""
        agent_id = agent if isinstance(agent, int) or agent is None else agent.pk
        agent_rule = Q(agent__isnull=True) | Q(agent_id=agent_id) if agent_id is not None else Q(agent__isnull=True)
        rules = Q(workflow_kind__in=["", kind]) & Q(reason__in=["", reason]) & agent_rule
        found = cls.objects.filter(Q(is_default=True) | (Q(is_default=False) & rules)).select_related(
            "policy", "current_version", "agent"
        )
        return sorted(found, key=Runbook._rank)

    @classmethod
    def match(cls, kind: str, reason: str, agent: Agent | int | None = None) -> Runbook | None:
        """The most specific runbook for kind, reason and agent; priority breaks ties; else the default."""
        found = cls.candidates(kind, reason, agent)
        return found[0] if found else None

    def takes(self, kind: str, reason: str, agent_id: int | None = None) -> bool:
        """Whether its rules take a checkpoint of this kind, reason and agent: ``candidates`` in Python."""
        return self.is_default or (
            self.workflow_kind in ("", kind) and self.reason in ("", reason) and self.agent_id in (None, agent_id)
        )

    @classmethod
    def matcher(cls) -> Callable[[str, str], Runbook | None]:
        """``match(kind, reason)`` for many pairs (readiness asks one per kind and reason seen): every runbook
        read in one query, the same ranking."""
        ranked = sorted(cls.objects.select_related("policy", "current_version", "agent"), key=Runbook._rank)

        def match(kind: str, reason: str) -> Runbook | None:
            return next((runbook for runbook in ranked if runbook.takes(kind, reason)), None)

        return match


class RunbookVersion(RunbookContent):
    """One saved state of a runbook: never changed once written."""

    # No index of its own: it leads one_runbook_version_number.
    runbook = models.ForeignKey(Runbook, on_delete=models.CASCADE, related_name="versions", db_index=False)
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # History outlives what it named: a deleted agent, policy or owner leaves the version readable.
    agent = models.ForeignKey("workflows.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    policy = models.ForeignKey(
        "workflows.SLAPolicy", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    owner = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["runbook", "-number"]
        constraints = [models.UniqueConstraint(fields=["runbook", "number"], name="one_runbook_version_number")]

    def __str__(self) -> str:
        return f"{self.title} (version {self.number})"

    def get_absolute_url(self) -> str:
        return reverse("runbook_version", args=[self.runbook_id, self.number])
