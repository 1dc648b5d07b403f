"""Deployment checks of our own (``manage.py check --deploy``)."""

from __future__ import annotations

from collections.abc import Sequence

from django.apps import AppConfig
from django.conf import settings
from django.core import checks

PER_PROCESS_CACHES = ("django.core.cache.backends.locmem.LocMemCache", "django.core.cache.backends.dummy.DummyCache")


def shared_cache(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[checks.CheckMessage]:
    """The API's rate limits count in the cache: a per-process one multiplies them by the worker count."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend in PER_PROCESS_CACHES:
        return [
            checks.Warning(
                "The default cache is per process, so the agent API's rate limits are per process too.",
                hint="Set CACHE_URL to Redis (redis://host:6379/1) for any deployment with several web processes.",
                id="console.W001",
            )
        ]
    return []


def single_sign_on(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[checks.CheckMessage]:
    """A single sign-on configuration that cannot work is an error at start, not at someone's sign-in."""
    from workflows.directory import parse_mapping

    if not settings.OIDC_RP_CLIENT_ID:
        return []
    errors: list[checks.CheckMessage] = [
        checks.Error(f"Single sign-on needs {name} (OIDC_RP_CLIENT_ID is set).", id="console.E002")
        for name in (
            "OIDC_RP_CLIENT_SECRET",
            "OIDC_OP_ISSUER",
            "OIDC_OP_AUTHORIZATION_ENDPOINT",
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
        )
        if not getattr(settings, name)
    ]
    try:
        parse_mapping(settings.OIDC_GROUP_MAP)
    except ValueError as exc:
        errors.append(checks.Error(str(exc), id="console.E003"))
    return errors


def web_push_key(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[checks.CheckMessage]:
    """A VAPID key or subject that cannot work is an error at start, not at the first push."""
    from workflows import push

    try:
        push.vapid()
    except ValueError as exc:
        return [checks.Error(str(exc), id="console.E004")]
    if settings.VAPID_PRIVATE_KEY and not str(settings.VAPID_SUBJECT).startswith(("mailto:", "https:")):
        return [
            checks.Error(
                "VAPID_SUBJECT must be a mailto: or https: URL (how a push service reaches you).", id="console.E005"
            )
        ]
    return []


def web_push_on(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list[checks.CheckMessage]:
    """A deployment without a VAPID key pushes nothing: ``check --deploy`` says so (information, not a warning:
    Web Push is optional, like single sign-on, and a deployment without it is sound)."""
    if not settings.VAPID_PRIVATE_KEY:
        return [
            checks.Info(
                "Web Push is off: VAPID_PRIVATE_KEY is not set, so no notification is pushed to anyone's devices "
                "(their deliveries fail with this reason) and the notifications page cannot turn devices on.",
                hint="Run `manage.py vapid_keys` once and put its VAPID_PRIVATE_KEY line in the environment; keep it: "
                "a new key orphans every device subscribed with the old one.",
                id="console.I001",
            )
        ]
    return []


def register() -> None:
    checks.register(shared_cache, checks.Tags.security, deploy=True)
    checks.register(single_sign_on, checks.Tags.security)
    checks.register(web_push_key, checks.Tags.security)
    checks.register(web_push_on, checks.Tags.security, deploy=True)
