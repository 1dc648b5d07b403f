"""The TPM breach review: every checkpoint that breached its decision target in a period, filtered in the
URL, with the reason a TPM records, and the same rows as CSV.

Rows are read through the ``sla_breached`` partial index on ``breached_at`` (newest first, keyset pages),
so the page costs the same with a million checkpoints behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Required, TypedDict, cast

from django import forms
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from console.keyset import KeysetPager
from workflows import metrics, sla_figures, timings
from workflows.models import Agent, BreachReason, Checkpoint, Runbook, Team

from .. import charts
from ..csv_export import Cell, stream_csv
from ..forms import error_text
from ..roles import REVIEWERS, role_required, signed_in

PAGE = 50
DEFAULT_DAYS = 30


class BreachFilters(TypedDict, total=False):
    """The review's filters as BreachFilterForm cleans them: the period always, the rest when given."""

    start: Required[date]
    end: Required[date]
    runbook: str
    reason: str
    agent: str
    kind: str
    assignee: str
    team: str
    before: str
    drills: str


class Card(TypedDict):
    """A figure's card: this period's value against the previous period's, and whether it got better."""

    slug: str
    label: str
    definition: str
    value: str
    detail: str
    before: str
    trend: str | None
    better: bool | None


class BreachFilterForm(forms.Form):
    """The review's query string; a bad value is dropped so an old link still renders."""

    start = forms.DateField(required=False)
    end = forms.DateField(required=False)
    runbook = forms.CharField(max_length=80, required=False)
    reason = forms.CharField(max_length=100, required=False, help_text="A breach reason's name, or 'none'.")
    agent = forms.CharField(max_length=64, required=False)
    kind = forms.CharField(max_length=100, required=False)
    assignee = forms.CharField(max_length=150, required=False)
    team = forms.CharField(max_length=60, required=False, help_text="A team's slug.")
    before = forms.CharField(max_length=40, required=False)
    drills = forms.ChoiceField(choices=[("", "left out"), (metrics.DRILLS_INCLUDED, "included")], required=False)

    def values(self) -> BreachFilters:
        """The valid values (each field cleans to its key's type), the period defaulting to the last 30 days."""
        self.is_valid()
        data = cast(BreachFilters, {k: v for k, v in self.cleaned_data.items() if v not in (None, "")})
        today = timezone.now().date()
        data.setdefault("end", today)
        data.setdefault("start", data["end"] - timedelta(days=DEFAULT_DAYS - 1))
        return data

    @staticmethod
    def span(data: BreachFilters) -> tuple[datetime, datetime]:
        """The period as [start of the first day, start of the day after the last) in UTC."""
        return (
            datetime.combine(data["start"], time.min, tzinfo=UTC),
            datetime.combine(data["end"] + timedelta(days=1), time.min, tzinfo=UTC),
        )

    def rows(self) -> QuerySet[Checkpoint]:
        data = self.values()
        since, until = self.span(data)
        qs = Checkpoint.objects.filter(breached_at__isnull=False, breached_at__gte=since, breached_at__lt=until)
        qs = metrics.in_scope(qs, data.get("drills", ""), to_workflow="workflow__")  # production by default
        for field, lookup in (
            ("runbook", "runbook__slug"),
            ("agent", "workflow__agent__name"),
            ("kind", "workflow__kind"),
            ("assignee", "assignee__username"),
            ("team", "team__slug"),
        ):
            if value := data.get(field):
                qs = qs.filter(**{lookup: value})
        if data.get("reason") == "none":
            qs = qs.filter(breach_reason__isnull=True)
        elif data.get("reason"):
            qs = qs.filter(breach_reason__name=data["reason"])
        return qs.select_related("workflow__agent", "assignee", "runbook", "breach_reason")


# The review's pages, newest breach first (the ``sla_breached`` index); its ``before`` parameter names the
# last row seen, and the next page is what comes after it in this order (breached before it).
BREACH_PAGES = KeysetPager("breached_at", descending=True)


def overrun(checkpoint: Checkpoint, now: datetime | None = None) -> timedelta:
    """How far past its due time it went: to the decision, or to now while it still waits."""
    end = checkpoint.clock_stopped_at or (now or timezone.now())
    return max(end - checkpoint.due_at, timedelta(0))


