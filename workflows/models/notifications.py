"""Notifications: the in-console list, and the outbox of deliveries to email and webhooks.

A notification is written in the same transaction as the clock event that
caused it (a warning, a breach, an escalation level, a reminder, a release),
with a unique ``key`` so a repeat of that event cannot write it twice. Each
active channel of its recipient (a user, or a group for a shared channel such
as a Slack webhook) gets a ``Delivery`` row: the outbox. ``tasks.relay_notifications``
hands due rows to Celery; ``tasks.deliver_notification`` sends one, records the
attempt and schedules the next with backoff. No I/O happens in the sweep, so a
failing channel never holds up the clocks or another channel.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from ..clock import database_now
from .events import Event

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


class Channel(models.Model):
    """Where a user or a group is told: an email address, a webhook (optionally Slack-shaped), or one
    device's Web Push subscription (``workflows/push.py``; made by the person from the notifications page)."""

    class Kind(models.TextChoices):
        EMAIL = "email", "Email"
        WEBHOOK = "webhook", "Webhook"
        PUSH = "push", "Web Push (a device)"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    user = models.ForeignKey(User, null=True, blank=True, on_delete=models.CASCADE, related_name="channels")
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="channels")
    address = models.EmailField(blank=True, help_text="Email: empty uses the user's own address.")
    url = models.URLField(blank=True, help_text="Webhook: receives a JSON POST for every notification.")
    slack = models.BooleanField(default=False, help_text='Send Slack\'s incoming-webhook shape ({"text": …}).')
    allow_plain_http = models.BooleanField(
        default=False,
        help_text="Webhook: allow an http:// URL where https is required (a receiver on a trusted "
        "network). Private addresses follow DELIVERY_ALLOWED_NETWORKS, as for agents.",
    )
    # Web Push: the browser's PushSubscription (its endpoint at the push service, and the keys the
    # message is encrypted to), and a name for the device the person recognises.
    endpoint = models.URLField(max_length=2000, blank=True, help_text="Web Push: the push service's endpoint.")
    p256dh = models.CharField(max_length=200, blank=True, help_text="Web Push: the subscription's public key.")
    auth_secret = models.CharField(max_length=100, blank=True, help_text="Web Push: the subscription's auth secret.")
    device = models.CharField(max_length=200, blank=True, help_text="Web Push: which device (as the browser said).")
    is_active = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False) ^ Q(group__isnull=False), name="channel_belongs_to_a_user_or_a_group"
            ),
            # A device's subscription is one person's: subscribing again (even as another user) takes the row over.
            models.UniqueConstraint(
                fields=["endpoint"], condition=Q(kind="push"), name="one_channel_per_push_endpoint"
            ),
            models.CheckConstraint(
                condition=~Q(kind="push") | (Q(user__isnull=False) & ~Q(endpoint="")),
                name="push_channel_is_a_users_device",
            ),
        ]

    def __str__(self) -> str:
        # The constraint gives a channel exactly one owner: a user, or else a group.
        owner = self.user.get_username() if self.user is not None else f"group {self.group.name if self.group else '?'}"
        return f"{self.get_kind_display()} for {owner}"

    def clean(self) -> None:

        if self.kind == self.Kind.WEBHOOK and not self.url:
            raise ValidationError({"url": "A webhook needs a URL."})
        if self.kind == self.Kind.WEBHOOK:
            from ..notify import WEBHOOK_URL
            from ..runtime import check_url  # the runtime module imports the models

            try:
                check_url(self.url, allow_plain_http=self.allow_plain_http, **WEBHOOK_URL)
            except ValidationError as exc:
                raise ValidationError({"url": exc.messages}) from None
        if self.kind == self.Kind.PUSH and (
            self.user is None or not (self.endpoint and self.p256dh and self.auth_secret)
        ):
            raise ValidationError(
                "A Web Push channel is one person's device: subscribe from the notifications page on that device."
            )
        if self.kind == self.Kind.EMAIL and not self.address and not (self.user is not None and self.user.email):
            raise ValidationError({"address": "Give an address, or set one on the user."})

    @property
    def email_address(self) -> str:
        return self.address or (self.user.email if self.user is not None else "")

    @property
    def push_service(self) -> str:
        """The push service's host (a Web Push channel): which vendor carries this device's notifications."""
        return urlsplit(self.endpoint).hostname or ""

    @classmethod
    def subscribe(cls, user: Operator, *, endpoint: str, p256dh: str, auth: str, device: str = "") -> Channel:
        """This device's Web Push subscription is ``user``'s: made, or taken over (one row per endpoint: a
        browser signed in as someone else now belongs to them), switched on, and audited. ValidationError
        with a readable reason when the console could never push to it."""
        check_subscription(endpoint, p256dh, auth)
        with transaction.atomic():
            held = cls.objects.select_for_update().filter(kind=cls.Kind.PUSH, endpoint=endpoint).first()
            # The same browser signed in as someone else sends the same subscription, keys and all. An endpoint
            # sent with other keys is not that browser: taking it would silence its owner's device.
            same = held is not None and (
                secrets.compare_digest(held.p256dh, p256dh) and secrets.compare_digest(held.auth_secret, auth)
            )
            if held is not None and held.user_id != user.pk and held.is_active and not same:
                raise ValidationError(
                    "This push subscription is another person's device. Turn notifications off and on again "
                    "in this browser to make a subscription of your own."
                )
            channel, created = cls.objects.update_or_create(
                kind=cls.Kind.PUSH,
                endpoint=endpoint,
                defaults={
                    "user": user,
                    "group": None,
                    "p256dh": p256dh,
                    "auth_secret": auth,
                    "device": device.strip()[:200],
                    "is_active": True,
                },
            )
            Event.record(
                None,
                Event.Verb.PUSH_SUBSCRIBED,
                actor=user,
                data={"device": channel.device, "service": urlsplit(endpoint).hostname or "", "new": created},
            )
        return channel

    def unsubscribe(self, *, by: Operator | None = None, why: str = "") -> bool:
        """Switch this device off (its owner, an admin, or the push service saying it is gone: ``by`` None);
        False when it was off already. The row stays, with its deliveries and attempts."""
        with transaction.atomic():
            won = Channel.objects.filter(pk=self.pk, kind=self.Kind.PUSH, is_active=True).update(is_active=False)
            if won:
                Event.record(
                    None,
                    Event.Verb.PUSH_UNSUBSCRIBED,
                    actor=by,
                    data={
                        "device": self.device,
                        "owner": self.user.get_username() if self.user else "",
                        "why": why[:300],
                    },
                )
        self.refresh_from_db()
        return bool(won)


