"""Keys most rows leave empty (a checkpoint's breach reason, a decision's approver, a step event's checkpoint):
declared ``null=True, blank=True, db_index=False`` and indexed where set by ``where_set`` in their model's Meta.

A full index takes an entry for each null on every insert and every update that is not HOT; a lookup or a
cascade asks for one value, which implies ``IS NOT NULL``, so the partial index serves it (issue 25;
tests/test_indexes_earn_their_writes.py holds the rule and checks the plans).
"""

from __future__ import annotations

from django.db import models


def where_set(prefix: str, *fields: str, names: dict[str, str] | None = None) -> list[models.Index]:
    """A partial index ``<prefix>_by_<field> (field) WHERE field IS NOT NULL`` for each key (or the name given)."""
    return [
        models.Index(
            fields=[field],
            condition=models.Q(**{f"{field}__isnull": False}),
            name=(names or {}).get(field, f"{prefix}_by_{field}"),
        )
        for field in fields
    ]
