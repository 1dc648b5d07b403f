"""Web Push: a notification to a person's phone or desktop, through the push service of their browser.

``pywebpush`` does the protocol: the message is encrypted to the subscription's keys (RFC 8291,
``Content-Encoding: aes128gcm``) and signed with the console's VAPID key (RFC 8292,
``Authorization: vapid t=<JWT>, k=<public key>``, the JWT's ``aud`` the push service's origin,
``exp`` 12 hours ahead, ``sub`` ``VAPID_SUBJECT``), with a ``TTL`` of ``PUSH_TTL_SECONDS``.
The request itself goes out through ``runtime.post``, the console's one door to the network
(a ``requests``-shaped session that pywebpush is given): the endpoint came from a browser, so
it is held to the rules of every delivery (https, no loopback, private or metadata address
unless ``DELIVERY_ALLOWED_NETWORKS`` says so, no redirects, a bounded answer).

``send`` raises ``PushError``: ``gone`` when the push service says the subscription no longer
exists (404 or 410: the notification outbox switches the channel off), ``permanent`` when a
retry cannot help (no VAPID key, a refused key, a message too large), else the outbox retries
with backoff. Without ``VAPID_PRIVATE_KEY`` nothing is sent (``console.checks`` says so).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import requests
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from py_vapid import Vapid
from pywebpush import WebPushException, webpush

from . import runtime
from .models.notifications import PUSH_URL

if TYPE_CHECKING:
    from .models import Channel, Notification

GONE = (404, 410)  # RFC 8030: the subscription expired or was removed by the person
NEVER_BETTER = (400, 401, 403, 413)  # a malformed or oversized message, a VAPID key the service refuses


class PushError(Exception):
    def __init__(
        self, message: str, status_code: int | None = None, *, gone: bool = False, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.gone = gone
        self.permanent = permanent or gone


@functools.cache
def _vapid(private_key: str) -> Vapid:
    return Vapid.from_string(private_key=private_key)


def vapid() -> Vapid | None:
    """The console's VAPID key from ``VAPID_PRIVATE_KEY``; None when it is not set. ValueError when it is not a key."""
    key = str(settings.VAPID_PRIVATE_KEY).strip()
    if not key:
        return None
    try:
        return _vapid(key)
    except Exception as exc:  # py_vapid raises whatever its decoders raise on a mangled key
        raise ValueError(
            f"VAPID_PRIVATE_KEY is not a VAPID private key ({type(exc).__name__}): generate one "
            "with `manage.py vapid_keys`."
        ) from exc


def public_key() -> str:
    """The browser's ``applicationServerKey``: the VAPID public key, base64url (empty when Web Push is off)."""
    try:
        key = vapid()
    except ValueError:
        return ""
    if key is None:
        return ""
    raw = key.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def new_private_key() -> str:
    """A fresh VAPID private key in the form ``VAPID_PRIVATE_KEY`` takes (the raw scalar, base64url)."""
    key = Vapid()
    key.generate_keys()
    number = key.private_key.private_numbers().private_value.to_bytes(32, "big")
    return base64.urlsafe_b64encode(number).rstrip(b"=").decode()


def message(notification: Notification) -> dict[str, str]:
    """What the service worker shows (static/sw.js): the title, a line, and the workbench to open on a tap."""
    checkpoint = notification.checkpoint
    return {
        "title": notification.title[:120],
        "body": notification.body[:240],
        "url": notification.url,
        "tag": f"checkpoint-{checkpoint.pk}" if checkpoint is not None else f"notification-{notification.pk}",
        "kind": notification.kind,
    }


def send(channel: Channel, notification: Notification) -> int:
    """Push ``notification`` to the device of ``channel``; the push service's 2xx status, or PushError."""
    try:
        key = vapid()
    except ValueError as exc:
        raise PushError(str(exc), permanent=True) from exc
    if key is None:
        raise PushError(
            "Web Push is off: VAPID_PRIVATE_KEY is not set (see `manage.py check`), so nothing is pushed.",
            permanent=True,
        )
    subscription = {"endpoint": channel.endpoint, "keys": {"p256dh": channel.p256dh, "auth": channel.auth_secret}}
    urgency = "high" if notification.kind == "escalated" else "normal"
    try:
        answer = webpush(
            subscription,
            json.dumps(message(notification)),
            vapid_private_key=key,
            vapid_claims={"sub": settings.VAPID_SUBJECT},
            content_encoding="aes128gcm",
            ttl=settings.PUSH_TTL_SECONDS,
            headers={"Urgency": urgency},
            timeout=settings.NOTIFY_TIMEOUT_SECONDS,
            requests_session=cast(requests.Session, _Door()),
        )
    except WebPushException as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise _refusal(status, str(exc).split("\n")[0]) from exc
    except runtime.DeliveryError as exc:
        raise PushError(str(exc)) from exc
    return int(cast(requests.Response, answer).status_code)


def _refusal(status: int | None, detail: str) -> PushError:
    if status in GONE:
        return PushError(
            f"The push service answered {status}: the subscription is gone (the device unsubscribed "
            "or it expired); this device is switched off.",
            status,
            gone=True,
        )
    if status in NEVER_BETTER:
        return PushError(
            f"The push service refused the message ({detail}); sending it again cannot help.", status, permanent=True
        )
    return PushError(f"The push service did not take the message ({detail}).", status)


class _Door:
    """What pywebpush calls ``requests_session``: its one ``post``, sent through ``runtime.post`` and
    answered as a ``requests.Response`` (redirects are never followed: a 3xx is an answer like any other)."""

    def post(
        self,
        url: str,
        *,
        data: bytes | None = None,
        headers: Mapping[str, str | bytes] | None = None,
        timeout: float | None = None,
        **_: object,
    ) -> requests.Response:
        sent = {str(k): str(v) for k, v in dict(headers or {}).items()}
        answer = runtime.post(
            url,
            data or b"",
            sent,
            allow_plain_http=False,
            timeout=timeout,
            max_bytes=16 * 1024,
            what="the push service",
            **PUSH_URL,
        )
        response = requests.Response()
        response.status_code, response.url, response._content = answer.status, url, answer.body
        response.headers.update(answer.headers)
        response.reason = ""
        return response
