"""One range of days' rollup cells, computed with the live definitions (``workflows.metrics``,
``workflows.readiness_figures``, ``workflows.timings``, ``workflows.sla_figures``): each figure counted on
the day the live definitions place it on, under its agent, kind, reason, runbook and team."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from django.db.models import BooleanField, Case, Count, Q, Value, When
from django.db.models.functions import TruncDate

from .. import metrics, readiness_figures, sla_figures, timings
from ..models import Checkpoint, Step, Workflow
from ..models.rollups import ANY
from .histograms import bucket_of

Key = tuple[date, str, str, str, str, str]  # day, agent, kind, reason, runbook, team


@dataclass
class Cell:
    counts: Counter[str] = field(default_factory=Counter)
    timings: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))


def utc_day(value: date | datetime) -> date:
    return value.astimezone(UTC).date() if isinstance(value, datetime) else value


Fan = tuple[str, str, str]  # reason, runbook, team


def _fan(reason: str, runbook: str | None, team: str | None) -> list[Fan]:
    """The reason × runbook × team keys one checkpoint counts under: itself and the ``ANY`` rows above it."""
    pairs = [(ANY, ANY), (reason, ANY)]
    if runbook:
        pairs += [(ANY, runbook), (reason, runbook)]
    return [(r, b, t) for r, b in pairs for t in ((ANY, team) if team else (ANY,))]


def holds(q: Q, row: Mapping[str, object]) -> bool:
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
            raise ValueError(f"The rollups cannot read the lookup {lookup!r}: teach rollups.cells.holds")
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
            cell = cells[(utc_day(row["interrupted_at"]), row["agent__name"], row["kind"], reason, runbook, team)]
            cell.counts.update(met)
            if took is not None:
                cell.timings["interruption_to_completion"][took] += 1


def _launches_and_steps(cells: defaultdict[Key, Cell], period: metrics.Filters) -> None:
    launched = metrics.launched(period).annotate(day=TruncDate("created_at", tzinfo=UTC))
    for r in launched.values("day", "agent__name", "kind").annotate(n=Count("pk")).order_by():
        cells[(utc_day(r["day"]), r["agent__name"], r["kind"], ANY, ANY, ANY)].counts["launches"] += r["n"]
    steps = (
        Step.objects.filter(workflow__in=metrics.launched(period).values("pk"))
        .annotate(day=TruncDate("workflow__created_at", tzinfo=UTC))
        .values("day", "workflow__agent__name", "workflow__kind")
    )
    for name, q in readiness_figures.STEP_COUNTS.items():
        for r in steps.filter(q).annotate(n=Count("pk")).order_by():
            cells[(utc_day(r["day"]), r["workflow__agent__name"], r["workflow__kind"], ANY, ANY, ANY)].counts[name] += (
                r["n"]
            )
    effects = steps.filter(kind=Step.Kind.EFFECT).values("day", "workflow__agent__name", "workflow__kind", "name")
    for r in effects.annotate(**readiness_figures.effect_aggregates()).order_by():
        counts = cells[(utc_day(r["day"]), r["workflow__agent__name"], r["workflow__kind"], ANY, ANY, ANY)].counts
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
            cell = cells[
                (utc_day(r["opened_at"]), r["workflow__agent__name"], r["workflow__kind"], reason, runbook, team)
            ]
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
                        utc_day(r["day"]),
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
