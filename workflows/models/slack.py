"""Slack: the connected workspace, where each checkpoint is posted, who is who, and the messages.

A ``SlackMessage`` is a *view* of a checkpoint (or of a four-eyes proposal, in the checkpoint
message's thread) and its own outbox row: every event about the checkpoint bumps ``version``
in the transaction that records it (``workflows.slack.outbox``), and a worker renders the
checkpoint as it is *then* and posts or edits the message (``chat.postMessage`` /
``chat.update``) until ``sent_version`` catches up. Nothing of Slack runs inside a
transaction of the domain: a Slack outage delays the view, never a clock or a decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from ..clock import database_now
from ..sealing import Sealed

if TYPE_CHECKING:
    from .checkpoints import Checkpoint
    from .decisions import Decision

User = settings.AUTH_USER_MODEL


class SlackWorkspace(models.Model):
    """A Slack workspace the console posts to, with its bot token and signing secret sealed at rest."""

    team_id = models.CharField(max_length=32, unique=True, help_text="Slack's team id (T…).")
    name = models.CharField(max_length=200)
    # Encrypted at rest (workflows/sealing.py); read and set them through ``bot_token`` and ``signing_secret``.
    sealed_bot_token = models.CharField(max_length=600, editable=False, blank=True)
    sealed_signing_secret = models.CharField(max_length=600, editable=False, blank=True)
    bot_token = Sealed("sealed_bot_token")
    signing_secret = Sealed("sealed_signing_secret")
    default_channel = models.CharField(
        max_length=32, blank=True, help_text="Channel id (C…) for checkpoints no route names; empty: none."
    )
    is_active = models.BooleanField(default=True)
    connected_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} ({self.team_id})"

    @classmethod
    def connected(cls) -> SlackWorkspace | None:
        return cls.objects.filter(is_active=True).order_by("pk").first()

    def channel_for(self, checkpoint: Checkpoint) -> str:
        """Where the checkpoint is posted: its runbook's route, else its team's channel, else its SLA policy's
        route, else the workspace's default.

        Most specific first: a runbook names this kind of failure (and may want its own specialists' room); a
        team is who owns the checkpoint, and its channel is where those people are; an SLA policy is about
        time, shared by several teams, so its route is a fallback for checkpoints no team claims a room for."""
        routes = {(r.runbook_id, r.policy_id): r.channel_id for r in self.routes.all()}
        by_runbook = {rb: c for (rb, _), c in routes.items() if rb is not None}
        by_policy = {p: c for (_, p), c in routes.items() if p is not None}
        team = (
            type(checkpoint).objects.filter(pk=checkpoint.pk).values_list("team__slack_channel", flat=True).first()
            if checkpoint.team_id
            else None
        )
        return (
            (by_runbook.get(checkpoint.runbook_id) if checkpoint.runbook_id else None)
            or team
            or (by_policy.get(checkpoint.policy_id) if checkpoint.policy_id else None)
            or self.default_channel
        )


class SlackRoute(models.Model):
    """An admin's choice of Slack channel for the checkpoints of one runbook or one SLA policy."""

    # No index of its own: it leads one_slack_route_per_runbook and _per_policy.
    workspace = models.ForeignKey(SlackWorkspace, on_delete=models.CASCADE, related_name="routes", db_index=False)
    channel_id = models.CharField(max_length=32, help_text="Channel id (C…); invite the bot to it.")
    runbook = models.ForeignKey("workflows.Runbook", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    policy = models.ForeignKey("workflows.SLAPolicy", null=True, blank=True, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(runbook__isnull=False) ^ Q(policy__isnull=False),
                name="slack_route_names_a_runbook_or_a_policy",
            ),
            models.UniqueConstraint(fields=["workspace", "runbook"], name="one_slack_route_per_runbook"),
            models.UniqueConstraint(fields=["workspace", "policy"], name="one_slack_route_per_policy"),
        ]

    def __str__(self) -> str:
        return f"{self.runbook or self.policy} → {self.channel_id}"


class SlackLink(models.Model):
    """A Slack user is this console user: confirmed by the person, signed in, from a one-time link; or
    matched by the email address Slack says the person verified (``workflows/slack/people.py``)."""

    class How(models.TextChoices):
        LINK = "link", "One-time link confirmed by the person"
        VERIFIED_EMAIL = "verified_email", "Email address verified by Slack"

    # No index of its own: it leads one_console_user_per_slack_user.
    workspace = models.ForeignKey(SlackWorkspace, on_delete=models.CASCADE, related_name="links", db_index=False)
    slack_user_id = models.CharField(max_length=32)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="slack_links")
    linked_at = models.DateTimeField(default=timezone.now)
    nonce = models.CharField(
        max_length=64,
        unique=True,
        help_text="The one-time link that made it (used once); for a verified email, a random value.",
    )
    how = models.CharField(max_length=16, choices=How.choices, default=How.LINK)
    email = models.EmailField(blank=True, help_text="The verified address it was matched by.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slack_user_id"], name="one_console_user_per_slack_user")
        ]

    def __str__(self) -> str:
        return f"{self.slack_user_id} is {self.user}"


