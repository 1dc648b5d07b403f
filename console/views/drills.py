"""Recovery drills on the console (issue 26): TPMs and admins define, start and score them.

The domain is ``workflows.models.drills`` (what a drill is, who it picks, what it refuses) and
``workflows.drill_report`` (the scoring, with the dashboard's definitions); these views only compose them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from workflows import drill_report as scoring
from workflows.models import Agent, Conflict, Drill

from ..csv_export import stream_csv
from ..roles import REVIEWERS, role_required, signed_in


class DrillForm(forms.ModelForm):  # type: ignore[type-arg]
    """A drill definition; the model's ``clean`` refuses what may not run (no drill support, money)."""

    class Meta:
        model = Drill
        fields = ["name", "agent", "kind", "fault", "at_seq", "silent_minutes", "runs", "share_percent",
                  "window_minutes", "announced"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = Agent.objects.filter(is_active=True)  # type: ignore[attr-defined]


@role_required(*REVIEWERS)
@require_http_methods(["GET", "POST"])
def drills(request: HttpRequest) -> HttpResponse:
    """The drills defined so far, and the form that defines one."""
    form = DrillForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        drill = form.save(commit=False)
        drill.created_by = signed_in(request)
        drill.save()
        messages.success(request, f"Drill “{drill.name}” defined; start it when you are ready.")
        return redirect("drills")
    listed = Drill.objects.select_related("agent").order_by("-created_at", "-pk")[:100]
    return render(request, "console/drills.html", {"form": form, "drills": listed},
                  status=422 if form.errors else 200)


@role_required(*REVIEWERS)
@require_POST
def start_drill(request: HttpRequest, pk: int) -> HttpResponseBase:
    drill = get_object_or_404(Drill.objects.select_related("agent"), pk=pk)
    try:
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
    report = scoring.score(drill)
    export = request.GET.get("format")
    if export == "csv":
        return stream_csv(scoring.csv_rows(report), f"drill-{drill.pk}.csv")
    if export == "md":
        response = HttpResponse(scoring.markdown(report), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="drill-{drill.pk}.md"'
        return response
    return render(request, "console/drill_report.html", {"drill": drill, "report": report})
