"""The htmx plumbing every page view shares: the page or its targeted partial, messages as a toast, and
the post/redirect/get back to where an action was taken.

One view serves a page and its htmx partials: a partial's name equals the DOM id it replaces, so an htmx
request renders ``template#<HX-Target>``. Actions redirect back (post/redirect/get); htmx follows the
redirect and swaps the partial its form targets, and Django messages travel in an ``HX-Trigger`` header
that static/console.js turns into a toast.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails


def _render(
    request: HttpRequest,
    template: str,
    context: Mapping[str, object],
    *,
    partials: tuple[str, ...] = (),
    status: int = 200,
) -> HttpResponse:
    """The page, or for htmx the partial named like the element the request targets."""
    htmx = _htmx(request)
    partial = htmx.target if htmx and not htmx.history_restore_request and htmx.target in partials else None
    if partial:
        template += "#" + partial
    response = render(request, template, context, status=status)
    if partial:
        items = [{"level": m.level_tag, "text": str(m)} for m in messages.get_messages(request)]
        if items:  # ASCII JSON: header-safe, and the toast sets it as text, never as HTML
            response["HX-Trigger"] = json.dumps({"console:messages": {"items": items}})
    return response


def _htmx(request: HttpRequest) -> HtmxDetails | None:
    """django-htmx's details of the request (falsy for a plain one); None without its middleware."""
    htmx: HtmxDetails | None = getattr(request, "htmx", None)
    return htmx


def _back(request: HttpRequest, default: str) -> HttpResponseRedirect:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        target = default
    return redirect(target)
