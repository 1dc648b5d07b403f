"""The queue's rows, each rendered once per content and then served from this process's memory.

A queue page is fifty rows of the same template; rendering them was most of the page's time (issue 25). A
row's HTML depends only on what the row reads: the checkpoint's fields, its workflow and agent, the
assignee, the latest assignment, a proposal waiting for approval, whether a decision came back, the times
it shows in words (the countdown, the age) and who looks (their id, whether they may act, the time zone
and language). The key of a row is a digest of exactly that, so a row changes the moment anything it shows
changes, and a row nobody changed costs a dictionary lookup. Two things differ per request and come as
markers put in afterwards: the CSRF token and the page's own path (the forms' ``next``). Rows of drilled
workflows are never kept: whether the drill badge shows depends on the drill's state, read per request.

The store is console/fragments.py's bounded LRU, one per process.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.template.loader import get_template
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from workflows.models import Checkpoint

from .fragments import FragmentCache, digest, fields
from .templatetags.console_tags import business_clock, countdown, short_duration

ROW_TEMPLATE = "console/_queue_row.html"
CSRF_MARK = "\x00csrf\x00"  # never in a template's output: NUL is not HTML text
NEXT_MARK = "\x00next\x00"


CACHE = FragmentCache()


def row_key(c: Checkpoint, *, user_pk: int | None, can_act: bool) -> bytes | None:
    """Everything the row template reads, digested; None for a row that must not be kept (a drill's)."""
    workflow = c.workflow
    if workflow.drill_id is not None:
        return None
    assignments = getattr(c, "assignments", [])
    proposals = getattr(c, "proposals", [])
    a = assignments[0] if assignments else None
    p = proposals[0] if proposals else None
    parts: tuple[object, ...] = (
        user_pk,
        can_act,
        timezone.get_current_timezone_name(),
        translation.get_language(),
        fields(c),
        workflow.title,
        workflow.kind,
        workflow.external_id,
        workflow.agent.name,
        c.assignee.get_username() if c.assignee_id and c.assignee else None,
        (a.pk, str(a.actor), a.data) if a else None,
        (fields(p), p.decided_by.get_username() if p.decided_by_id and p.decided_by else None) if p else None,
        # What moves with time alone, as the row says it.
        countdown(c.due_at) if c.due_at else None,
        short_duration(c.opened_at),
        c.claimed_recently,
        short_duration(p.decided_at) if p else None,
        business_clock(c) if isinstance(c.sla, dict) and c.sla.get("hours") else None,
    )
    return digest(*parts)


def render_rows(request: HttpRequest, checkpoints: Iterable[Checkpoint], *, can_act: bool) -> SafeString:
    """The ``<tr>`` of each checkpoint, in order, with this request's CSRF token and path put in."""
    user = request.user
    template = get_template(ROW_TEMPLATE)
    shared = {
        "can_act": can_act,
        "user": user,
        "request": request,
        "next_path": NEXT_MARK,
        "csrf_token": CSRF_MARK,
        "queue_url": reverse("queue"),
        "incidents_url": reverse("incidents"),
    }
    out = []
    for c in checkpoints:
        key = row_key(c, user_pk=user.pk, can_act=can_act)
        html = CACHE.get(key) if key is not None else None
        if html is None:
            html = template.render({**shared, "c": c})
            if key is not None:
                CACHE.put(key, html)
        out.append(html)
    page = "".join(out)
    if CSRF_MARK in page:
        page = page.replace(CSRF_MARK, escape(get_token(request)))
    if NEXT_MARK in page:
        page = page.replace(NEXT_MARK, escape(request.get_full_path()))
    return mark_safe(page)  # noqa: S308 - rendered by the autoescaping template; the markers' values escaped
