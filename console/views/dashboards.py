"""The TPM's pages: the resume dashboard and its drill-downs and CSV exports.

Every figure comes from ``workflows.metrics``; the views only pick the period
and filters from the URL, lay the figures out and draw them with
``console.charts``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from workflows import incident_figures, metrics, rollups, sla_figures, staffing, trends
from workflows import readiness as readiness_review
from workflows.models import Checkpoint, Team, Workflow

from .. import charts
from ..csv_export import Cell, stream_csv
from ..labels import label
from ..roles import REVIEWERS, role_required

# The ids of the workflows behind a figure (none when the rollups say there are none), as one page lists them.
WorkflowIds: TypeAlias = "QuerySet[Workflow, int] | list[int]"

reviewer = role_required(*REVIEWERS, why="The resume figures are for TPMs and admins.")
TABLES = ("headline", "series", "timings", "decisions", "agent", "kind", "reason", "runbook", "team", "workflows")


def _url(name: str, filters: metrics.Filters, **extra: str) -> str:
    return f"{reverse(name)}?{urlencode(filters.as_query(**extra))}"


@dataclass(frozen=True)
class Card:
    share: metrics.Share
    before: metrics.Share
    met_url: str
    missed_url: str
    why_missed: list[tuple[metrics.Missed, str]]  # each reason with its drill-down

    @property
    def trend(self) -> float | None:
        return metrics.trend(self.share, self.before)

    @property
    def unexplained(self) -> int:
        """Misses no reason counts: days rolled up before the reasons were (``manage.py rebuild_rollups``)."""
        if not self.why_missed:
            return 0
        return self.share.whole - self.share.part - sum(missed.count for missed, _url in self.why_missed)


def _card(slug: str, now: metrics.Summary, before: metrics.Summary, filters: metrics.Filters) -> Card:
    why = [
        (missed, _url("resume_workflows", filters, figure=missed.why.set))
        for missed in metrics.missed_because(now.counts, slug)
    ]
    return Card(
        now[slug],
        before[slug],
        _url("resume_workflows", filters, figure=f"{slug}:met"),
        _url("resume_workflows", filters, figure=f"{slug}:missed"),
        why,
    )


def _grain(request: HttpRequest) -> str:
    grain = request.GET.get("grain", "day")
    return grain if grain in metrics.GRANULARITIES else "day"


def _bucket_labels(series: trends.Series) -> list[str]:
    fmt = "%d %b" if series.granularity == "day" else "wk %d %b"
    return [d.strftime(fmt) for d in series.buckets]


def _trend_note(buckets: list[str], with_data: list[bool], grain: str) -> str:
    """What a chart over time cannot show: a trend needs two buckets with data (a fresh console has one
    day, or none)."""
    found = [label for label, has in zip(buckets, with_data, strict=True) if has]
    if not found:
        return "No data in this period yet: nothing to draw a trend from"
    if len(found) == 1:
        return f"Only one {grain} with data so far ({found[0]}): a trend needs two or more"
    return ""


def _charts(series: trends.Series) -> dict[str, SafeString]:
    labels = _bucket_labels(series)
    moved = [bool(a or b or c) for a, b, c in zip(series.launches, series.resumes, series.degraded, strict=True)]
    shared = [any(series.shares[slug][i] is not None for slug in metrics.HEADLINES) for i in range(len(labels))]
    return {
        "motion": charts.column_chart(
            "Launches next to resumes",
            labels,
            [
                charts.Line("launches", series.launches),
                charts.Line("resumes", series.resumes),
                charts.Line("degraded", series.degraded),
            ],
            note=_trend_note(labels, moved, series.granularity),
        ),
        "shares": charts.line_chart(
            "The four shares over time",
            labels,
            [charts.Line(metrics.FIGURES[slug].label, series.shares[slug]) for slug in metrics.HEADLINES],
            fmt=charts.percent,
            y_max=1.0,
            width=640,
            height=240,
            note=_trend_note(labels, shared, series.granularity),
        ),
    }


def _breakdown_chart(dimension: str, rows: list[trends.BreakdownRow], filters: metrics.Filters) -> SafeString:
    bars = [
        charts.Bar(
            label(row.value) or "(none)",
            row.shares["resumed_without_data_loss"].value,
            href=_url("resume_workflows", row.filters, figure="resumed_without_data_loss:missed"),
            note=f"{row.shares['resumed_without_data_loss'].part} of {row.shares['resumed_without_data_loss'].whole}",
        )
        for row in rows[:12]
    ]
    return charts.bar_chart(f"Resumed without data loss by {dimension}", bars, fmt=charts.percent, max_value=1.0)


@reviewer
@require_GET
def resumes(request: HttpRequest) -> HttpResponse:
    """The resume dashboard: the four shares, launches next to resumes, over time and by cause."""
    filters = metrics.Filters.from_query(request.GET)
    grain = _grain(request)
    figures = rollups.Figures(filters)  # the daily rollups, and today live (workflows/rollups/)
    now, before = figures.summary(), rollups.Figures(filters.previous()).summary()
    cards = [_card(slug, now, before, filters) for slug in metrics.HEADLINES]
    series = figures.series(grain)
    breakdowns = []
    for dimension in metrics.DIMENSIONS:
        rows = figures.breakdown(dimension)
        breakdowns.append({"dimension": dimension, "rows": rows, "chart": _breakdown_chart(dimension, rows, filters)})
    context = {
        "filters": filters,
        "grain": grain,
        "cards": cards,
        "now": now,
        "before": before,
        "choices": {**rollups.choices(), "team": list(Team.objects.order_by("slug").values_list("slug", flat=True))},
        "charts": _charts(series),
        "breakdowns": breakdowns,
        "timings": figures.timings(),
        "breaches": figures.breach_rate(),
        "channel_timings": sla_figures.decision_times_by_channel(filters),
        "incidents": incident_figures.figures(filters),
        "claim_channel_timings": sla_figures.claim_times_by_channel(filters),
        "decisions": sorted(figures.decisions_by_action_and_outcome().items()),
        "figures": metrics.FIGURES,
        "sets": metrics.SETS,
        "query": urlencode(filters.as_query()),
        "previous": filters.previous(),
    }
    return render(request, "console/resumes.html", context)


class _CountedPaginator(Paginator[int]):
    """A paginator told its count: the rollups know how many workflows a figure holds, so the page only
    reads its 50 rows instead of counting every workflow of the period."""

    def __init__(self, object_list: WorkflowIds, per_page: int, count: int) -> None:
        super().__init__(object_list, per_page)
        self._known = count

    @property
    def count(self) -> int:
        return self._known


def _known_count(filters: metrics.Filters, figure: str) -> int | None:
    if figure == "resumes":
        return None  # workflows resumed in the period: the rollups count the resumes, not the workflows
    summary = rollups.Figures(filters).summary()
    return summary.launches if figure == "launches" else summary.counts.get(figure)


def _paginator(qs: WorkflowIds, count: int | None) -> Paginator[int]:
    return Paginator(qs, 50) if count is None else _CountedPaginator(qs, 50, count)


@reviewer
@require_GET
def resume_workflows(request: HttpRequest) -> HttpResponse:
    """The drill-down: the workflows behind one figure, for the same period and filters."""
    filters = metrics.Filters.from_query(request.GET)
    figure = request.GET.get("figure", "degraded")
    try:
        qs = metrics.workflows_behind(filters, figure)
    except KeyError:
        raise Http404("No such figure.") from None
    # The page's ids only: selecting the per-workflow predicates too makes the planner judge every
    # workflow of the period up front instead of the 50 it shows.
    count = _known_count(filters, figure)
    ids_qs = qs.order_by("-created_at", "-pk").values_list("pk", flat=True)
    # None to list: nothing to look for (a rare set would otherwise walk every workflow of the period).
    page = _paginator([] if count == 0 else ids_qs, count).get_page(request.GET.get("page"))
    ids = list(page.object_list)
    found = Workflow.objects.select_related("agent", "owner").in_bulk(ids)
    workflows = [found[pk] for pk in ids if pk in found]
    latest = {
        c.workflow_id: c
        for c in Checkpoint.objects.filter(  # the latest wins (ordered by opening)
            workflow__in=ids
        ).order_by("opened_at")
    }
    return render(
        request,
        "console/resume_workflows.html",
        {
            "filters": filters,
            "figure": figure,
            "label": metrics.figure_label(figure),
            "page": page,
            "rows": [(w, latest.get(w.pk)) for w in workflows],
            "query": urlencode(filters.as_query(figure=figure)),
            "back": _url("resumes", filters),
        },
    )


# --- CSV exports: every table of the dashboard, honouring the filters ----------------------------


def _pct(share: metrics.Share) -> str:
    return "" if share.percent is None else f"{share.percent:.1f}"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def _rows(table: str, filters: metrics.Filters, request: HttpRequest) -> Iterator[list[Cell]]:
    if table == "headline":
        now, before = rollups.Figures(filters).summary(), rollups.Figures(filters.previous()).summary()
        yield ["figure", "percent", "part", "whole", "previous_percent", "previous_part", "previous_whole"]
        for slug in metrics.HEADLINES:
            yield [
                slug,
                _pct(now[slug]),
                now[slug].part,
                now[slug].whole,
                _pct(before[slug]),
                before[slug].part,
                before[slug].whole,
            ]
        yield ["launches", "", now.launches, "", "", before.launches, ""]
        yield ["resumes", "", now.resumes, "", "", before.resumes, ""]
        for slug in (
            "degraded",
            "in_flight",
            "blank_failure",
            "duplicate_attempt",
            "lost_effect",
            *(why.set for why in metrics.MISSED_BECAUSE),
        ):
            yield [slug, "", now.counts[slug], "", "", before.counts[slug], ""]
    elif table == "series":
        series = rollups.Figures(filters).series(_grain(request))
        yield ["bucket", "launches", "resumes", "degraded", *[f"{s}_percent" for s in metrics.HEADLINES]]
        for i, day in enumerate(series.buckets):
            shares = [series.shares[s][i] for s in metrics.HEADLINES]
            yield [
                day.isoformat(),
                series.launches[i],
                series.resumes[i],
                series.degraded[i],
                *["" if v is None else f"{100 * v:.1f}" for v in shares],
            ]
    elif table == "timings":
        # One column per quantity: a clock fills count, median and p90; the breach rate counts the checkpoints
        # opened, the breached among them and the rate.
        yield ["measure", "count", "median_seconds", "p90_seconds", "breached", "breach_rate_percent"]
        figures = rollups.Figures(filters)
        for timing in figures.timings():
            yield [timing.label, timing.count, _seconds(timing.median), _seconds(timing.p90), "", ""]
        rate = figures.breach_rate()
        yield [
            "SLA breach rate (checkpoints opened)",
            rate.opened,
            "",
            "",
            rate.breached,
            "" if rate.value is None else f"{100 * rate.value:.1f}",
        ]
    elif table == "decisions":
        yield ["action", "outcome", "decisions"]
        for (action, outcome), n in sorted(rollups.Figures(filters).decisions_by_action_and_outcome().items()):
            yield [action, outcome, n]
    elif table in metrics.DIMENSIONS:
        yield [table, "degraded", *[f"{s}_{part}" for s in metrics.HEADLINES for part in ("part", "whole")]]
        for row in rollups.Figures(filters).breakdown(table):
            yield [
                row.value,
                row.degraded,
                *[v for s in metrics.HEADLINES for v in (row.shares[s].part, row.shares[s].whole)],
            ]
    elif table == "workflows":
        figure = request.GET.get("figure", "degraded")
        try:
            qs = metrics.workflows_behind(filters, figure)
        except KeyError:
            raise Http404("No such figure.") from None
        yield ["id", "external_id", "agent", "kind", "title", "status", "owner", "created_at", "finished_at"]
        for w in qs.select_related("agent", "owner").order_by("-created_at", "-pk").iterator(chunk_size=2000):
            yield [
                w.pk,
                w.external_id,
                w.agent.name,
                w.kind,
                w.title,
                w.status,
                w.owner.get_username() if w.owner else "",
                w.created_at.isoformat(),
                w.finished_at.isoformat() if w.finished_at else "",
            ]


@reviewer  # a streamed CSV, not an HttpResponse: role_required passes it through
@require_GET
def resume_export(request: HttpRequest, table: str) -> StreamingHttpResponse:
    if table not in TABLES:
        raise Http404("No such table.")
    filters = metrics.Filters.from_query(request.GET)
    rows = _rows(table, filters, request)
    first = next(rows)  # a bad figure raises 404 here, before the response starts
    return stream_csv(itertools.chain([first], rows), f"resumes-{table}-{filters.start}-{filters.end}.csv")


# --- readiness per workflow kind, and the staffing budget ------------------------------------------


@reviewer
@require_GET
def readiness(request: HttpRequest) -> HttpResponse:
    """The design review per workflow kind: interruptions, surviving state, what a human saw, outcomes."""
    filters = metrics.Filters.from_query(request.GET).only(team="")  # per kind: launches belong to no team
    kinds = readiness_review.review(filters)
    for kind in kinds:
        kind.chart = charts.bar_chart(  # type: ignore[attr-defined]
            f"Where {kind.kind} workflows were interrupted",
            [
                charts.Bar(label, n, href=_url("resume_workflows", kind.filters, figure="degraded"))
                for label, n in kind.interruptions[:8]
            ],
        )
    return render(
        request,
        "console/readiness.html",
        {
            "filters": filters,
            "kinds": kinds,
            "choices": rollups.choices(),
            "query": urlencode(filters.as_query()),
        },
    )


@dataclass(frozen=True)
class Heatmap:
    testid: str
    title: str  # shown above the picture (the SVG's own <title> is read by screen readers only)
    chart: SafeString


@reviewer
@require_GET
def staffing_budget(request: HttpRequest) -> HttpResponse:
    """Operators needed per hour of the week (Erlang C) against the operators who worked."""
    team = Team.objects.filter(slug=str(request.GET.get("team", ""))[:60]).first()  # per team: Erlang C of its own
    filters = metrics.Filters.from_query(request.GET).only(team=team.slug if team else "")
    try:
        level = min(max(float(request.GET.get("level", "0.8")), 0.5), 0.99)
    except ValueError:
        level = 0.8
    budget = staffing.budget(filters, level)
    hours = [f"{h:02d}" for h in range(24)]
    under = set(budget.under_staffed)
    notes = [
        [f"{c.arrivals_per_hour:.2f} checkpoints/h, {c.worked:.1f} operators worked" for c in row]
        for row in budget.cells
    ]
    # The period bar is a form of its own: it carries the team and service level chosen in the other one.
    carried = [("team", filters.team)] if filters.team else []
    if "level" in request.GET:
        carried.append(("level", f"{level:g}"))
    context = {
        "filters": filters,
        "budget": budget,
        "level": level,
        "choices": rollups.choices(),
        "carried": carried,
        "teams": Team.objects.all(),
        "team": team,
        "heatmaps": [
            Heatmap(testid, title, charts.heatmap(title, staffing.DAYS, hours, values, **options))
            for testid, title, values, options in (
                (
                    "staffing-heatmap",
                    "Operators needed per hour of the week (UTC)",
                    [[c.needed for c in row] for row in budget.cells],
                    {
                        "flagged": under,
                        "notes": notes,
                        "unit": "operators needed",
                        "legend": "Red outline: fewer operators worked than needed.",
                    },
                ),
                (
                    "arrivals-heatmap",
                    "Checkpoints opened per hour of the week (UTC, average per week)",
                    [[c.arrivals_per_hour for c in row] for row in budget.cells],
                    {"fmt": lambda v: f"{v:.2f}", "unit": "checkpoints opened"},
                ),
                (
                    "worked-heatmap",
                    "Operators who worked per hour of the week (UTC, average per week)",
                    [[c.worked for c in row] for row in budget.cells],
                    {"fmt": lambda v: f"{v:.1f}", "unit": "operators"},
                ),
            )
        ],
        "under": [(staffing.DAYS[d], h, budget.cells[d][h]) for d, h in budget.under_staffed],
        "query": urlencode(filters.as_query()),
    }
    return render(request, "console/staffing.html", context)
