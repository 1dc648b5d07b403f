"""How long recovery takes: time to claim, time to decision, interruption to completion.

A duration over a set of rows is a ``Timing`` (how many have both ends, the median and the
90th percentile), computed by the database (PostgreSQL's ordered-set aggregates, a nearest-rank
walk elsewhere) and defined once more over Python values (``Timing.of``), which the tests hold
the SQL to. The periods and filters are ``workflows.metrics``'s, whose docstring defines each
figure in words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.db import NotSupportedError, connection, transaction
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    F,
    FloatField,
    Func,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce

from .filters import Filters, checkpoints_in
from .metrics import COMPLETED, V, degraded
from .models import Checkpoint, Decision, Event

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models import Model
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType
    from django_stubs_ext import WithAnnotations


@dataclass(frozen=True)
class Timing:
    """A duration over a set of rows: how many have both ends, their median and their 90th percentile
    (seconds). The database computes it (``_timing``); ``Timing.of`` is the same definition over
    durations already in Python, which the tests hold the SQL to."""

    label: str
    count: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, label: str, seconds: Iterable[float]) -> Timing:
        values = sorted(seconds)
        return cls(label, len(values), median(values), percentile(values, 90))


def median(values: list[float]) -> float | None:
    """The middle value; of an even count, halfway between the two middle ones, as ``lo + (hi - lo) * 0.5``
    (PostgreSQL's ``percentile_cont(0.5)`` to the last bit, where ``(lo + hi) / 2`` may differ in it)."""
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    return _halfway(ordered[(n - 1) // 2], ordered[n // 2])


def _halfway(lo: float, hi: float) -> float:
    return lo + 0.5 * (hi - lo)  # float8_lerp in PostgreSQL's orderedsetaggs.c


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile: the smallest value with ``pct`` % of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[_nearest_rank(len(ordered), pct) - 1]


def _nearest_rank(n: int, pct: float) -> int:
    # The same float arithmetic as percentile_disc: ceil(fraction * n), at least the first row.
    return max(1, math.ceil(pct / 100 * n))


class Clocks(TypedDict):
    """What ``with_clocks`` annotates a checkpoint with: its first claim (or assignment) and first decision."""

    claimed_first_at: datetime | None
    first_decided_at: datetime | None


class Seconds(Func):
    """``end - start`` in seconds (PostgreSQL): ``EXTRACT(EPOCH …)`` is exact, its cast to float rounds like
    ``timedelta.total_seconds()``, so the database orders and interpolates the values Python would."""

    output_field = FloatField()

    def __init__(self, end: F, start: F) -> None:
        super().__init__(end, start)

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: object,
    ) -> _AsSqlType:
        raise NotSupportedError("Seconds is PostgreSQL's; other databases order the durations themselves.")

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: object) -> _AsSqlType:
        (end, end_params), (start, start_params) = (compiler.compile(e) for e in self.source_expressions)
        return f"EXTRACT(EPOCH FROM ({end} - {start}))::double precision", (*end_params, *start_params)


class _OrderedSet(Aggregate):
    """``function(fraction) WITHIN GROUP (ORDER BY expression)``: an ordered-set aggregate of PostgreSQL,
    over the rows where the expression is not null."""

    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float) -> None:
        super().__init__(expression, fraction=repr(float(fraction)))


class PercentileCont(_OrderedSet):
    function = "percentile_cont"  # interpolated: the median of an even count is halfway between the middle two


class PercentileDisc(_OrderedSet):
    function = "percentile_disc"  # the first value at or past the fraction: the nearest rank


def _timing(label: str, qs: QuerySet[Model], start: str, end: str) -> Timing:
    """``end - start`` over the rows of ``qs`` that have both, computed where the rows are: a million
    checkpoints never travel to Python for a median."""
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                # The planner prices the fallback subqueries (rows from before the stamps) as if each row ran
                # them, which wakes the JIT compiler: at 80k rows compiling took 0.75 s of a 1.2 s query, the
                # sort itself 0.2 s. This transaction's queries are small: no JIT for them.
                cursor.execute("SET LOCAL jit = off")
            row = qs.annotate(timing_seconds=Seconds(F(end), F(start))).aggregate(
                n=Count("timing_seconds"),
                median=PercentileCont("timing_seconds", 0.5),
                p90=PercentileDisc("timing_seconds", 0.9),
            )
        return Timing(label, row["n"], row["median"], row["p90"])
    return _timing_by_rank(label, qs, start, end)


def _timing_by_rank(label: str, qs: QuerySet[Model], start: str, end: str) -> Timing:
    """Elsewhere (SQLite): count, then read only the middle row or two and the p90 row, in the order of
    the durations. The database sorts; Python interpolates exactly as ``median`` does."""
    durations = (
        qs.annotate(timing=F(end) - F(start))
        .filter(timing__isnull=False)
        .order_by("timing")
        .values_list("timing", flat=True)
    )
    n = durations.count()
    if not n:
        return Timing(label, 0, None, None)
    middle = [d.total_seconds() for d in durations[(n - 1) // 2 : n // 2 + 1]]
    rank = _nearest_rank(n, 90)
    [p90] = [d.total_seconds() for d in durations[rank - 1 : rank]]
    return Timing(label, n, _halfway(middle[0], middle[-1]), p90)


def opened_checkpoints(filters: Filters) -> QuerySet[Checkpoint]:
    return checkpoints_in(filters).filter(opened_at__gte=filters.since, opened_at__lt=filters.until)


def with_clocks(qs: QuerySet[Checkpoint]) -> QuerySet[WithAnnotations[Checkpoint, Clocks]]:
    """Checkpoints annotated with their first claim (or assignment) and their first decision."""
    first_claim = Event.objects.filter(checkpoint=OuterRef("pk"), verb__in=[V.CLAIMED, V.ASSIGNED]).order_by("at")
    first_decision = Decision.objects.filter(checkpoint=OuterRef("pk")).order_by("decided_at")
    annotated: QuerySet[WithAnnotations[Checkpoint, Clocks]] = qs.annotate(
        # The checkpoint stamps its first claim (first_claimed_at); rows from before it did: the events.
        claimed_first_at=Coalesce(
            "first_claimed_at", Subquery(first_claim.values("at")[:1]), output_field=DateTimeField()
        ),
        # Likewise its first decision (first_decision_at); rows from before it did, or loaded in bulk: the decisions.
        first_decided_at=Coalesce(
            "first_decision_at", Subquery(first_decision.values("decided_at")[:1]), output_field=DateTimeField()
        ),
    )
    return annotated


def time_to_claim(filters: Filters) -> Timing:
    return _timing("Time to claim", with_clocks(opened_checkpoints(filters)), "opened_at", "claimed_first_at")


def time_to_decision(filters: Filters) -> Timing:
    return _timing("Time to decision", with_clocks(opened_checkpoints(filters)), "opened_at", "first_decided_at")


def interruption_to_completion(filters: Filters) -> Timing:
    return _timing("Interruption to completion", degraded(filters).filter(COMPLETED), "interrupted_at", "finished_at")
