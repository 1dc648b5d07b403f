"""Recovery drills on the console (issue 26): TPMs and admins define, start and score them.

The domain is ``workflows.models.drills`` (what a drill is, who it picks, what it refuses) and
``workflows.drill_report`` (the scoring, with the dashboard's definitions); these views only compose them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_http_methods, require_POST

from workflows import drill_report as scoring
from workflows.models import Agent, Conflict, Drill

from .. import charts
from ..csv_export import stream_csv
from ..roles import REVIEWERS, role_required, signed_in

if TYPE_CHECKING:
    from workflows.models.base import Operator


class DrillForm(forms.ModelForm):  # type: ignore[type-arg]
    """A drill definition and when it runs; the model's ``clean`` refuses what may not run (no drill support,
    money, half a weekly rule)."""

    BY_HAND, ONCE, WEEKLY = "hand", "once", "weekly"
    when = forms.ChoiceField(
        choices=[(BY_HAND, "When I start it"), (ONCE, "Once, at a time"), (WEEKLY, "Every week (a recurring rule)")],
        initial=BY_HAND,
        required=False,
        widget=forms.RadioSelect,
        label="When",
    )  # none said: by hand
    start_at = forms.DateTimeField(
        required=False,
        label="At",
        help_text="Once: the time it starts (console time).",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )

    class Meta:
        model = Drill
        fields = [
            "name",
            "agent",
            "kind",
            "fault",
            "at_seq",
            "silent_minutes",
            "runs",
            "share_percent",
            "window_minutes",
            "announced",
            "when",
            "start_at",
            "repeat_weekday",
            "repeat_at",
            "team",
        ]
        widgets = {"repeat_at": forms.TimeInput(attrs={"type": "time"})}
        labels = {"repeat_weekday": "Every", "repeat_at": "At (local time)", "team": "In the calendar of"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = Agent.objects.filter(is_active=True)  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        when = data["when"] = data.get("when") or self.BY_HAND
        if when == self.ONCE:
            start_at = data.get("start_at")
            if start_at is None:
                self.add_error("start_at", "Say when it starts.")
            elif start_at <= timezone.now():
                self.add_error("start_at", "That time has passed: choose a time to come, or start it by hand.")
        if when == self.WEEKLY and (data.get("repeat_weekday") is None or data.get("repeat_at") is None):
            self.add_error("repeat_at", "A weekly drill needs a day and a time.")
        if when != self.WEEKLY:  # the rule's fields count only for a weekly drill
            for name in ("repeat_weekday", "repeat_at"):
                data[name] = None
                setattr(self.instance, name, None)
        return data

    def save_scheduled(self, by: Operator) -> Drill:
        """Save the definition and, unless it waits for a hand start, schedule it."""
        drill: Drill = self.save(commit=False)
        drill.created_by = by
        drill.save()
        when = self.cleaned_data["when"]
        if when == self.ONCE:
            drill.schedule(self.cleaned_data["start_at"], by=by)
        elif when == self.WEEKLY:
            drill.schedule(by=by)
        return drill


def _trend_chart(report: scoring.DrillReport) -> SafeString | None:
    if len(report.trend) < 2:
        return None
    labels = [f"{o.started_at:%d %b}" if o.started_at else f"#{o.drill_id}" for o in report.trend]
    lines = [
        charts.Line(label, [None if (v := o.medians[attr]) is None else v / 60 for o in report.trend])
        for label, attr in scoring.KEY_TIMES
    ]
    return charts.line_chart(
        "Key times per drill (median minutes)", labels, lines, fmt=lambda v: f"{v:.0f}", width=640, height=220
    )


@role_required(*REVIEWERS)
@require_http_methods(["GET", "POST"])
def drills(request: HttpRequest) -> HttpResponse:
    """The drills defined so far, and the form that defines one."""
    form = DrillForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        drill = form.save_scheduled(signed_in(request))
        if drill.recurs:
            messages.success(
                request,
                f"Drill “{drill.name}” runs {drill.rule_text}; the first at "
                f"{timezone.localtime(drill.next_run_at):%a %d %b %H:%M %Z}.",
            )
        elif drill.next_run_at:
            messages.success(request, f"Drill “{drill.name}” scheduled.")
        else:
            messages.success(request, f"Drill “{drill.name}” defined; start it when you are ready.")
        return redirect("drills")
    listed = list(
        Drill.objects.definitions()
        .select_related("agent", "team__calendar")
        .prefetch_related("occurrences")
        .order_by("-created_at", "-pk")[:100]
    )
    return render(request, "console/drills.html", {"form": form, "drills": listed}, status=422 if form.errors else 200)


@role_required(*REVIEWERS)
@require_POST
def start_drill(request: HttpRequest, pk: int) -> HttpResponseBase:
    drill = get_object_or_404(Drill.objects.select_related("agent"), pk=pk)
    try:
        if drill.recurs:  # a weekly rule runs once more now; its schedule stays
            occurrence = drill.start_occurrence(by=signed_in(request))
            started, drill = occurrence is not None, occurrence or drill
        else:
            started = drill.start(by=signed_in(request))
    except Conflict as exc:
        messages.error(request, str(exc))
        return redirect("drills")
    if started:
        messages.success(request, f"Drill “{drill.name}” started: it picks {drill.agent.name}'s new workflows.")
    else:
        messages.info(request, f"Drill “{drill.name}” is {drill.status}: it was not started again.")
    return redirect("drills")


@role_required(*REVIEWERS)
@require_POST
def end_drill(request: HttpRequest, pk: int) -> HttpResponseBase:
    drill = get_object_or_404(Drill, pk=pk)
    if drill.end(by=signed_in(request)):
        messages.success(request, f"Drill “{drill.name}” ended: it picks no more workflows.")
    return redirect("drills")


@role_required(*REVIEWERS)
@require_http_methods(["GET"])
def drill_report(request: HttpRequest, pk: int) -> HttpResponseBase:
    """The drill's score; ``?format=csv`` or ``?format=md`` downloads it."""
    drill = get_object_or_404(Drill.objects.select_related("agent"), pk=pk)
    latest = drill.occurrences.filter(started_at__isnull=False).order_by("-started_at", "-pk").first()
    if drill.recurs and latest is not None:  # a weekly rule runs nothing itself: its latest occurrence reports
        return redirect(f"{reverse('drill_report', args=[latest.pk])}?{request.GET.urlencode()}".rstrip("?"))
    report = scoring.score(drill)
    export = request.GET.get("format")
    if export == "csv":
        return stream_csv(scoring.csv_rows(report), f"drill-{drill.pk}.csv")
    if export == "md":
        response = HttpResponse(scoring.markdown(report), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="drill-{drill.pk}.md"'
        return response
    return render(
        request, "console/drill_report.html", {"drill": drill, "report": report, "trend_chart": _trend_chart(report)}
    )
