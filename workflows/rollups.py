"""Daily rollups: the resume dashboard and readiness in bounded time over any history.

The figures are defined once, in ``workflows.metrics`` (and readiness's in
``workflows.readiness_figures``); this module computes them **per UTC day** with those
very definitions and keeps the result in ``DailyRollup`` rows, so a page sums
a few thousand small rows instead of judging every workflow of the period.

Which day a thing counts on (the day the live definitions place it on):

- a degraded workflow: the day of its first interruption (its first
  checkpoint, or its failure without one), with every set and share it
  belongs to, and its interruption-to-completion time;
- a launch, and the steps behind readiness's "what state survived": the day
  the workflow was created;
- a checkpoint's opening, its clocks (time to claim, to decision), its SLA
  breach and the decisions taken on it: the day it opened;
- a resume: the day the decision reached the agent.

A workflow's figures change after its day (a resume completes, the sweep
records a breach, a late effect commits), so every change that matters writes
an ``Event``, and a day is **touched** when a workflow with an event since the
last roll counts on it. ``roll_recent`` (Celery beat, every
``ROLLUP_INTERVAL_SECONDS``) re-rolls the touched days and today;
``manage.py rebuild_rollups`` rebuilds any range. Rolling a day deletes and
inserts its rows in one transaction, under a lock on the ``RollupState`` row:
rolling twice gives the same rows.

A page reads the rows of the rolled days and computes live, with the same
code, only the days not rolled yet or touched since the last roll (today,
typically: bounded by one day's rows, read through the day indexes).

Counts are exact: a figure read from the rollups equals the live definition
for the same period and filters. Medians and 90th percentiles come from a
histogram of log-spaced buckets 2 % wide, read at each bucket's geometric
middle: within 1 % of the exact value (the count is exact).
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, Case, Count, Q, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from . import metrics, readiness_figures, sla_figures, timings, trends
from .clock import database_now
from .models import Checkpoint, DailyRollup, Decision, Event, RollupState, Step, Workflow
from .models.rollups import ANY

Key = tuple[date, str, str, str, str, str]  # day, agent, kind, reason, runbook, team
BUCKET_FLOOR = 0.001  # seconds: anything at or under it is read as 0
BUCKET_BASE = 1.02
# Events written in a transaction that was still open when a roll started are not missed: the next
# roll looks back this far before the previous one started.
IN_FLIGHT = timedelta(minutes=2)
TIMINGS = ("time_to_claim", "time_to_decision", "interruption_to_completion")
TIMING_LABELS = {
    "time_to_claim": "Time to claim",
    "time_to_decision": "Time to decision",
    "interruption_to_completion": "Interruption to completion",
}


# --- histograms ----------------------------------------------------------------------------------


def bucket_of(seconds: float) -> int:
    """The log-spaced bucket of a duration: [FLOOR·BASE^k, FLOOR·BASE^(k+1)); -1 for none at all."""
    if seconds <= BUCKET_FLOOR:
        return -1
    return math.floor(math.log(seconds / BUCKET_FLOOR) / math.log(BUCKET_BASE))


def bucket_value(bucket: int) -> float:
    return 0.0 if bucket < 0 else BUCKET_FLOOR * BUCKET_BASE ** (bucket + 0.5)


@dataclass(frozen=True)
class ApproxTiming:
    """``timings.Timing`` read from a histogram: the count exact, median and p90 within 1 %."""

    label: str
    histogram: dict[int, int]

    @property
    def count(self) -> int:
        return sum(self.histogram.values())

    def _at_rank(self, rank: int) -> float:  # rank 1..count, ascending
        seen = 0
        for bucket in sorted(self.histogram):
            seen += self.histogram[bucket]
            if seen >= rank:
                return bucket_value(bucket)
        raise IndexError(rank)

    @property
    def median(self) -> float | None:
        n = self.count
        if not n:
            return None
        if n % 2:
            return self._at_rank(n // 2 + 1)
        return (self._at_rank(n // 2) + self._at_rank(n // 2 + 1)) / 2  # as statistics.median

    @property
    def p90(self) -> float | None:
        n = self.count
        return self._at_rank(max(1, math.ceil(0.9 * n))) if n else None  # nearest rank, as timings.percentile


# --- computing a range of days with the live definitions -------------------------------------------


@dataclass
class Cell:
    counts: Counter[str] = field(default_factory=Counter)
    timings: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))


def _day(value: Any) -> date:
    return value.astimezone(UTC).date() if isinstance(value, datetime) else value


Fan = tuple[str, str, str]  # reason, runbook, team


def _fan(reason: str, runbook: str | None, team: str | None) -> list[Fan]:
    """The reason × runbook × team keys one checkpoint counts under: itself and the ``ANY`` rows above it."""
    pairs = [(ANY, ANY), (reason, ANY)]
    if runbook:
        pairs += [(ANY, runbook), (reason, runbook)]
    return [(r, b, t) for r, b in pairs for t in ((ANY, team) if team else (ANY,))]


def holds(q: Q, row: dict[str, Any]) -> bool:
    """Whether a row of ``metrics.with_recovery`` values meets a figure's Q — the definitions, read in Python
    so the database computes each per-workflow predicate once (not once per figure that uses it)."""
    results = []
    for child in q.children:
        if isinstance(child, Q):
            results.append(holds(child, row))
            continue
        lookup, value = child  # type: ignore[misc]  # a Q's leaves are (lookup, value) pairs
        if lookup.endswith("__in"):
            results.append(row[lookup[:-4]] in value)
        elif "__" in lookup:
            raise ValueError(f"The rollups cannot read the lookup {lookup!r}: teach rollups.holds")
        else:
            results.append(row[lookup] == value)
    met = all(results) if q.connector == Q.AND else any(results)
    return not met if q.negated else met


PREDICATES = (
    "interrupted_at",
    "blank_failure",
    "resumed",
    "continued",
    "handed_off",
    "duplicate_attempt",
    "unkept_unknown_effect",
    "unkept_promise",
    "owner_changed",
)


def _degraded(cells: defaultdict[Key, Cell], period: metrics.Filters) -> None:
    # The candidates through the day indexes first: the planner then judges only them, row by row.
    candidates = sorted(
        set(
            Checkpoint.objects.filter(opened_at__gte=period.since, opened_at__lt=period.until).values_list(
                "workflow_id", flat=True
            )
        )
        | set(
            Workflow.objects.filter(
                finished_at__gte=period.since, finished_at__lt=period.until, status=Workflow.Status.FAILED
            ).values_list("pk", flat=True)
        )
    )
    rows = []
    for i in range(0, len(candidates), 2000):
        rows += list(
            metrics.degraded(period)
            .filter(pk__in=candidates[i : i + 2000])
            .order_by()
            .values("pk", "agent__name", "kind", "status", "finished_at", *PREDICATES)
        )
    fans: defaultdict[int, set[Fan]] = defaultdict(set)
    ids = [r["pk"] for r in rows]
    for i in range(0, len(ids), 5000):
        for wf, reason, runbook, team in (
            Checkpoint.objects.filter(workflow__in=ids[i : i + 5000])
            .values_list("workflow_id", "reason", "runbook__slug", "team__slug")
            .distinct()
        ):
            fans[wf].update(_fan(reason, runbook, team))
    completed = Workflow.Status.COMPLETED
    for row in rows:
        met = [slug for slug, (_label, q) in metrics.SETS.items() if holds(q, row)]
        met += [f"{slug}:whole" for slug, f in metrics.FIGURES.items() if holds(f.denominator, row)]
        took = None
        if row["status"] == completed and row["finished_at"] and row["interrupted_at"]:
            took = bucket_of((row["finished_at"] - row["interrupted_at"]).total_seconds())
        for reason, runbook, team in fans[row["pk"]] | {(ANY, ANY, ANY)}:
            cell = cells[(_day(row["interrupted_at"]), row["agent__name"], row["kind"], reason, runbook, team)]
            cell.counts.update(met)
            if took is not None:
                cell.timings["interruption_to_completion"][took] += 1


def _launches_and_steps(cells: defaultdict[Key, Cell], period: metrics.Filters) -> None:
    launched = metrics.launched(period).annotate(day=TruncDate("created_at", tzinfo=UTC))
    for r in launched.values("day", "agent__name", "kind").annotate(n=Count("pk")).order_by():
        cells[(_day(r["day"]), r["agent__name"], r["kind"], ANY, ANY, ANY)].counts["launches"] += r["n"]
    steps = (
        Step.objects.filter(workflow__in=metrics.launched(period).values("pk"))
        .annotate(day=TruncDate("workflow__created_at", tzinfo=UTC))
        .values("day", "workflow__agent__name", "workflow__kind")
    )
    for name, q in readiness_figures.STEP_COUNTS.items():
        for r in steps.filter(q).annotate(n=Count("pk")).order_by():
            cells[(_day(r["day"]), r["workflow__agent__name"], r["workflow__kind"], ANY, ANY, ANY)].counts[name] += r[
                "n"
            ]
    effects = steps.filter(kind=Step.Kind.EFFECT).values("day", "workflow__agent__name", "workflow__kind", "name")
    for r in effects.annotate(**readiness_figures.effect_aggregates()).order_by():
        counts = cells[(_day(r["day"]), r["workflow__agent__name"], r["workflow__kind"], ANY, ANY, ANY)].counts
        for part in ("steps", "committed", "with_ref"):
            counts[f"effect:{r['name']}:{part}"] += r[part]


def _checkpoints(cells: defaultdict[Key, Cell], period: metrics.Filters) -> None:
    opened = readiness_figures.with_interruption_steps(timings.with_clocks(timings.opened_checkpoints(period)))
    rows = opened.annotate(
        breached=Case(When(sla_figures.BREACHED, then=Value(True)), default=Value(False), output_field=BooleanField())
    ).values(
        "pk",
        "opened_at",
        "claimed_first_at",
        "first_decided_at",
        "breached",
        "reason",
        "runbook__slug",
        "team__slug",
        "workflow__agent__name",
        "workflow__kind",
        "at_name",
        "before_name",
    )
    for r in rows.order_by():
        names = ["opened", f"interruption:{readiness_figures.interruption_label(r['at_name'], r['before_name'])}"]
        if r["breached"]:
            names.append("breached")
        clocks = {
            name: (r[end] - r["opened_at"]).total_seconds()
            for name, end in (("time_to_claim", "claimed_first_at"), ("time_to_decision", "first_decided_at"))
            if r[end]
        }
        for reason, runbook, team in _fan(r["reason"], r["runbook__slug"], r["team__slug"]):
            cell = cells[(_day(r["opened_at"]), r["workflow__agent__name"], r["workflow__kind"], reason, runbook, team)]
            cell.counts.update(names)
            for name, seconds in clocks.items():
                cell.timings[name][bucket_of(seconds)] += 1
    decisions = (
        sla_figures.decisions(period)
        .annotate(day=TruncDate("checkpoint__opened_at", tzinfo=UTC))
        .values(
            "day",
            "checkpoint__workflow__agent__name",
            "checkpoint__workflow__kind",
            "checkpoint__reason",
            "checkpoint__runbook__slug",
            "checkpoint__team__slug",
            "action",
            "status",
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    resumes = (
        metrics.resumes(period)
        .annotate(day=TruncDate("finished_at", tzinfo=UTC))
        .values(
            "day",
            "checkpoint__workflow__agent__name",
            "checkpoint__workflow__kind",
            "checkpoint__reason",
            "checkpoint__runbook__slug",
            "checkpoint__team__slug",
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    for name, grouped in (("decision", decisions), ("resumes", resumes)):
        for r in grouped:
            metric = f"decision:{r['action']}:{r['status']}" if name == "decision" else name
            for reason, runbook, team in _fan(
                r["checkpoint__reason"], r["checkpoint__runbook__slug"], r["checkpoint__team__slug"]
            ):
                cells[
                    (
                        _day(r["day"]),
                        r["checkpoint__workflow__agent__name"],
                        r["checkpoint__workflow__kind"],
                        reason,
                        runbook,
                        team,
                    )
                ].counts[metric] += r["n"]


def compute(start: date, end: date, *, drills: str = "") -> dict[Key, Cell]:
    """Every rollup cell of the days ``start``..``end`` (UTC, both included), from the live definitions.

    The stored rollups are production figures (``drills`` ""); with drilled workflows included, or one
    drill's runs, the cells are computed live."""
    period = metrics.Filters(start=start, end=end, drills=drills)
    cells: defaultdict[Key, Cell] = defaultdict(Cell)
    _degraded(cells, period)
    _launches_and_steps(cells, period)
    _checkpoints(cells, period)
    return {key: cell for key, cell in cells.items() if start <= key[0] <= end}


