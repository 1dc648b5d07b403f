"""The workflow page (trajectory, checkpoints, decisions, events, replays, forks) and the navigation search.

Large trajectories stay readable and bounded: the steps come a page at a time
(``STEPS_PER_PAGE``), every input and output is collapsed until opened and
clipped at ``pretty_json``'s limit, and the event log shows its latest entries.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from workflows.models import (
    Agent,
    Checkpoint,
    Conflict,
    Decision,
    Drill,
    Incident,
    ReplayRun,
    Workflow,
    fork_workflow,
)
from workflows.models.lineage import committed_before_fork
from workflows.models.workflows import workflow_id_in

from ..forms import ForkForm, error_text
from ..roles import ACTORS, READERS, can_act, role_required, signed_in
from .checkpoints import replay_offer
from .htmx import _render

STEPS_PER_PAGE = 50
EVENTS_SHOWN = 200
SEARCH_RESULTS = 50


@role_required(*READERS)
@require_GET
def workflow_page(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = get_object_or_404(Workflow.objects.select_related("agent", "owner"), pk=pk)
    steps = workflow.steps.order_by("seq")
    paginator = Paginator(steps, STEPS_PER_PAGE)
    page_number: str | int | None = request.GET.get("page")
    seq = request.GET.get("seq", "")
    if seq.isdigit():  # jump to the page that holds step <seq>
        page_number = steps.filter(seq__lt=int(seq)).count() // STEPS_PER_PAGE + 1
    page = paginator.get_page(page_number)
    checkpoints = list(workflow.checkpoints.select_related("assignee", "runbook").order_by("-opened_at"))
    decisions = (
        Decision.objects.filter(checkpoint__workflow=workflow)
        .select_related("decided_by", "approved_by", "new_owner")
        .order_by("-decided_at")
    )
    shown = workflow.events.all()
    if not Drill.known_to(signed_in(request), workflow):  # an unannounced drill says nothing yet
        shown = shown.exclude(verb__in=Drill.TELLING_VERBS)
    events = list(shown.select_related("actor_user", "actor_agent").order_by("-at", "-pk")[:EVENTS_SHOWN])
    context = {
        "workflow": workflow,
        "page": page,
        "steps": page.object_list,
        "step_count": paginator.count,
        "page_range": paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1),
        "checkpoints": checkpoints,
        "open_checkpoint": next((c for c in checkpoints if c.status != Checkpoint.Status.RESOLVED), None),
        "decisions": decisions,
        "events": events[::-1],
        "events_clipped": len(events) == EVENTS_SHOWN,
        "highlight": int(seq) if seq.isdigit() else None,
        "replays": workflow.replays.select_related("requested_by")[:50],
        "forks": workflow.forks.order_by("pk")[:50],
        "fork_why_not": workflow.agent.cannot(Agent.Capability.FORK),
        "fork_earlier": committed_before_fork(workflow, 1),
        "fork_edits": workflow.agent.fork_edits or [],
        **replay_offer(request, workflow, checkpoints[0] if checkpoints else None),
    }
    return _render(request, "console/workflow.html", context, partials=("trajectory",))


@role_required(*READERS)
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    """Find a workflow by external id, title, agent or id; one exact hit opens its page."""
    text = request.GET.get("q", "").strip()
    results = list(Workflow.objects.matching(text)[: SEARCH_RESULTS + 1])
    by_external_id = [w for w in results if w.external_id.lower() == text.lower()]
    by_id = [w for w in results if w.pk == workflow_id_in(text)]
    only = (
        by_external_id
        if len(by_external_id) == 1
        else []
        if by_external_id
        else by_id or (results if len(results) == 1 else [])
    )
    incidents = list(Incident.objects.matching(text)[:SEARCH_RESULTS])
    if len(incidents) == 1 and text.lower().startswith("incident") and not by_external_id:
        return redirect("incident", pk=incidents[0].pk)  # "incident 12": the one asked for by name
    if only and not incidents:  # the ticket a customer quotes names one workflow: go straight to it
        return redirect("workflow", pk=only[0].pk)
    return _render(
        request,
        "console/search.html",
        {
            "q": text,
            "search_query": text,
            "results": results[:SEARCH_RESULTS],
            "more": len(results) > SEARCH_RESULTS,
            "incidents": incidents,
        },
    )


# --- replays -------------------------------------------------------------------------------


class ReplayForm(forms.Form):
    from_seq = forms.IntegerField(min_value=1)
    to_seq = forms.IntegerField(min_value=1)
    checkpoint = forms.IntegerField(required=False)


@role_required(*ACTORS)
@require_POST
def request_replay(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = get_object_or_404(Workflow.objects.select_related("agent"), pk=pk)
    form = ReplayForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the first and the last step of the range to replay.")
        return redirect("workflow", pk=pk)
    data = form.cleaned_data
    checkpoint = workflow.checkpoints.filter(pk=data["checkpoint"]).first() if data["checkpoint"] else None
    try:
        run = ReplayRun.request(
            workflow, from_seq=data["from_seq"], to_seq=data["to_seq"], by=request.user, checkpoint=checkpoint
        )
    except (ValueError, Conflict) as exc:
        messages.error(request, f"Replay not started: {exc}")
        return redirect("workflow", pk=pk)
    messages.success(request, f"Replay of steps {run.from_seq}..{run.to_seq} asked for; the runtime is working on it.")
    return redirect("replay", pk=run.pk)


@role_required(*READERS)
@require_GET
def replay_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Recorded vs replayed, side by side: the first divergence on top, downstream steps marked."""
    run = get_object_or_404(ReplayRun.objects.select_related("workflow__agent", "requested_by", "agent"), pk=pk)
    rows = run.comparison or []
    first = next((r for r in rows if r.get("verdict") == "diverged"), None)
    history = list(run.workflow.replays.select_related("requested_by", "agent")[:20])
    return _render(
        request,
        "console/replay.html",
        {
            "run": run,
            "workflow": run.workflow,
            "rows": rows,
            "first": first,
            "history": history,
            "history_active": any(not r.is_finished for r in history),
            "can_act": can_act(request.user),
        },
        partials=("replay-result",),
    )


