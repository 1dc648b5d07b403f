"""The only module that sends notifications out: email through Django's backend, webhooks over HTTP,
Web Push to a person's devices (``workflows/push.py``).

Webhooks go through ``runtime.post``, under the same rules as deliveries to agents
(README, "Delivery safety"): no redirects, no proxies, resolve-check-connect, and
private or metadata addresses refused where deliveries refuse them.

``send`` raises ``NotifyError`` with a readable reason on any failure; the
caller records the attempt and schedules the retry, unless the error is
``permanent`` (a message that can never be sent, whatever the retry): then the
delivery ends failed at once.

Every email subject is built by ``subject_line``: titles quote agent text (a
workflow's title), and a line break in a header makes Django refuse the message.
"""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.core.mail import EmailMessage

from . import push, runtime
from .models import Channel, Delivery, Notification
from .models.action_links import links_for
from .shapes import JsonObject

WEBHOOK_URL = {"noun": "webhook URL", "owner": "channel (a receiver on a trusted network)"}


class NotifyError(Exception):
    def __init__(self, message: str, status_code: int | None = None, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.permanent = permanent  # retrying cannot help: the delivery ends failed now


# Line breaks and every other control character, Unicode's line and paragraph separators included.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
SUBJECT_MAX_CHARS = 200


def subject_line(text: str) -> str:
    """An email subject from (agent) text: one line, control characters collapsed, length bounded."""
    line = " ".join(_CONTROL.sub(" ", f"[Recovery Console] {text}").split())
    return line if len(line) <= SUBJECT_MAX_CHARS else line[: SUBJECT_MAX_CHARS - 1] + "…"


def payload(notification: Notification, *, slack: bool) -> JsonObject:
    """What a webhook receives: the console's own shape, or Slack's incoming-webhook shape."""
    checkpoint = notification.checkpoint
    if slack:
        # Slack's mrkdwn treats <, > and & as markup: escape them, since titles quote agent text.
        def esc(text: str) -> str:
            return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

        return {
            "text": f"*{esc(notification.title)}*\n{esc(notification.body)}\n<{notification.url}|Open in the console>",
            "unfurl_links": False,
        }
    return {
        "event": notification.kind,
        "title": notification.title,
        "text": notification.body,
        "url": notification.url,
        "at": notification.at.isoformat(),
        "checkpoint_id": str(checkpoint.pk) if checkpoint else None,
        "workflow_id": str(checkpoint.workflow_id) if checkpoint else None,
        "notification_id": str(notification.pk),
    }


def send(delivery: Delivery) -> int | None:
    channel, notification = delivery.channel, delivery.notification
    if channel.kind == Channel.Kind.EMAIL:
        _email(channel, notification)
        return None  # an email has no status code to record
    if channel.kind == Channel.Kind.PUSH:
        return _push(channel, notification)
    return _webhook(channel, notification, delivery)


def _push(channel: Channel, notification: Notification) -> int:
    if not channel.is_active:
        raise NotifyError("This device was switched off before the notification went out.", permanent=True)
    try:
        return push.send(channel, notification)
    except push.PushError as exc:
        if exc.gone:  # the person unsubscribed in the browser, or the subscription expired: never try it again
            channel.unsubscribe(why=f"the push service answered {exc.status_code}")
        raise NotifyError(str(exc), exc.status_code, permanent=exc.permanent) from exc


def _email(channel: Channel, notification: Notification) -> None:
    address = channel.email_address
    if not address:
        raise NotifyError("The channel has no email address.")
    body = f"{notification.body}\n\nOpen it in the console: {notification.url}\n"
    # Signed, single-use, expiring links for the recipient only (a group's address gets none).
    for label, url in links_for(notification.checkpoint, channel.user):
        body += f"{label}: {url}\n"
    try:
        EmailMessage(
            subject=subject_line(notification.title), body=body, from_email=settings.DEFAULT_FROM_EMAIL, to=[address]
        ).send()
    except ValueError as exc:  # BadHeaderError, an address Django cannot encode: the same on every retry
        raise NotifyError(
            f"Email to {address!r} can never be sent: {type(exc).__name__}: {exc}", permanent=True
        ) from exc
    except Exception as exc:  # smtplib, socket and backend errors all mean "try again later"
        raise NotifyError(f"Email to {address} failed: {type(exc).__name__}: {exc}") from exc


def _webhook(channel: Channel, notification: Notification, delivery: Delivery) -> int:
    body = json.dumps(payload(notification, slack=channel.slack)).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "recovery-console/1",
        "X-Recovery-Notification": f"{notification.pk}:{delivery.pk}",
    }
    try:
        answer = runtime.post(
            channel.url,
            body,
            headers,
            allow_plain_http=channel.allow_plain_http,
            timeout=settings.NOTIFY_TIMEOUT_SECONDS,
            max_bytes=64 * 1024,
            what="the webhook",
            **WEBHOOK_URL,
        )
    except runtime.DeliveryError as exc:
        raise NotifyError(str(exc)) from exc
    if 300 <= answer.status < 400:
        location = answer.headers.get("Location", "(no Location)")[:200]
        raise NotifyError(
            f"The webhook answered {answer.status} redirecting to {location}; notifications never "
            "follow redirects. Fix the channel's URL.",
            answer.status,
        )
    if not 200 <= answer.status < 300:
        raise NotifyError(f"The webhook answered {answer.status}.", answer.status)
    return answer.status