@role_required(*REVIEWERS)
@require_GET
def breach_review(request: HttpRequest) -> HttpResponseBase:
    form = BreachFilterForm(request.GET)
    data = form.values()
    rows = form.rows().order_by("-breached_at", "-pk")
    if request.GET.get("format") == "csv":
        return _csv(rows, data)
    pager = BREACH_PAGES.page(rows, size=PAGE, after=data.get("before"))
    # The rows carry their overrun for the template; Checkpoint does not declare it (as it does workbench_url).
    page: list[Any] = pager.rows
    now = timezone.now()
    for c in page:
        c.overrun = overrun(c, now)
    query = request.GET.copy()
    query.pop("before", None)
    next_query = query.copy()
    if pager.has_next:
        next_query["before"] = BREACH_PAGES.cursor(page[-1])
    context = {
        "rows": page,
        "filters": data,
        "query": query.urlencode(),
        "next_url": "?" + next_query.urlencode() if pager.has_next else "",
        "first_url": "?" + query.urlencode() if data.get("before") else "",
        "reasons": BreachReason.objects.filter(is_active=True),
        "all_reasons": BreachReason.objects.all(),
        "runbooks": Runbook.objects.order_by("slug").values_list("slug", flat=True)[:200],
        "agents": Agent.objects.order_by("name").values_list("name", flat=True)[:200],
        "teams": Team.objects.all(),
        "csv_url": "?" + _with(query, format="csv"),
        **_figures(data, form.rows(), query),
    }
    return render(request, "console/breach_review.html", context)


# --- cards and charts -----------------------------------------------------------------------------------

MET, BREACHED = charts.PALETTE[1], charts.PALETTE[4]  # green, red
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
BY = {  # chart title, the lookup on a breached checkpoint, and the review filter a bar drills down to
    "runbook": ("Breaches by runbook", "runbook__slug", "runbook"),
    "reason": ("Breaches by recorded reason", "breach_reason__name", "reason"),
    "agent": ("Breaches by agent", "workflow__agent__name", "agent"),
    "kind": ("Breaches by workflow kind", "workflow__kind", "kind"),
    "team": ("Breaches by team", "team__slug", "team"),
}


def _share_card(slug: str, now: metrics.Share, before: metrics.Share) -> Card:
    trend = None if now.percent is None or before.percent is None else now.percent - before.percent
    return {
        "slug": slug,
        "label": now.label,
        "definition": now.definition,
        "value": "—" if now.percent is None else f"{now.percent:.1f} %",
        "detail": f"{now.part} of {now.whole}",
        "before": "—" if before.percent is None else f"{before.percent:.1f} %",
        "trend": None if trend is None else f"{trend:+.1f} pts",
        "better": None if not trend else trend > 0,
    }


def _timing_card(slug: str, now: timings.Timing, before: timings.Timing, definition: str) -> Card:
    def text(t: timings.Timing) -> str:
        if t.median is None:
            return "—"
        return f"{_seconds(t.median)} · p90 {_seconds(t.p90)}"

    better = None
    if now.median is not None and before.median is not None and now.median != before.median:
        better = now.median < before.median
    return {
        "slug": slug,
        "label": now.label,
        "definition": definition,
        "value": text(now),
        "detail": f"median of {now.count}",
        "before": text(before),
        "trend": None,
        "better": better,
    }


def _count_card(slug: str, label: str, now: int, before: int, definition: str) -> Card:
    return {
        "slug": slug,
        "label": label,
        "definition": definition,
        "value": f"{now:,}",
        "detail": "",
        "before": f"{before:,}",
        "trend": f"{now - before:+,}" if now != before else None,
        "better": None if now == before else now < before,
    }


def _seconds(value: float | None) -> str:
    from ..templatetags.console_tags import seconds_text

    return seconds_text(value)


