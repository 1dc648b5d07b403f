"""What an operator says happened to an effect whose outcome the agent could not know, and the references
that prove it. Read by a decision (models/decisions.py) and by a bulk confirmation against a provider's
evidence (models/evidence.py)."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import models


class Confirmation(models.TextChoices):
    """What an operator says happened to an effect whose outcome the agent could not know."""

    HAPPENED = "happened", "Happened"
    DID_NOT_HAPPEN = "did_not_happen", "Did not happen"

    @property
    def needs_reference(self) -> bool:
        """An effect confirmed as happened names the external reference the operator saw."""
        return self is Confirmation.HAPPENED

    @classmethod
    def unreferenced(cls, confirmations: Mapping[str, str], refs: Mapping[str, str]) -> list[str]:
        """The keys confirmed as happened without the external reference that proves it."""
        return [
            key
            for key, value in confirmations.items()
            if value in cls.values and cls(value).needs_reference and not str(refs.get(key) or "").strip()
        ]

    @classmethod
    def references(cls, confirmations: Mapping[str, str], refs: Mapping[str, str]) -> dict[str, str]:
        """The references worth keeping: one for each effect confirmed as happened."""
        return {
            key: str(refs[key]).strip()
            for key, value in confirmations.items()
            if value in cls.values and cls(value).needs_reference and str(refs.get(key) or "").strip()
        }
