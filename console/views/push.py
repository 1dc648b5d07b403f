"""The installable app and Web Push: the manifest, the service worker, and "notifications on this device".

The manifest and the service worker are static files (``static/manifest.webmanifest``,
``static/sw.js``) served from the site's root with their content types: a service worker
controls only the paths under its own URL, so ``/sw.js`` (with ``Service-Worker-Allowed: /``)
may open any workbench when a notification is tapped. Both are public, like the favicon: the
browser fetches them without credentials. The CSP stays strict (``worker-src 'self'``,
``manifest-src 'self'``); the control's code is ``static/push.js``.

A subscription is made by the browser (``PushManager.subscribe`` with the console's VAPID public
key) and sent here as JSON by ``push.js``; ``Channel.subscribe`` checks, stores and audits it.
Turning a device off is a plain form (it works without JavaScript too).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from django.contrib import messages
from django.contrib.staticfiles import finders
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from workflows import push
from workflows.models import Channel

from ..roles import READERS, public, role_required, signed_in

MAX_SUBSCRIPTION_BYTES = 4096


@functools.cache
def _static(name: str) -> bytes:
    path = finders.find(name)
    if not path:
        raise Http404(name)
    return Path(str(path)).read_bytes()


@public
@require_GET
def manifest(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(_static("manifest.webmanifest"), content_type="application/manifest+json")
    response["Cache-Control"] = "public, max-age=3600"
    return response


@public
@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(_static("sw.js"), content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"  # a new version is picked up at the next visit
    return response


@role_required(*READERS)
@require_POST
def subscribe(request: HttpRequest) -> HttpResponse:
    """This device's subscription (``PushSubscription.toJSON()`` and a device name), as JSON: 201, or 400/409
    with the reason in ``error``."""
    if not push.public_key():
        return JsonResponse({"error": "Web Push is off on this console: an admin sets VAPID_PRIVATE_KEY."}, status=409)
    if len(request.body) > MAX_SUBSCRIPTION_BYTES:
        return JsonResponse({"error": "The subscription is too large."}, status=400)
    try:
        data = json.loads(request.body or b"{}")
        keys = data.get("keys") or {}
        fields = {"endpoint": data["endpoint"], "p256dh": keys["p256dh"], "auth": keys["auth"]}
        device = data.get("device") or ""
        if not all(isinstance(v, str) for v in (*fields.values(), device)):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        return JsonResponse(
            {"error": "Send the browser's subscription as JSON: endpoint, keys.p256dh, keys.auth."}, status=400
        )
    try:
        channel = Channel.subscribe(signed_in(request), device=device, **fields)
    except ValidationError as exc:
        return JsonResponse({"error": " ".join(exc.messages)}, status=400)
    return JsonResponse({"id": channel.pk, "device": channel.device}, status=201)


@role_required(*READERS)
@require_POST
def unsubscribe(request: HttpRequest, pk: int) -> HttpResponse:
    """Turn one of my devices off (a form on the notifications page; push.js posts it when the browser
    unsubscribes). Another person's device is not found."""
    user = signed_in(request)
    channel = get_object_or_404(Channel, pk=pk, kind=Channel.Kind.PUSH, user=user)
    if channel.unsubscribe(by=user, why="turned off by its owner"):
        messages.success(request, f"Notifications are off on {channel.device or 'that device'}.")
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"id": channel.pk, "active": channel.is_active})
    return redirect("notifications")