# How a Web Push endpoint is named in the delivery rules' reasons (workflows/push.py sends to it).
PUSH_URL = {"noun": "push endpoint", "owner": "push service (set DELIVERY_ALLOWED_NETWORKS)"}


def check_subscription(endpoint: str, p256dh: str, auth: str) -> None:
    """A push subscription as a browser's ``PushSubscription.toJSON()`` gives it, or ValidationError saying what
    is wrong: an endpoint deliveries may go to (``runtime``'s rules), a P-256 public key, a 16-byte secret."""

    from ..runtime import check_url  # the runtime module imports the models

    if not endpoint or len(endpoint) > 2000:
        raise ValidationError("The subscription has no endpoint, or one longer than 2000 characters.")
    check_url(endpoint, noun=PUSH_URL["noun"], owner=PUSH_URL["owner"])
    try:
        point = _unb64(p256dh)
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        secret = _unb64(auth)
    except (ValueError, TypeError):
        raise ValidationError(
            "The subscription's keys are not a P-256 public key and an auth secret (base64url)."
        ) from None
    if len(point) != 65 or len(secret) != 16:
        raise ValidationError("The subscription's keys have the wrong length (65 and 16 bytes expected).")


def _unb64(text: str) -> bytes:
    if not isinstance(text, str) or not text or len(text) > 200:
        raise ValueError("not a key")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class NotificationQuerySet(models.QuerySet["Notification"]):
    def unread(self) -> NotificationQuerySet:
        return self.filter(read_at__isnull=True)

    def for_user(self, user: Operator) -> NotificationQuerySet:
        return self.filter(recipient=user)


