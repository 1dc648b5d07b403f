"""The workbench's trajectory steps, each rendered once per content (console/fragments.py).

A step's ``<li>`` reads the step's own fields, whether the workflow stopped at it and the demo ledgers'
address; nothing in it moves with time or differs per operator. Its key digests exactly those, so a step
rendered once (its input and output pretty-printed once) is served from memory on every later render and
every poll, and a step that changed (an unknown outcome resolved) is rendered again.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.template.loader import get_template
from django.utils import translation
from django.utils.safestring import SafeString, mark_safe

from workflows.models import Step

from .fragments import FragmentCache, digest, fields

STEP_TEMPLATE = "console/_step.html"  # the one rendering of a step, as the workflow page draws it
CACHE = FragmentCache()


def render_steps(steps: Iterable[Step], *, stop_seq: int | None) -> SafeString:
    """The ``<li>`` of each step, in order."""
    ledgers = settings.DEMO_LEDGERS_URL
    template = get_template(STEP_TEMPLATE)
    language = translation.get_language()
    out = []
    for step in steps:
        key = digest(fields(step), step.seq == stop_seq, ledgers, language)
        html = CACHE.get(key)
        if html is None:
            html = template.render(
                {"step": step, "stop": stop_seq, "paused": True, "ledgers": True, "demo_ledgers_url": ledgers}
            )
            CACHE.put(key, html)
        out.append(html)
    return mark_safe("".join(out))  # noqa: S308 - each rendered by the autoescaping template