@role_required(*ACTORS)
@require_POST
def cancel_replay(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ReplayRun, pk=pk)
    if run.cancel(by=request.user):
        messages.success(request, "Replay cancelled; results that arrive later are refused.")
    else:
        messages.error(
            request, f"Nothing to cancel: this replay has already finished ({run.get_status_display().lower()})."
        )
    return redirect("replay", pk=pk)


# --- forks -------------------------------------------------------------------------------------


@role_required(*ACTORS)
@require_POST
def fork(request: HttpRequest, pk: int) -> HttpResponse:
    """Restart from step k as a new workflow; its decision takes the resume path (four eyes, delivery, audit)."""
    workflow = get_object_or_404(Workflow.objects.select_related("agent"), pk=pk)
    form = ForkForm(request.POST, earlier=committed_before_fork(workflow, 1))
    if not form.is_valid():
        messages.error(request, "Not forked: " + error_text(form))
        return redirect("workflow", pk=pk)
    data = form.cleaned_data
    try:
        decision = fork_workflow(
            workflow,
            from_seq=data["from_seq"],
            by=signed_in(request),
            reason=data["reason"],
            edited_input=data["edited_input"],
            money_confirmed=data["money_confirmed"],
            repeats_confirmed=data["repeat"],
        )
    except (ValueError, Conflict) as exc:
        messages.error(request, f"Not forked: {exc}")
        return redirect("workflow", pk=pk)
    messages.success(request, f"Forked from step {data['from_seq']}: decision {decision.status}.")
    return redirect("workbench", pk=decision.checkpoint_id)
