"""The client's address, for login lockouts and the agent API's failed-auth limit."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind ``TRUSTED_PROXY_COUNT`` proxies the address the first of them saw."""
    count: int = settings.TRUSTED_PROXY_COUNT
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if count and len(forwarded) >= count:
        return str(forwarded[-count])[:64]  # the entries left of it are whatever the client wrote
    return str(request.META.get("REMOTE_ADDR", ""))[:64]