def _figures(data: BreachFilters, breaches: QuerySet[Checkpoint], query: QueryDict) -> dict[str, object]:
    """The cards against the previous period of the same length, and the charts of the filtered breaches."""
    period = metrics.Filters(
        start=data["start"],
        end=data["end"],
        agent=data.get("agent", ""),
        kind=data.get("kind", ""),
        runbook=data.get("runbook", ""),
        team=data.get("team", ""),
        drills=data.get("drills", ""),
    )
    before = period.previous()
    activity, activity_before = sla_figures.sla_activity(period), sla_figures.sla_activity(before)
    cards = [
        _share_card("decision-met", sla_figures.decision_target_met(period), sla_figures.decision_target_met(before)),
        _share_card("claim-met", sla_figures.claim_target_met(period), sla_figures.claim_target_met(before)),
        _timing_card(
            "time-to-claim",
            timings.time_to_claim(period),
            timings.time_to_claim(before),
            "From a checkpoint opening to its first claim or assignment: median and 90th percentile "
            "of the checkpoints opened in the period.",
        ),
        _timing_card(
            "time-to-decision",
            timings.time_to_decision(period),
            timings.time_to_decision(before),
            "From a checkpoint opening to its first decision: median and 90th percentile of the "
            "checkpoints opened in the period.",
        ),
        _count_card(
            "escalations",
            "Escalations fired",
            activity["escalations"],
            activity_before["escalations"],
            "Escalation levels the sweep fired in the period (each level of each checkpoint once).",
        ),
        _count_card(
            "reminders",
            "Claim reminders",
            activity["reminders"],
            activity_before["reminders"],
            "Reminders sent to an operator holding a claim with no progress.",
        ),
        _count_card(
            "releases",
            "Claims released",
            activity["releases"],
            activity_before["releases"],
            "Claims the sweep released to the queue after no progress.",
        ),
    ]
    days, met, breached = sla_figures.met_and_breached_by_day(period)
    figures = {
        "over_time": charts.column_chart(
            "Decision target met vs breached, by day opened",
            [d.strftime("%d %b") for d in days],
            [charts.Line("met", met), charts.Line("breached", breached)],
            colours=(MET, BREACHED),
        )
    }
    for name, (title, lookup, param) in BY.items():
        bars = [
            charts.Bar(
                value or ("(not recorded)" if name == "reason" else "(none)"),
                n,
                href="?" + _with(query, **{param: value or "none"}) if value or name == "reason" else "",
            )
            for value, n in sla_figures.breaches_by(breaches, lookup)
        ]
        figures[f"by_{name}"] = charts.bar_chart(title, bars, width=640)
    figures["hour_of_week"] = charts.heatmap(
        "Breaches by hour of week (UTC)",
        WEEKDAYS,
        [f"{h:02d}" for h in range(24)],
        sla_figures.breaches_by_hour_of_week(breaches),
        unit="breaches",
    )
    return {"cards": cards, "charts": figures, "previous": {"start": before.start, "end": before.end}}


def _with(query: QueryDict, **changes: str) -> str:
    q = query.copy()
    for key, value in changes.items():
        q[key] = value
    return q.urlencode()


CSV_COLUMNS = (
    "checkpoint",
    "url",
    "workflow",
    "kind",
    "agent",
    "runbook",
    "opened_at",
    "due_at",
    "breached_at",
    "decided_at",
    "overrun_seconds",
    "owner",
    "escalation_levels_fired",
    "breach_reason",
    "breach_note",
)


def _csv(rows: QuerySet[Checkpoint], data: BreachFilters) -> StreamingHttpResponse:
    """The table with the same filters, every row (streamed), for a spreadsheet."""

    def lines() -> Iterator[list[Cell]]:
        yield list(CSV_COLUMNS)
        now = timezone.now()
        for c in rows.iterator(chunk_size=2000):
            yield [
                c.pk,
                reverse("workbench", args=[c.pk]),
                c.workflow.title,
                c.workflow.kind,
                c.workflow.agent.name,
                c.runbook.slug if c.runbook else "",
                c.opened_at.isoformat(),
                c.due_at.isoformat(),
                c.breached_at.isoformat() if c.breached_at else "",
                c.clock_stopped_at.isoformat() if c.clock_stopped_at else "",
                int(overrun(c, now).total_seconds()),
                c.assignee.get_username() if c.assignee else "",
                c.escalations_fired,
                c.breach_reason.name if c.breach_reason else "",
                c.breach_note,
            ]

    return stream_csv(lines(), f"breaches-{data['start']:%Y%m%d}-{data['end']:%Y%m%d}.csv")


class ExplainForm(forms.Form):
    reason = forms.ModelChoiceField(queryset=BreachReason.objects.filter(is_active=True), required=False)
    note = forms.CharField(max_length=2000, required=False, strip=True)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not data.get("reason") and not data.get("note"):
            raise forms.ValidationError("Choose a reason or write one.")
        return data


@role_required(*REVIEWERS)
@require_POST
def explain_breach(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint, pk=pk)
    form = ExplainForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
    elif checkpoint.explain_breach(
        reason=form.cleaned_data["reason"], note=form.cleaned_data["note"], by=signed_in(request)
    ):
        messages.success(request, f"Breach reason recorded for checkpoint {checkpoint.pk}.")
    else:
        messages.error(request, "This checkpoint did not breach its SLA.")
    back = request.POST.get("next", "")
    return redirect(reverse("breach_review") + (back if back.startswith("?") else ""))