class Notification(models.Model):
    class Kind(models.TextChoices):
        CLAIM_WARNING = "claim_warning", "Claim warning"
        CLAIM_BREACHED = "claim_breached", "Claim target breached"
        SLA_WARNING = "sla_warning", "Decision warning"
        SLA_BREACHED = "sla_breached", "Decision target breached"
        ESCALATED = "escalated", "Escalated"
        ASSIGNED = "assigned", "Assigned to you"
        CLAIM_REMINDER = "claim_reminder", "Claim reminder"
        CLAIM_RELEASED = "claim_released", "Claim released"
        RUNBOOK_STALE = "runbook_stale", "Runbook past its review date"
        MENTIONED = "mentioned", "Mentioned in a comment"
        HANDED_OFF = "handed_off", "Handed off to you"
        INCIDENT_OPENED = "incident_opened", "Incident opened"
        ROLLOUT_HALTED = "rollout_halted", "Rollout halted"
        APPROVAL_WAITING = "approval_waiting", "Waiting for your approval"

    # No index of its own: it leads notification_unread.
    recipient = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications", db_index=False
    )
    group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="For a group's shared channels; not listed in anyone's bell.",
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    checkpoint = models.ForeignKey(
        "workflows.Checkpoint", null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    path = models.CharField(max_length=300, blank=True, help_text="Console path the notification links to.")
    at = models.DateTimeField(default=timezone.now, help_text="When the event happened (its true time).")
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)
    key = models.CharField(max_length=200, unique=True, help_text="One notification per event and recipient.")

    objects = NotificationQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["recipient", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return self.title

    @property
    def url(self) -> str:
        console: str = settings.CONSOLE_URL
        return console.rstrip("/") + self.path if self.path else console

    @classmethod
    def send(
        cls,
        *,
        kind: str,
        title: str,
        body: str = "",
        checkpoint: Checkpoint | None = None,
        at: datetime | None = None,
        users: Iterable[Operator | None] = (),
        group: Group | None = None,
        key: str,
        path: str = "",
        now: datetime | None = None,
        team: bool = False,
    ) -> list[Notification]:
        """Write one notification per recipient, and a delivery per active channel (must run in a transaction).

        It links to the checkpoint's workbench, or to ``path`` when it is about something else. ``at``:
        when what it tells happened; ``now``: when it is written and its deliveries may first go out
        (the caller's clock, the database's for the SLA sweep; by default this process's). ``team``: the
        checkpoint's team hears it too, on its channels (those of its watchers group), once."""
        now = now or timezone.now()
        from django.urls import reverse

        path = reverse("workbench", args=[checkpoint.pk]) if checkpoint is not None else path
        made = []
        recipients: list[tuple[str, int, dict[str, object]]] = [
            ("u", u.pk, {"recipient": u}) for u in dict.fromkeys(u for u in users if u is not None)
        ]
        groups = [group] if group is not None else []
        if team and checkpoint is not None and checkpoint.team_id is not None:
            watchers = (
                type(checkpoint).objects.filter(pk=checkpoint.pk).values_list("team__watchers", flat=True).first()
            )
            groups += [g for g in Group.objects.filter(pk=watchers) if g not in groups] if watchers is not None else []
        recipients += [("g", g.pk, {"group": g}) for g in groups]
        for tag, pk, who in recipients:
            note, created = cls.objects.get_or_create(
                key=f"{key}:{tag}{pk}",
                defaults={
                    "kind": kind,
                    "title": title[:300],
                    "body": body,
                    "checkpoint": checkpoint,
                    "path": path,
                    "at": at or now,
                    "created_at": now,
                    **who,
                },
            )
            if created:
                note.queue_deliveries(now)
                made.append(note)
        return made

    def queue_deliveries(self, now: datetime | None = None) -> None:
        channels = Channel.objects.filter(is_active=True).filter(
            Q(user_id=self.recipient_id) if self.recipient_id else Q(group_id=self.group_id)
        )
        if self.kind not in PUSHED:  # the phone buzzes only for what asks this person to act now
            channels = channels.exclude(kind=Channel.Kind.PUSH)
        first = now or timezone.now()
        Delivery.objects.bulk_create([Delivery(notification=self, channel=c, next_attempt_at=first) for c in channels])
        if channels:
            transaction.on_commit(_wake_relay)

    def mark_read(self) -> bool:
        return bool(Notification.objects.filter(pk=self.pk, read_at__isnull=True).update(read_at=timezone.now()))


# What Web Push sends to a person's devices: a checkpoint given to them (assigned, escalated to them and
# reassigned, handed off), an escalation naming them, a four-eyes proposal waiting for their approval.
PUSHED = frozenset(
    {
        Notification.Kind.ASSIGNED,
        Notification.Kind.HANDED_OFF,
        Notification.Kind.ESCALATED,
        Notification.Kind.APPROVAL_WAITING,
    }
)


def _wake_relay() -> None:
    from .relay import wake_relay

    wake_relay()


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def dispatchable(self, now: datetime | None = None) -> DeliveryQuerySet:
        return self.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now or database_now())


