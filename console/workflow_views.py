"""The workflow page (trajectory, checkpoints, decisions, events, replays, forks) and the navigation search.

Large trajectories stay readable and bounded: the steps come a page at a time
(``STEPS_PER_PAGE``), every input and output is collapsed until opened and
clipped at ``pretty_json``'s limit, and the event log shows its latest entries.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET

from workflows.models import Checkpoint, Decision, Workflow

from .roles import READERS, role_required
from .views import _render

STEPS_PER_PAGE = 50
EVENTS_SHOWN = 200
SEARCH_RESULTS = 50


@role_required(*READERS)
@require_GET
def workflow_page(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = get_object_or_404(Workflow.objects.select_related("agent", "owner"), pk=pk)
    steps = workflow.steps.order_by("seq")
    paginator = Paginator(steps, STEPS_PER_PAGE)
    page_number = request.GET.get("page")
    seq = request.GET.get("seq", "")
    if seq.isdigit():  # jump to the page that holds step <seq>
        page_number = steps.filter(seq__lt=int(seq)).count() // STEPS_PER_PAGE + 1
    page = paginator.get_page(page_number)
    checkpoints = list(workflow.checkpoints.select_related("assignee", "runbook").order_by("-opened_at"))
    decisions = (Decision.objects.filter(checkpoint__workflow=workflow)
                 .select_related("decided_by", "approved_by", "new_owner").order_by("-decided_at"))
    events = list(workflow.events.select_related("actor_user", "actor_agent").order_by("-at", "-pk")[:EVENTS_SHOWN])
    context = {
        "workflow": workflow, "page": page, "steps": page.object_list, "step_count": paginator.count,
        "checkpoints": checkpoints, "open_checkpoint": next((c for c in checkpoints if c.status != Checkpoint.Status.RESOLVED), None),
        "decisions": decisions, "events": events[::-1], "events_clipped": len(events) == EVENTS_SHOWN,
        "highlight": int(seq) if seq.isdigit() else None,
    }
    return _render(request, "console/workflow.html", context, partials=("trajectory",))


@role_required(*READERS)
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    """Find a workflow by external id, title, agent or id; one exact hit opens its page."""
    text = request.GET.get("q", "").strip()
    results = list(Workflow.objects.matching(text)[:SEARCH_RESULTS + 1])
    by_external_id = [w for w in results if w.external_id.lower() == text.lower()]
    only = by_external_id if len(by_external_id) == 1 else results if len(results) == 1 else []
    if only:  # the ticket a customer quotes names one workflow: go straight to it
        return redirect("workflow", pk=only[0].pk)
    return _render(request, "console/search.html", {
        "q": text, "search_query": text, "results": results[:SEARCH_RESULTS], "more": len(results) > SEARCH_RESULTS})
