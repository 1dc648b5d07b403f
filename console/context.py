"""Template context for every page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest


def demo(request: HttpRequest) -> dict[str, Any]:
    """The demo ledgers' address under ``make run`` (empty otherwise): the nav and each effect link to it."""
    return {"demo_ledgers_url": settings.DEMO_LEDGERS_URL}