class Delivery(models.Model):
    """One notification on one channel: the outbox row, retried with backoff until sent or failed."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    # No index of its own: it leads one_delivery_per_channel.
    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["notification", "channel"], name="one_delivery_per_channel")]
        indexes = [models.Index(fields=["next_attempt_at"], condition=Q(status="pending"), name="notification_outbox")]

    def __str__(self) -> str:
        return f"{self.notification} via {self.channel}"

    def start_attempt(self) -> bool:
        """Take the row for one attempt under a lease; False when another worker holds it or it is done.

        The lease is taken and judged on the database's clock (``workflows.clock``), never this
        process's: a worker whose clock runs ahead must not see another worker's live lease expired."""
        now = database_now()
        lease = now + timedelta(seconds=settings.NOTIFY_TIMEOUT_SECONDS * 3)
        won = (
            Delivery.objects.filter(pk=self.pk, status=self.Status.PENDING, attempts=self.attempts)
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
            .update(attempts=models.F("attempts") + 1, lease_expires_at=lease, next_attempt_at=lease)
        )
        self.refresh_from_db()
        return bool(won)

    def record_attempt(
        self, *, ok: bool, detail: str = "", status_code: int | None = None, final: bool = False
    ) -> None:
        """Write the attempt; on failure retry with exponential backoff, after the last one (or a
        ``final`` failure: a message that can never be sent) give up."""
        now = database_now()  # the backoff is judged by the relay, on the database's clock
        with transaction.atomic():
            Attempt.objects.create(
                delivery=self, number=self.attempts, ok=ok, detail=detail[:2000], status_code=status_code, at=now
            )
            if ok:
                fields: dict[str, object] = {"status": self.Status.SENT, "sent_at": now, "last_error": ""}
            elif final or self.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
                fields = {"status": self.Status.FAILED, "last_error": detail[:2000]}
            else:
                backoff = settings.NOTIFY_BACKOFF_SECONDS * 2 ** (self.attempts - 1)
                fields = {"next_attempt_at": now + timedelta(seconds=backoff), "last_error": detail[:2000]}
            Delivery.objects.filter(pk=self.pk, attempts=self.attempts).update(lease_expires_at=None, **fields)
        self.refresh_from_db()


class Attempt(models.Model):
    # No index of its own: it leads one_row_per_attempt.
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log", db_index=False)
    number = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    ok = models.BooleanField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="one_row_per_attempt")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery}: {'ok' if self.ok else 'failed'}"
