"""Template context for every page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest


def demo(request: HttpRequest) -> dict[str, Any]:
    """The demo ledgers' address under ``make run`` (empty otherwise): the nav and each effect link to it."""
    return {"demo_ledgers_url": settings.DEMO_LEDGERS_URL}


def broker(request: HttpRequest) -> dict[str, Any]:
    """A banner on every full page while the broker refuses messages: one primary-key read, made only when a
    template asks (base.html does; the polled partials do not)."""
    from django.utils.functional import SimpleLazyObject, lazy

    from workflows.models import BrokerStatus, Decision

    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def waiting() -> int:
        return Decision.objects.filter(status=Decision.Status.QUEUED).count()

    return {"broker_failing": SimpleLazyObject(BrokerStatus.failing), "decisions_waiting": lazy(waiting, int)()}
