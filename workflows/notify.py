"""The only module that sends notifications out: email through Django's backend, webhooks over HTTP.

``send`` raises ``NotifyError`` with a readable reason on any failure; the
caller records the attempt and schedules the retry.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage

from .models import Channel, Delivery, Notification


class NotifyError(Exception):
    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def payload(notification: Notification, *, slack: bool) -> dict[str, Any]:
    """What a webhook receives: the console's own shape, or Slack's incoming-webhook shape."""
    checkpoint = notification.checkpoint
    if slack:
        # Slack's mrkdwn treats <, > and & as markup: escape them, since titles quote agent text.
        def esc(text: str) -> str:
            return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

        return {"text": f"*{esc(notification.title)}*\n{esc(notification.body)}\n<{notification.url}|Open in the console>",
                "unfurl_links": False}
    return {"event": notification.kind, "title": notification.title, "text": notification.body,
            "url": notification.url, "at": notification.at.isoformat(),
            "checkpoint_id": str(checkpoint.pk) if checkpoint else None,
            "workflow_id": str(checkpoint.workflow_id) if checkpoint else None,
            "notification_id": str(notification.pk)}


def send(delivery: Delivery) -> int | None:
    channel, notification = delivery.channel, delivery.notification
    if channel.kind == Channel.Kind.EMAIL:
        return _email(channel, notification)
    return _webhook(channel, notification, delivery)


def _email(channel: Channel, notification: Notification) -> None:
    address = channel.email_address
    if not address:
        raise NotifyError("The channel has no email address.")
    body = f"{notification.body}\n\nOpen it in the console: {notification.url}\n"
    try:
        EmailMessage(subject=f"[Recovery Console] {notification.title}"[:250], body=body,
                     from_email=settings.DEFAULT_FROM_EMAIL, to=[address]).send()
    except Exception as exc:  # smtplib, socket and backend errors all mean "try again later"
        raise NotifyError(f"Email to {address} failed: {type(exc).__name__}: {exc}") from exc
    return None


def _webhook(channel: Channel, notification: Notification, delivery: Delivery) -> int:
    body = json.dumps(payload(notification, slack=channel.slack)).encode()
    request = urllib.request.Request(  # noqa: S310 - admins configure webhook URLs
        channel.url, data=body, method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "recovery-console/1",
                 "X-Recovery-Notification": f"{notification.pk}:{delivery.pk}"})
    try:
        with urllib.request.urlopen(request, timeout=settings.NOTIFY_TIMEOUT_SECONDS) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        raise NotifyError(f"The webhook answered {exc.code} {exc.reason}.", exc.code) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        raise NotifyError(f"The webhook could not be reached: {getattr(exc, 'reason', exc)}.") from exc
