"""The event log's rows (workbench and workflow page), each rendered once per content (console/fragments.py).

An event never changes (the trail is append-only); its row reads the event, who did it, its comment's text
and mentions when it is one, whether rows link their checkpoint, and the time zone and language the time
is shown in. The key digests exactly those: a row rendered once is served from memory on every later render.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.template.loader import get_template
from django.utils import timezone, translation
from django.utils.safestring import SafeString, mark_safe

from workflows.models import Comment, Event

from .fragments import FragmentCache, digest, fields

ROW_TEMPLATE = "console/_event_row.html"
CACHE = FragmentCache()


def render_event_rows(
    events: Iterable[Event], comments: Mapping[int, Comment] | None, link_checkpoints: bool
) -> SafeString:
    template = get_template(ROW_TEMPLATE)
    zone, language = timezone.get_current_timezone_name(), translation.get_language()
    out = []
    for event in events:
        comment = None
        if comments and event.verb == Event.Verb.COMMENTED and isinstance(event.data, dict):
            pk = event.data.get("comment")
            comment = comments.get(pk) if isinstance(pk, int) else None
        key = digest(
            fields(event),
            event.actor,
            bool(link_checkpoints),
            zone,
            language,
            (comment.pk, comment.body, list(comment.mentions or [])) if comment is not None else None,
        )
        html = CACHE.get(key)
        if html is None:
            html = template.render({"event": event, "comment": comment, "link_checkpoints": link_checkpoints})
            CACHE.put(key, html)
        out.append(html)
    return mark_safe("".join(out))  # noqa: S308 - each rendered by the autoescaping template
