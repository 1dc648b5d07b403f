"""What every model of the domain shares: the transition mechanism and its errors."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

from django.db import models, transaction

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from .agents import Agent
    from .events import Event

    Operator: TypeAlias = User  # settings.AUTH_USER_MODEL: the console's users
    Actor: TypeAlias = User | Agent  # who acts on a row: an operator, an agent (None: the system)


class IllegalTransition(Exception):
    """A status change that the model's transition table does not allow."""


class Refused(Exception):
    """A request the domain refuses, with the ``code`` and ``field`` the API answers with."""

    default_code = "refused"

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.field = code or self.default_code, field
        self.index: int | None = None  # which report of a batch it refused


class Conflict(Refused):
    """The request conflicts with recorded state (the API answers 409)."""

    default_code = "conflict"


class Invalid(Refused, ValueError):
    """A value the domain cannot accept (the API answers 422)."""

    default_code = "invalid_value"


def canonical(value: object) -> object:
    """A value as comparable after a trip through the database.

    jsonb keeps numbers as decimals: 1.5e300 comes back as a 301-digit integer, which Python
    compares exactly with the float and finds different. Compared as floats, a resend of the
    same number is the same number; True stays distinct from 1.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int) and abs(value) > 2**53:
        return float(value)
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a fast hash is enough: nothing to brute force.
    return hashlib.sha256(token.encode()).hexdigest()


class Stateful(models.Model):
    """A model with one ``status`` field and a table of allowed transitions."""

    TRANSITIONS: dict[str, set[str]] = {}

    status: str  # each concrete model declares the field with its own choices

    class Meta:
        abstract = True

    def move(
        self,
        to: str,
        *,
        verb: Event.Verb,
        actor: Actor | None = None,
        data: Mapping[str, object] | None = None,
        from_: Iterable[str] | None = None,
        expect: Mapping[str, object] | None = None,
        at: datetime | None = None,
        **fields: object,
    ) -> bool:
        """The status this instance read -> ``to``, as one compare-and-set ``UPDATE … WHERE``.

        ``from_`` names the statuses this transition starts from (default: the one read), and
        ``expect`` the other fields the caller read and relies on (e.g. ``{"assignee_id": 3}``).
        Returns False whenever the row is not as expected: someone else got there first, or this
        instance was read before they did. Raises IllegalTransition only for an impossible request:
        a move that the transition table allows from none of ``from_``. ``at`` stamps the event
        with the moment it truly happened (a clock deadline the sweep applies late) instead of now.
        """
        current = self.status
        sources = set(from_) if from_ is not None else {current}
        if impossible := sorted(s for s in sources if to not in self.TRANSITIONS.get(s, set())):
            raise IllegalTransition(f"{type(self).__name__} {self.pk}: {', '.join(impossible)} -> {to} is not allowed")
        if current not in sources:
            return False  # read after someone else moved it elsewhere
        from .events import Event  # events refer back to every model

        with transaction.atomic():
            expected = {"pk": self.pk, "status": current, **(expect or {})}
            won = type(self)._default_manager.filter(**expected).update(status=to, **fields)
            if won:
                Event.record(self, verb, actor=actor, at=at, data={"from": current, "to": to, **(data or {})})
        self.refresh_from_db()
        return bool(won)