# --- rolling ---------------------------------------------------------------------------------------


def _days(start: date, end: date) -> Iterator[date]:
    while start <= end:
        yield start
        start += timedelta(days=1)


def _runs(days: Iterable[date]) -> Iterator[tuple[date, date]]:
    """Consecutive days as (first, last) ranges."""
    ordered = sorted(set(days))
    while ordered:
        first = last = ordered.pop(0)
        while ordered and ordered[0] == last + timedelta(days=1):
            last = ordered.pop(0)
        yield first, last


def roll_day(day: date) -> int:
    """Replace a day's rows with a fresh computation (idempotent); answers how many rows it holds."""
    with transaction.atomic():
        # One roller at a time: two deleting and inserting the same day would collide on the unique key.
        RollupState.objects.select_for_update().filter(pk=1).first()
        cells = compute(day, day)
        DailyRollup.objects.filter(day=day).delete()
        DailyRollup.objects.bulk_create(
            [
                DailyRollup(
                    day=d,
                    agent=agent,
                    kind=kind,
                    reason=reason,
                    runbook=runbook,
                    team=team,
                    counts=dict(cell.counts),
                    timings={name: {str(b): n for b, n in hist.items()} for name, hist in cell.timings.items()},
                )
                for (d, agent, kind, reason, runbook, team), cell in cells.items()
            ],
            batch_size=1000,
        )
    return len(cells)


