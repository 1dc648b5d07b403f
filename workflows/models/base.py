"""What every model of the domain shares: the transition mechanism and its errors."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.db import models, transaction

if TYPE_CHECKING:
    from .events import Event


class IllegalTransition(Exception):
    """A status change that the model's transition table does not allow."""


class Conflict(Exception):
    """The request conflicts with recorded state (the API answers 409)."""


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a fast hash is enough: nothing to brute force.
    return hashlib.sha256(token.encode()).hexdigest()


class Stateful(models.Model):
    """A model with one ``status`` field and a table of allowed transitions."""

    TRANSITIONS: dict[str, set[str]] = {}

    class Meta:
        abstract = True

    def move(self, to: str, *, verb: Event.Verb, actor: Any = None, data: dict | None = None,
             **fields: Any) -> bool:
        """Current status -> ``to``. False when the row changed under us first."""
        current = self.status
        if to not in self.TRANSITIONS.get(current, set()):
            raise IllegalTransition(f"{type(self).__name__} {self.pk}: {current} -> {to} is not allowed")
        from .events import Event  # noqa: F811  events refer back to every model

        with transaction.atomic():
            won = type(self).objects.filter(pk=self.pk, status=current).update(status=to, **fields)
            if won:
                Event.record(self, verb, actor=actor, data={"from": current, "to": to, **(data or {})})
        self.refresh_from_db()
        return bool(won)
