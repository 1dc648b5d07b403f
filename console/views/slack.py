"""Slack's two doors into the console: the interactivity endpoint, and the page that links a Slack user.

The endpoint is public (Slack is not signed in) and trusts nothing before Slack's request
signature checks out with a connected workspace's signing secret, and the request is at most
five minutes old (``slack_sdk.signature.SignatureVerifier``): a forged or replayed request
is refused with 403 before its body is even parsed.
"""

from __future__ import annotations

import json
from typing import Any

from django.core import signing
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST
from slack_sdk.signature import SignatureVerifier

from workflows.models import Event, SlackLink, SlackWorkspace
from workflows.slack import interactions, people

from ..roles import READERS, public, role_required, signed_in

SIGNATURE_WINDOW_SECONDS = 300  # slack_sdk's SignatureVerifier accepts a timestamp this old at most


def verified_workspace(request: HttpRequest) -> SlackWorkspace | None:
    """The connected workspace whose signing secret signed this request (five minutes at most), or None."""
    body = request.body.decode("utf-8", errors="replace")
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not timestamp.isdigit() or not signature:
        return None
    for workspace in SlackWorkspace.objects.filter(is_active=True):
        if SignatureVerifier(workspace.signing_secret).is_valid(body, timestamp, signature):
            # Once only: a signed request replayed within its five minutes is refused (Slack never resends
            # one with the same signature; its retries are signed anew).
            seen = f"slack-request:{workspace.pk}:{timestamp}:{signature}"
            return workspace if cache.add(seen, True, timeout=SIGNATURE_WINDOW_SECONDS + 60) else None
    return None


@csrf_exempt  # Slack cannot send a CSRF token: its request signature stands in for it
@public
@require_POST
def interactivity(request: HttpRequest) -> HttpResponse:
    workspace = verified_workspace(request)
    if workspace is None:
        return HttpResponse(
            "Not signed by a connected Slack workspace, or older than five minutes.",
            status=403,
            content_type="text/plain",
        )
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError:
        return HttpResponse("The payload is not JSON.", status=400, content_type="text/plain")
    if not isinstance(payload, dict) or (payload.get("team") or {}).get("id") != workspace.team_id:
        return HttpResponse("The payload is not from this workspace.", status=400, content_type="text/plain")
    answer = interactions.handle(workspace, payload)
    return JsonResponse(answer) if answer is not None else HttpResponse(status=200)


@role_required(*READERS)
@require_http_methods(["GET", "POST"])
def slack_link(request: HttpRequest, token: str) -> HttpResponse:
    """A one-time link from Slack: GET asks "is this Slack user you?", POST (signed in) says yes."""
    try:
        data = interactions.read_link(token)
        workspace = SlackWorkspace.objects.get(pk=data["w"], is_active=True)
    except (signing.BadSignature, SlackWorkspace.DoesNotExist):
        return _link_page(
            request,
            status=400,
            error="This link is not valid or has expired: press a button in Slack again for a new one.",
        )
    context: dict[str, Any] = {"workspace": workspace, "slack_user_id": data["u"]}
    if request.method == "GET":
        # Whose Slack account this is, as Slack says: a link someone else pressed for and sent you names them.
        context["slack_name"], context["slack_email"] = people.who(workspace, data["u"])
        return _link_page(request, **context)
    user = signed_in(request)
    try:
        with transaction.atomic():
            link = SlackLink.objects.create(workspace=workspace, slack_user_id=data["u"], user=user, nonce=data["n"])
            Event.record(
                None,
                Event.Verb.SLACK_LINKED,
                actor=user,
                data={"workspace": workspace.team_id, "slack_user": data["u"]},
            )
    except IntegrityError:
        return _link_page(
            request,
            status=409,
            error="This link was used already, or that Slack user is linked to an account already.",
            **context,
        )
    return _link_page(request, linked=link, **context)


def _link_page(request: HttpRequest, *, status: int = 200, **context: object) -> HttpResponse:
    return render(request, "console/slack_link.html", context, status=status)
