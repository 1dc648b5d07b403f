"""Reading the figures of a period: the rolled days from their rows, the rest computed live with the same
code (``Figures`` answers what ``workflows.metrics``, ``trends``, ``timings`` and ``sla_figures`` answer live)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date

from .. import metrics, sla_figures, trends
from ..models import DailyRollup, RollupState, Workflow
from ..models.rollups import ANY
from .cells import compute
from .histograms import TIMING_LABELS, TIMINGS, ApproxTiming
from .rolling import consecutive_runs, days_in, touched_days


@dataclass(frozen=True)
class Row:
    day: date
    agent: str
    kind: str
    reason: str
    runbook: str
    team: str
    counts: dict[str, int]
    timings: dict[str, dict[int, int]]


def live_days(start: date, end: date) -> set[date]:
    """The days of a range the rollups cannot answer: not rolled yet, or touched since the last roll."""
    state = RollupState.objects.first()
    days = set(days_in(start, end))
    if state is None:
        return days
    live = {d for d in days if d > state.last_day}
    return live | (touched_days(state.rolled_since) & days)


def rows(start: date, end: date, *, agent: str = "", kind: str = "", drills: str = "") -> list[Row]:
    """Every rollup row of the range (narrowed to an agent and a kind), rolled or computed live (all of it
    when ``drills`` asks for drilled workflows: the rollups hold production figures only)."""
    live = set(days_in(start, end)) if drills else live_days(start, end)
    stored = DailyRollup.objects.filter(day__gte=start, day__lte=end).exclude(day__in=live)
    if agent:
        stored = stored.filter(agent=agent)
    if kind:
        stored = stored.filter(kind=kind)
    out = [
        Row(
            r.day,
            r.agent,
            r.kind,
            r.reason,
            r.runbook,
            r.team,
            r.counts,
            {name: {int(b): n for b, n in hist.items()} for name, hist in r.timings.items()},
        )
        for r in stored.order_by()
    ]
    for first, last in consecutive_runs(live):
        for (day, a, k, reason, runbook, team), cell in compute(first, last, drills=drills).items():
            if (not agent or a == agent) and (not kind or k == kind):
                out.append(
                    Row(
                        day,
                        a,
                        k,
                        reason,
                        runbook,
                        team,
                        dict(cell.counts),
                        {name: dict(hist) for name, hist in cell.timings.items()},
                    )
                )
    return out


def _share_keys() -> list[str]:
    return [*metrics.SETS, *(f"{slug}:whole" for slug in metrics.FIGURES)]


class Figures:
    """The resume figures of one period and its filters, read from the rollups (``metrics`` answers live)."""

    def __init__(self, filters: metrics.Filters) -> None:
        self.filters = filters
        self.rows = rows(filters.start, filters.end, agent=filters.agent, kind=filters.kind, drills=filters.drills)

    def picked(
        self, *, reason: str | None = None, runbook: str | None = None, team: str | None = None, **where: str
    ) -> Iterator[Row]:
        """Rows of one reason × runbook × team key (the filters' by default), optionally of one agent or kind."""
        reason = reason if reason is not None else (self.filters.reason or ANY)
        runbook = runbook if runbook is not None else (self.filters.runbook or ANY)
        team = team if team is not None else (self.filters.team or ANY)
        for row in self.rows:
            if (
                row.reason == reason
                and row.runbook == runbook
                and row.team == team
                and all(getattr(row, k) == v for k, v in where.items())
            ):
                yield row

    @staticmethod
    def _sum(rows: Iterable[Row]) -> Counter[str]:
        total: Counter[str] = Counter()
        for row in rows:
            total.update(row.counts)
        return total

    def narrowed(self, **dims: str) -> Figures:
        """The same period narrowed to an agent or a kind (in memory) or a reason, runbook or team (by key)."""
        other = Figures.__new__(Figures)
        other.filters = self.filters.only(**dims)
        other.rows = [
            r for r in self.rows if all(getattr(r, d) == v for d, v in dims.items() if d in ("agent", "kind"))
        ]
        return other

    def totals(self, **key: str) -> Counter[str]:
        """Every count summed over the rows of one reason × runbook × team key (the filters' by default)."""
        return self._sum(self.picked(**key))

    def summary(self) -> metrics.Summary:
        counted = self.totals()
        counts = {key: counted[key] for key in _share_keys()}
        shares = {
            slug: metrics.Share(slug, f.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], f.definition)
            for slug, f in metrics.FIGURES.items()
        }
        launches = self.totals(reason=ANY, runbook=ANY, team=ANY)["launches"]  # nor reason, runbook nor team
        return metrics.Summary(self.filters, counts, shares, launches, counted["resumes"])

    def series(self, granularity: str = "day") -> trends.Series:
        if granularity not in metrics.GRANULARITIES:
            raise ValueError(granularity)
        days = trends.buckets(self.filters, granularity)
        out = trends.Series(
            days,
            granularity,
            [0] * len(days),
            [0] * len(days),
            [0] * len(days),
            {slug: [None] * len(days) for slug in metrics.FIGURES},
        )
        per: defaultdict[int, Counter[str]] = defaultdict(Counter)
        for row in self.picked():
            per[(row.day - days[0]).days // (1 if granularity == "day" else 7)].update(row.counts)
        launches: Counter[int] = Counter()
        for row in self.picked(reason=ANY, runbook=ANY, team=ANY):
            launches[(row.day - days[0]).days // (1 if granularity == "day" else 7)] += row.counts.get("launches", 0)
        for i in range(len(days)):
            counts = per.get(i, Counter())
            out.launches[i], out.resumes[i], out.degraded[i] = launches[i], counts["resumes"], counts["degraded"]
            for slug in metrics.FIGURES:
                whole = counts[f"{slug}:whole"]
                out.shares[slug][i] = counts[f"{slug}:met"] / whole if whole else None
        return out

    def breakdown(self, dimension: str) -> list[trends.BreakdownRow]:
        """As ``trends.breakdown``: the four shares per agent, kind, reason, runbook or team."""
        if dimension not in metrics.DIMENSIONS:
            raise ValueError(dimension)
        f = self.filters
        if dimension in ("agent", "kind"):
            chosen: Iterable[Row] = self.picked()
        else:  # the rows of each value of the dimension, at the filters' key on the other two
            key = {"reason": f.reason or ANY, "runbook": f.runbook or ANY, "team": f.team or ANY}
            chosen = (
                r
                for r in self.rows
                if getattr(r, dimension) != ANY
                and all(getattr(r, d) == v for d, v in key.items() if d != dimension)
                and (key[dimension] == ANY or getattr(r, dimension) == key[dimension])
            )
        grouped: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for row in chosen:
            grouped[getattr(row, dimension)].update(row.counts)
        out = []
        for value, counts in grouped.items():
            if not counts["degraded"]:
                continue
            out.append(
                trends.BreakdownRow(
                    value,
                    f.only(**{dimension: value}),
                    counts["degraded"],
                    {
                        slug: metrics.Share(
                            slug, fig.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], fig.definition
                        )
                        for slug, fig in metrics.FIGURES.items()
                    },
                )
            )
        return sorted(out, key=lambda r: (-r.degraded, r.value))

    def timing(self, name: str, **where: str) -> ApproxTiming:
        histogram: Counter[int] = Counter()
        for row in self.picked(**where):
            histogram.update(row.timings.get(name, {}))
        return ApproxTiming(TIMING_LABELS[name], dict(histogram))

    def timings(self) -> list[ApproxTiming]:
        return [self.timing(name) for name in TIMINGS]

    def breach_rate(self) -> sla_figures.BreachRate:
        counts = self._sum(self.picked())
        return sla_figures.BreachRate(counts["breached"], counts["opened"])

    def decisions_by_action_and_outcome(self) -> dict[tuple[str, str], int]:
        found = {}
        for key, n in sorted(self._sum(self.picked()).items()):
            if key.startswith("decision:") and n:
                _, action, status = key.split(":", 2)
                found[(action, status)] = n
        return found

    def kinds(self) -> list[str]:
        """Kinds launched, or with a checkpoint opened, in the period (readiness's kinds)."""
        seen = {
            r.kind
            for r in self.picked(reason=ANY, runbook=ANY, team=ANY)
            if r.counts.get("launches") or r.counts.get("opened")
        }
        return sorted(seen)


def kinds() -> list[str]:
    """Every workflow kind recorded: from the rollups and the days not rolled yet (``metrics.choices``'s kinds)."""
    state = RollupState.objects.first()
    if state is None:
        return list(Workflow.objects.order_by("kind").values_list("kind", flat=True).distinct())
    rolled = set(DailyRollup.objects.filter(reason=ANY, runbook=ANY).values_list("kind", flat=True).distinct())
    recent = Workflow.objects.filter(created_at__gte=state.rolled_since).values_list("kind", flat=True).distinct()
    return sorted(rolled | set(recent))


def choices() -> dict[str, list[str]]:
    return metrics.choices(kinds=kinds())
