"""Presentation helpers. Everything here returns plain strings: agent text
stays untrusted and the template's autoescaping does the escaping.

This is the one library the templates load (``{% load console_tags %}``). The filters with a job of their
own live beside it and are registered here under their old names: comments as markdown
(console/markdown.py), stored values in words (console/labels.py), audit entries as sentences
(console/event_text.py) and the resume state in plain language (console/resume_summary.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django import template
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from workflows.identifiers import is_mixed_script, scripts
from workflows.models import Checkpoint, Comment, Drill, Event, Workflow
from workflows.models.sla import in_minutes
from workflows.shapes import Json

from ..event_text import event_text
from ..labels import confirmation, label
from ..markdown import render_markdown
from ..resume_summary import amounts, resume_summary

if TYPE_CHECKING:
    from workflows.metrics import Filters
    from workflows.models.base import Operator

register = template.Library()

register.filter("markdown", render_markdown)
register.filter("label", label)
register.filter("confirmation", confirmation)
register.filter("event_text", event_text)
register.filter("amounts", amounts)
register.simple_tag(resume_summary, name="resume_summary")

MAX_JSON_CHARS = 20_000


# --- JSON an agent sent, on display -----------------------------------------------------------


@register.filter
def pretty_json(value: Json) -> str:
    """Agent data as indented JSON, never marked safe: ``<pre>{{ x|pretty_json }}</pre>`` escapes it."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… truncated ({len(text) - MAX_JSON_CHARS} more characters)"
    return text


@register.filter
def json_preview(value: Json, width: int = 90) -> str:
    """One line of compact JSON for a collapsed input or output; the full text is behind an expand."""
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


@register.filter
def entries(mapping: Json) -> list[tuple[str, Json]]:
    """``dict.items()`` that an agent cannot shadow: ``{{ d.items }}`` looks up the key "items" first."""
    return list(mapping.items()) if isinstance(mapping, dict) else []


@register.filter
def get_item(mapping: object, key: str | int) -> object:
    """``mapping[key]`` for a key the template holds in a variable (a slug, a number): any dict a view passed
    or agent JSON, so it narrows first; nothing for a missing key or a non-dict."""
    return mapping.get(key) if isinstance(mapping, dict) else None


# --- time ----------------------------------------------------------------------------------------


@register.filter
def short_duration(value: datetime | timedelta | None) -> str:
    """'42s', '7m', '2h 05m', '3d 4h': an age (datetime in the past) or a length."""
    if value is None:
        return ""
    delta = timezone.now() - value if isinstance(value, datetime) else value
    seconds = abs(int(delta.total_seconds()))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


@register.filter
def iso(value: datetime | None) -> str:
    """``|date:'c'`` without Django's format machinery: the queue renders two per row."""
    return timezone.localtime(value).isoformat() if value else ""


@register.filter
def when(value: datetime | str | None) -> str:
    """A moment as the pages write one ("Dec 1 12:44:05", local time), also one stored as ISO text in JSON."""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text
    if not isinstance(value, datetime):
        return ""
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_current_timezone())
    return timezone.localtime(value).strftime("%b %-d %H:%M:%S")


@register.filter
def stamp(value: datetime | None) -> str:
    """``|date:'Y-m-d H:i:s'``, as cheaply."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else ""


@register.filter
def business_clock(checkpoint: Checkpoint) -> str:
    """Business time left (or over) and the local due time, for a checkpoint whose policy has a calendar.

    Round the clock this says nothing: the ticking countdown is already business time there.
    """
    terms = checkpoint.terms
    if terms.hours is None or not checkpoint.clock_runs:
        return ""
    now = timezone.now()
    left = terms.left(now, checkpoint.due_at)
    local = checkpoint.due_at.astimezone(terms.hours.zone)
    text = f"{short_duration(left)} business time {'left' if left.total_seconds() >= 0 else 'over'}"
    text += f" · due {local:%a %d %b %H:%M} {terms.hours.tz}"
    return text + (" · paused outside business hours" if terms.is_paused(now) else "")


@register.filter
def minutes(seconds: float | None) -> str:
    """A frozen SLA duration (seconds) as '45 min' or '2 h'."""
    return in_minutes(seconds or 0)


@register.filter
def countdown(due: datetime) -> str:
    """The server's first rendering of the SLA countdown; static/console.js ticks it."""
    left = due - timezone.now()
    text = short_duration(left)
    return f"{text} over" if left.total_seconds() < 0 else f"{text} left"


@register.filter
def seconds_text(value: float | None) -> str:
    return "—" if value is None else short_duration(timedelta(seconds=value))


# --- identifiers, people and the TPM pages -------------------------------------------------------


@register.filter
def script_marker(identifier: str | None) -> str:
    """A visible warning after an id that mixes scripts (a Cyrillic "о" among Latin letters looks identical)."""
    text = str(identifier or "")
    if not is_mixed_script(text):
        return ""
    names = " + ".join(sorted(s.title() for s in scripts(text)))
    return format_html(
        '<span class="badge mixed-script" data-testid="mixed-script" title="This id mixes '
        '{} letters: it may imitate another id that looks the same.">mixed scripts</span>',
        names,
    )


@register.filter
def can_review(user: Operator | AnonymousUser) -> bool:
    """TPMs and admins: the resume dashboard, readiness and staffing links."""
    from console.roles import can_review as allowed

    return allowed(user)


@register.filter
def is_admin(user: Operator | AnonymousUser) -> bool:
    """Admins: the runbook editor and the Django admin."""
    from console.roles import is_admin as allowed

    return allowed(user)


@register.filter
def assignee_for(checkpoint: Checkpoint, user: Operator | AnonymousUser) -> str:
    """Who holds a checkpoint, as the signed-in user reads it: "you" for their own, else the name."""
    if checkpoint.assignee_id is None:
        return ""
    if checkpoint.assignee_id == user.pk:
        return "you"
    return str(checkpoint.assignee.get_username()) if checkpoint.assignee else ""


@register.filter
def split(value: str) -> list[str]:
    return str(value).split()


@register.filter
def minus(value: int, other: int) -> int:
    return value - other


@register.filter
def filters_query(filters: Filters) -> str:
    """A metrics.Filters as the query string of the TPM pages."""
    from urllib.parse import urlencode

    return urlencode(filters.as_query())


@register.inclusion_tag("console/_drill_badge.html", takes_context=True)
def drill_badge(
    context: template.Context, workflow: Workflow, checkpoint: Checkpoint | None = None
) -> dict[str, Drill | None]:
    """The drill badge of a drilled workflow (issue 26): TPMs and admins always see it; operators when the
    drill is announced, or once the checkpoint (on a workflow page: any of its checkpoints) is decided."""
    drill = workflow.drill
    if drill is None:
        return {"drill": None}
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"drill": drill if Drill.known_to(user, workflow, checkpoint) else None}


@register.simple_tag
def event_rows(
    events: Iterable[Event] | None, comments: Mapping[int, Comment] | None = None, link_checkpoints: bool = False
) -> SafeString:
    """The event log's rows, each rendered once per content (console/event_rows.py)."""
    from ..event_rows import render_event_rows

    return render_event_rows(events or [], comments if isinstance(comments, dict) else None, bool(link_checkpoints))