class SlackMessageQuerySet(models.QuerySet["SlackMessage"]):
    def dispatchable(self, now: datetime | None = None) -> SlackMessageQuerySet:
        """Behind their checkpoint (a change not shown yet) and due for an attempt."""
        return self.filter(version__gt=F("sent_version"), next_attempt_at__lte=now or database_now())


class SlackMessage(models.Model):
    """One Slack message showing a checkpoint (``decision`` empty) or a four-eyes proposal in its thread."""

    workspace = models.ForeignKey(SlackWorkspace, on_delete=models.CASCADE, related_name="messages")
    checkpoint = models.ForeignKey("workflows.Checkpoint", on_delete=models.CASCADE, related_name="slack_messages")
    decision = models.ForeignKey(
        "workflows.Decision",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="slack_messages",
        help_text="A proposal, posted in the thread.",
    )
    channel_id = models.CharField(max_length=32)
    ts = models.CharField(max_length=32, blank=True, help_text="Slack's id of the message once posted.")
    version = models.PositiveIntegerField(default=1, help_text="Bumped by every change of the checkpoint.")
    sent_version = models.PositiveIntegerField(default=0, help_text="The version Slack shows.")
    next_attempt_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0, help_text="Failed attempts since the last success.")
    last_error = models.TextField(blank=True)

    objects = SlackMessageQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint"], condition=Q(decision__isnull=True), name="one_slack_message_per_checkpoint"
            ),
            models.UniqueConstraint(
                fields=["decision"], condition=Q(decision__isnull=False), name="one_slack_message_per_proposal"
            ),
        ]
        indexes = [models.Index(fields=["next_attempt_at"], name="slack_outbox")]

    def __str__(self) -> str:
        return f"Slack message of checkpoint {self.checkpoint_id}" + (
            f" (proposal {self.decision_id})" if self.decision_id else ""
        )

    @property
    def is_behind(self) -> bool:
        return self.version > self.sent_version

    def start_attempt(self) -> int | None:
        """Take the row for one attempt under a lease: the version it will show, or None (held, or caught up)."""
        now = database_now()
        lease = now + timedelta(seconds=settings.SLACK_TIMEOUT_SECONDS * 3)
        won = (
            SlackMessage.objects.filter(pk=self.pk, version__gt=F("sent_version"))
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
            .update(lease_expires_at=lease)
        )
        self.refresh_from_db()
        return self.version if won else None

    def record_sent(self, version: int, *, ts: str) -> None:
        """Slack shows ``version``; a change made meanwhile is due at once."""
        SlackMessage.objects.filter(pk=self.pk).update(
            ts=ts,
            sent_version=Greatest(F("sent_version"), version),
            lease_expires_at=None,
            failures=0,
            last_error="",
            next_attempt_at=database_now(),
        )
        self.refresh_from_db()

    def record_failure(self, error: str, *, retry_after: float | None = None) -> None:
        """Try again later: after Slack's ``Retry-After`` when it gave one, else with exponential backoff.

        Never given up: the message is a view, and a view catches up when Slack comes back."""
        self.refresh_from_db()
        backoff = settings.SLACK_BACKOFF_SECONDS * 2 ** min(self.failures, 16)
        delay = retry_after if retry_after is not None else min(backoff, settings.SLACK_MAX_BACKOFF_SECONDS)
        SlackMessage.objects.filter(pk=self.pk).update(
            failures=F("failures") + 1,
            last_error=error[:2000],
            lease_expires_at=None,
            next_attempt_at=database_now() + timedelta(seconds=delay),
        )
        self.refresh_from_db()

    @classmethod
    def post_for(cls, checkpoint: Checkpoint, *, decision: Decision | None = None) -> SlackMessage | None:
        """The message (or thread reply) that will show ``checkpoint``; None when Slack is not connected
        or no channel is picked for it."""
        workspace = SlackWorkspace.connected()
        channel = workspace.channel_for(checkpoint) if workspace is not None else ""
        if workspace is None or not channel:
            return None
        message, _ = cls.objects.get_or_create(
            checkpoint=checkpoint, decision=decision, defaults={"workspace": workspace, "channel_id": channel}
        )
        return message

    @classmethod
    def touch_many(cls, checkpoint_ids: Iterable[int]) -> list[int]:
        """``touch`` for many checkpoints in one statement (a second reads the touched ids, only if any was)."""
        showing = cls.objects.filter(checkpoint_id__in=list(checkpoint_ids))
        if not showing.update(version=F("version") + 1, next_attempt_at=timezone.now()):
            return []
        return list(showing.values_list("pk", flat=True))

    @classmethod
    def touch(cls, checkpoint_id: int) -> int:
        """The checkpoint changed: every message showing it is behind, due now."""
        return cls.objects.filter(checkpoint_id=checkpoint_id).update(
            version=F("version") + 1, next_attempt_at=timezone.now()
        )
