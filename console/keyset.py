"""The one keyset pager: pages of rows ordered by a datetime column, ties broken by the primary key.

A page starts after (or ends before) the row its cursor names, so page 2,000 costs what page 1
costs: an index walk that stops after one page, never an OFFSET. The cursor is
``<microseconds since the epoch>.<pk>``: integers only, so no float rounds a timestamp into the
row next to it. A cursor that does not parse is no cursor (the first page): a stale or edited
link still renders. The queue pages by ``due_at`` (soonest first), the breach review by
``breached_at`` (newest first).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from django.db.models import Model, Q, QuerySet

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_M = TypeVar("_M", bound=Model)


@dataclass(frozen=True)
class Page(Generic[_M]):
    rows: list[_M]
    has_prev: bool
    has_next: bool


@dataclass(frozen=True)
class KeysetPager:
    """Pages by (``field``, pk), ascending, or newest first when ``descending``."""

    field: str
    descending: bool = False

    def cursor(self, row: Model) -> str:
        """The cursor that names ``row``; ValueError when it has no value to page by."""
        value = getattr(row, self.field)
        if value is None:
            raise ValueError(f"{type(row).__name__} {row.pk} has no {self.field}: it has no place in these pages.")
        return f"{(value - EPOCH) // timedelta(microseconds=1)}.{row.pk}"

    @staticmethod
    def parse(value: str | None) -> tuple[datetime, int] | None:
        """The (value, pk) a cursor names; None when it names none."""
        try:
            micros, pk = (int(part) for part in (value or "").split("."))
            return EPOCH + timedelta(microseconds=micros), pk
        except (ValueError, OverflowError):
            return None

    def _beyond(self, queryset: QuerySet[_M], key: tuple[datetime, int], *, later: bool) -> QuerySet[_M]:
        """The rows strictly beyond ``key`` (after it when ``later``, else before it), by value then pk."""
        stamp, pk = key
        f, op = self.field, "gt" if later else "lt"
        return queryset.filter(Q(**{f"{f}__{op}": stamp}) | Q(**{f: stamp, f"pk__{op}": pk}), **{f"{f}__{op}e": stamp})

    def _ordered(self, queryset: QuerySet[_M], *, reverse: bool) -> QuerySet[_M]:
        down = self.descending != reverse
        return queryset.order_by(*(f"-{name}" if down else name for name in (self.field, "pk")))

    def page(
        self, queryset: QuerySet[_M], *, size: int, after: str | None = None, before: str | None = None
    ) -> Page[_M]:
        """The ``size`` rows after the ``after`` cursor (in the pager's order), or those before ``before``;
        the first page when neither names a row."""
        end, start = self.parse(before), self.parse(after)
        if end:
            rows = list(self._ordered(self._beyond(queryset, end, later=self.descending), reverse=True)[: size + 1])
            return Page(rows[:size][::-1], has_prev=len(rows) > size, has_next=True)
        if start:
            queryset = self._beyond(queryset, start, later=not self.descending)
        rows = list(self._ordered(queryset, reverse=False)[: size + 1])
        return Page(rows[:size], has_prev=bool(start), has_next=len(rows) > size)
