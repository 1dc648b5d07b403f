"""Deployment checks of our own (``manage.py check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

PER_PROCESS_CACHES = ("django.core.cache.backends.locmem.LocMemCache", "django.core.cache.backends.dummy.DummyCache")


def shared_cache(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The API's rate limits count in the cache: a per-process one multiplies them by the worker count."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend in PER_PROCESS_CACHES:
        return [checks.Warning(
            "The default cache is per process, so the agent API's rate limits are per process too.",
            hint="Set CACHE_URL to Redis (redis://host:6379/1) for any deployment with several web processes.",
            id="console.W001")]
    return []


def register() -> None:
    checks.register(shared_cache, checks.Tags.security, deploy=True)
