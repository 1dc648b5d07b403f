"""The resume dashboard's figures over time (a day's or a week's buckets) and by dimension (agent, kind,
reason, runbook, team): the shares of ``workflows.metrics``, counted per bucket or per value in one query each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate, TruncWeek

from .filters import DIMENSIONS, Filters, checkpoints_in
from .metrics import FIGURES, GRANULARITIES, Share, degraded, launched, resumes, share_counts


def buckets(filters: Filters, granularity: str) -> list[date]:
    """The first day of every bucket in the period (weeks start on Monday)."""
    first = filters.start if granularity == "day" else filters.start - timedelta(days=filters.start.weekday())
    step = timedelta(days=1 if granularity == "day" else 7)
    days, current = [], first
    while current <= filters.end:
        days.append(current)
        current += step
    return days


def _trunc(granularity: str, name: str) -> TruncDate | TruncWeek:
    return (TruncDate if granularity == "day" else TruncWeek)(name, tzinfo=UTC)


def _as_day(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value


@dataclass
class Series:
    buckets: list[date]
    granularity: str
    launches: list[int] = field(default_factory=list)
    resumes: list[int] = field(default_factory=list)
    degraded: list[int] = field(default_factory=list)
    shares: dict[str, list[float | None]] = field(default_factory=dict)


def series(filters: Filters, granularity: str = "day") -> Series:
    """Launches, resumes, degraded workflows and the four shares per bucket (of first interruption)."""
    if granularity not in GRANULARITIES:
        raise ValueError(granularity)
    days = buckets(filters, granularity)
    index = {d: i for i, d in enumerate(days)}
    out = Series(
        days,
        granularity,
        [0] * len(days),
        [0] * len(days),
        [0] * len(days),
        {slug: [None] * len(days) for slug in FIGURES},
    )

    def place(rows: Iterable[tuple[date | datetime, int]], target: list[int]) -> None:
        for bucket, n in rows:
            i = index.get(_as_day(bucket))
            if i is not None:
                target[i] += n

    place(
        launched(filters)
        .annotate(bucket=_trunc(granularity, "created_at"))
        .values("bucket")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("bucket", "n"),
        out.launches,
    )
    place(
        resumes(filters)
        .annotate(bucket=_trunc(granularity, "finished_at"))
        .values("bucket")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("bucket", "n"),
        out.resumes,
    )
    aggregates: dict[str, Count] = {"n": Count("pk")}
    for slug, figure in FIGURES.items():
        aggregates[f"n:{slug}:met"] = Count("pk", filter=figure.denominator & figure.numerator)
        aggregates[f"n:{slug}:whole"] = Count("pk", filter=figure.denominator) if figure.denominator else Count("pk")
    rows = (
        degraded(filters)
        .annotate(bucket=_trunc(granularity, "interrupted_at"))
        .values("bucket")
        .annotate(**aggregates)
        .order_by()
    )
    for row in rows:
        i = index.get(_as_day(row["bucket"]))
        if i is None:
            continue
        out.degraded[i] += row["n"]
        for slug in FIGURES:
            whole = row[f"n:{slug}:whole"]
            out.shares[slug][i] = row[f"n:{slug}:met"] / whole if whole else None
    return out


def _dimension_values(filters: Filters, dimension: str) -> list[str]:
    if dimension == "agent":
        return list(degraded(filters).values_list("agent__name", flat=True).distinct().order_by("agent__name"))
    if dimension == "kind":
        return list(degraded(filters).values_list("kind", flat=True).distinct().order_by("kind"))
    column = {"reason": "reason", "runbook": "runbook__slug", "team": "team__slug"}[dimension]
    interrupted = degraded(filters).values("pk")
    values = checkpoints_in(filters).filter(workflow__in=interrupted).values_list(column, flat=True)
    return sorted({v or "" for v in values.distinct().order_by()})


@dataclass(frozen=True)
class BreakdownRow:
    value: str
    filters: Filters
    degraded: int
    shares: dict[str, Share]


def breakdown(filters: Filters, dimension: str) -> list[BreakdownRow]:
    """The four shares per agent, kind, reason, runbook or team (a workflow counts under each reason it paused
    for, and each team that held one of its checkpoints)."""
    if dimension not in DIMENSIONS:
        raise ValueError(dimension)
    rows = []
    for value in _dimension_values(filters, dimension):
        if dimension in ("runbook", "team") and not value:
            continue  # no runbook matched, or routed to no team: nothing to filter on
        narrowed = filters.only(**{dimension: value})
        counts = share_counts(degraded(narrowed))
        rows.append(
            BreakdownRow(
                value,
                narrowed,
                counts["degraded"],
                {
                    slug: Share(slug, f.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], f.definition)
                    for slug, f in FIGURES.items()
                },
            )
        )
    return sorted(rows, key=lambda r: (-r.degraded, r.value))
