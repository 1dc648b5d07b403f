"""Which checkpoint reason an exception stands for.

The console knows ``model_timeout``, ``tool_error``, ``rate_limit``,
``provider_change``, ``untrusted_output``, ``manual`` and ``other``. Exceptions
of other libraries are recognised by shape, not by import, so that this module
needs none of them: a class named ``*Timeout*`` is a timeout, anything carrying
an HTTP status 429 is a rate limit, a ``*ValidationError`` (pydantic and
friends), ``json.JSONDecodeError`` or our own ``InvalidOutput`` is a tool error.
A user's own mapping is consulted first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final, Literal, cast

Reason = Literal["model_timeout", "tool_error", "rate_limit", "provider_change", "untrusted_output", "manual", "other"]
REASONS: Final = ("model_timeout", "tool_error", "rate_limit", "provider_change", "untrusted_output", "manual", "other")
ReasonMap = Mapping[type[BaseException], Reason]

__all__ = ["REASONS", "InvalidOutput", "Reason", "ReasonMap", "reason_for"]


class InvalidOutput(ValueError):
    """A step's output failed its check: the checkpoint reason is ``tool_error``."""


def _status(exc: BaseException) -> object:
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status", "code"):
            value = getattr(holder, name, None)
            if isinstance(value, int):
                return value
    return None


def _named(exc: BaseException, fragment: str) -> bool:
    return any(fragment in cls.__name__ for cls in type(exc).__mro__)


def reason_for(exc: BaseException, mapping: ReasonMap | None = None) -> Reason:
    """The checkpoint reason for ``exc``: the user's mapping first (nearest class wins), then the built-in rules."""
    for cls in type(exc).__mro__:
        if mapping and cls in mapping:
            return mapping[cls]
    own = getattr(exc, "recovery_reason", None)  # an exception that names its reason (drills.GarbageAnswer)
    if isinstance(own, str) and own in REASONS:
        return cast(Reason, own)
    if _status(exc) == 429 or _named(exc, "RateLimit"):
        return "rate_limit"
    if isinstance(exc, TimeoutError) or _named(exc, "Timeout"):
        return "model_timeout"
    if isinstance(exc, InvalidOutput | json.JSONDecodeError) or _named(exc, "ValidationError"):
        return "tool_error"
    return "other"