def earliest_day() -> date | None:
    """The first day anything was recorded on (each through its own index)."""
    firsts = [
        qs.order_by(column).values_list(column, flat=True).first()
        for qs, column in (
            (Workflow.objects.all(), "created_at"),
            (Checkpoint.objects.all(), "opened_at"),
            (Workflow.objects.filter(finished_at__isnull=False), "finished_at"),
            (Decision.objects.filter(finished_at__isnull=False), "finished_at"),
        )
    ]
    found = [_day(f) for f in firsts if f is not None]
    return min(found) if found else None


def touched_days(since: datetime) -> set[date]:
    """Days whose figures may have changed since ``since``: every day a workflow with a newer event counts on."""
    touched = Event.objects.filter(at__gte=since, workflow__isnull=False).values("workflow_id")
    days: set[date] = set()
    for qs, column in (
        (Workflow.objects.filter(pk__in=touched), "created_at"),
        (Workflow.objects.filter(pk__in=touched, finished_at__isnull=False), "finished_at"),
        (Checkpoint.objects.filter(workflow__in=touched), "opened_at"),
        (Decision.objects.filter(checkpoint__workflow__in=touched, finished_at__isnull=False), "finished_at"),
    ):
        days.update(
            _day(d)
            for d in qs.annotate(d=TruncDate(column, tzinfo=UTC)).values_list("d", flat=True).distinct().order_by()
        )
    return days


