"""Through which channel a person acts: the console, Slack or an email link.

The domain's methods are the same whatever the channel (claim, draft and record a
decision, approve, reject); a channel only says so around its call::

    with acting_via(Via.SLACK):
        checkpoint.claim(by=user)

Every event recorded meanwhile carries ``"via": "slack"`` in its data (the audit trail
says "via Slack"), and a decision drafted meanwhile records its channel (``Decision.channel``),
from which ``sla_figures.decision_times_by_channel`` measures the channels. A context variable,
not an argument threaded through every method: the methods stay the workbench's own, and
a channel cannot act around them. This module imports nothing of ours (events use it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import models


class Via(models.TextChoices):
    CONSOLE = "console", "Console"
    SLACK = "slack", "Slack"
    EMAIL = "email", "Email link"


_current: ContextVar[str] = ContextVar("recovery_console_via", default=Via.CONSOLE.value)


def current() -> str:
    """The channel of the action in progress (the console unless a channel said otherwise)."""
    return _current.get()


@contextmanager
def acting_via(channel: Via) -> Iterator[None]:
    token = _current.set(channel.value)
    try:
        yield
    finally:
        _current.reset(token)