def _today() -> date:
    return timezone.now().astimezone(UTC).date()


def rebuild(start: date | None = None, end: date | None = None, *, say: Any = None) -> tuple[date, date] | None:
    """Roll every day of a range (default: the first recorded day to today) and record what is covered.

    Without rollups yet, the whole history is rolled whatever the range, so the pages can trust the
    rows of every rolled day."""
    started = database_now()  # the watermark: a worker's clock running ahead would skip what came meanwhile
    state = RollupState.objects.first()
    first = earliest_day()
    if first is None:
        first = _today()
    if state is None or start is None:
        start = min(start or first, first) if state is None else (start or first)
    if state is None or end is None:
        end = max(end or _today(), _today()) if state is None else (end or _today())
    if state is None:
        # The row every roller locks, there from the start; no day is trusted until the end (last_day).
        RollupState.objects.get_or_create(
            pk=1,
            defaults={"first_day": start, "last_day": start - timedelta(days=1), "rolled_since": started - IN_FLIGHT},
        )
    for day in _days(start, end):
        rows = roll_day(day)
        if say:
            say(f"{day}: {rows} rows")
    with transaction.atomic():
        state = RollupState.objects.select_for_update().get(pk=1)
        RollupState.objects.filter(pk=1).update(
            first_day=min(state.first_day, start), last_day=max(state.last_day, end)
        )
    return start, end


ROLL_LOCK = 0x726F6C6C  # "roll": the advisory lock of the beat's roll on PostgreSQL


@contextlib.contextmanager
def one_roll_at_a_time() -> Iterator[bool]:
    """True for the one roll that may run now. A roll of a busy day takes longer than the beat's interval
    (35-60 s for 8,000 workflows in a day, in the chaos soak), and two rolls of the same days side by side
    only do the work twice on two worker slots. A session-level advisory lock: a worker killed mid-roll
    loses its connection and the lock with it. SQLite (the embedded default) runs one roll at a time anyway."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [ROLL_LOCK])
        mine = bool(cursor.fetchone()[0])
    try:
        yield mine
    finally:
        if mine:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [ROLL_LOCK])


def roll_recent() -> list[date]:
    """The beat's roll: today, the days since the last one, and every day touched by activity meanwhile."""
    state = RollupState.objects.first()
    if state is None:
        covered = rebuild()
        return list(_days(*covered)) if covered else []
    started = database_now()  # the watermark: a worker's clock running ahead would skip what came meanwhile
    days = touched_days(state.rolled_since) | set(_days(state.last_day, _today()))
    for day in sorted(days):
        roll_day(day)
    RollupState.objects.filter(pk=1).update(
        first_day=min([state.first_day, *days]), last_day=max([state.last_day, *days]), rolled_since=started - IN_FLIGHT
    )
    return sorted(days)


# --- reading: rolled days from the rows, the rest live -------------------------------------------


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
    days = set(_days(start, end))
    if state is None:
        return days
    live = {d for d in days if d > state.last_day}
    return live | (touched_days(state.rolled_since) & days)


def rows(start: date, end: date, *, agent: str = "", kind: str = "", drills: str = "") -> list[Row]:
    """Every rollup row of the range (narrowed to an agent and a kind), rolled or computed live (all of it
    when ``drills`` asks for drilled workflows: the rollups hold production figures only)."""
    live = set(_days(start, end)) if drills else live_days(start, end)
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
    for first, last in _runs(live):
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
