"""The checkpoint workbench and every action taken on a checkpoint or its decision: claim, comment, bulk
claim or assign from the queue, release, assign, decide, approve, reject; and completing handed-off work.

The page and its partials go through ``views.htmx``: actions redirect back, messages ride in ``HX-Trigger``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Max, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from workflows.models import (
    Action,
    Agent,
    Checkpoint,
    Comment,
    Conflict,
    Decider,
    Decision,
    Drill,
    Event,
    Step,
    Team,
    Workflow,
)
from workflows.models.lineage import lineage_effects

from ..forms import AssignForm, CommentForm, CompleteForm, DecisionForm, RejectForm, error_text
from ..roles import READERS, can_act, is_admin, operator_required, role_required, signed_in
from ..trajectory import render_steps

if TYPE_CHECKING:
    from workflows.models.base import Operator
from .htmx import _back, _htmx, _render

WORKBENCH_PARTIALS = ("workbench-live", "workbench-actions", "decision-status")
WORKBENCH_STEPS = 50  # the trajectory around the interruption; the workflow page pages through all of it
AFTER_THE_STOP = 10  # of those, at most this many after the step the workflow stopped at
WORKBENCH_EVENTS = 50  # the latest entries of the event log; the workflow page shows 200


@dataclass(frozen=True)
class TrajectoryWindow:
    """The steps the workbench shows, and how many it leaves to the workflow page on either side."""

    steps: list[Step]
    total: int
    earlier: int
    later: int
    last_seq_overall: int | None = None  # the trajectory's last step, in the window or not

    @property
    def first_seq(self) -> int | None:
        return self.steps[0].seq if self.steps else None

    @property
    def last_seq(self) -> int | None:
        return self.steps[-1].seq if self.steps else None


def _trajectory_window(workflow: Workflow, checkpoint: Checkpoint) -> TrajectoryWindow:
    """All steps of a short trajectory; of a long one, the ``WORKBENCH_STEPS`` around the stop.

    The window reaches back from the step the checkpoint stopped at (the last step when it names
    none) and shows up to ``AFTER_THE_STOP`` of what happened after it, so the page costs the same
    for 50 steps or 5,000: one aggregate counts the trajectory (all of it, up to the stop, its last
    seq), then one read takes what follows the stop and one what leads to it."""
    steps = workflow.steps.order_by("seq")
    up_to_stop = Q(seq__lte=checkpoint.at_seq) if checkpoint.at_seq else Q()
    counted = steps.order_by().aggregate(total=Count("pk"), to_stop=Count("pk", filter=up_to_stop), last=Max("seq"))
    total: int = counted["total"]
    if total <= WORKBENCH_STEPS:
        return TrajectoryWindow(list(steps), total, 0, 0, counted["last"])
    anchor = checkpoint.at_seq or counted["last"] or 0
    after = list(steps.filter(seq__gt=anchor)[:AFTER_THE_STOP])
    before = list(steps.filter(seq__lte=anchor).order_by("-seq")[: WORKBENCH_STEPS - len(after)])[::-1]
    if len(before) + len(after) < WORKBENCH_STEPS and after:  # the stop is near the start: fill from after
        after = list(steps.filter(seq__gt=anchor)[: WORKBENCH_STEPS - len(before)])
    window = before + after
    earlier = counted["to_stop"] - len(before)  # the window starts at the first of ``before``, or after the stop
    return TrajectoryWindow(window, total, earlier, total - earlier - len(window), counted["last"])


def _workbench_version(checkpoint: Checkpoint) -> str:
    """Every change the workbench shows writes an Event of the workflow (transitions, steps, decisions,
    deliveries, SLA records, comments): the latest one's id is the version of the page. A runbook edit is
    no event of the workflow: its current version joins in, so the "newer version" notice appears live."""
    event = checkpoint.workflow.events.order_by("-pk").values_list("pk", flat=True).first() or 0
    runbook = checkpoint.runbook
    return f"{event}.{runbook.current_version_id or 0}" if runbook is not None else str(event)


@role_required(*READERS)
@require_GET
def workbench(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.for_workbench(), pk=pk)
    htmx = _htmx(request)
    if htmx and htmx.target == "workbench-live" and request.GET.get("v") == _workbench_version(checkpoint):
        return HttpResponse(status=204)  # the poll's answer while nothing changed: no swap, nothing lost
    return _workbench(request, checkpoint)


class ReplayOffer(TypedDict):
    replay_why_not: str
    can_act: bool
    replay_from: int
    replay_to: int
    replay_max: int
    replay_checkpoint: Checkpoint | None
    last_seq: int


def replay_offer(
    request: HttpRequest, workflow: Workflow, checkpoint: Checkpoint | None, *, last: int | None = None
) -> ReplayOffer:
    """What the replay form needs: whether the agent can replay (and why not), and a suggested range. ``last``
    is the trajectory's last seq when the caller read it already."""
    if last is None:
        last = workflow.steps.order_by("-seq").values_list("seq", flat=True).first() or 0
    stop = min(checkpoint.at_seq or last, last) if checkpoint else last
    return {
        "replay_why_not": workflow.agent.cannot(Agent.Capability.REPLAY),
        "can_act": can_act(request.user),
        "replay_from": max(1, stop - 4),
        "replay_to": stop,
        "replay_max": settings.REPLAY_MAX_STEPS,
        "replay_checkpoint": checkpoint,
        "last_seq": last,
    }


def _workbench(
    request: HttpRequest,
    checkpoint: Checkpoint,
    *,
    form: DecisionForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    user, workflow = request.user, checkpoint.workflow
    form = form or DecisionForm(checkpoint=checkpoint)
    # The log shows the latest WORKBENCH_EVENTS (one more says whether it is clipped); who holds it and where it
    # returns to are asked of the checkpoint's own events, however many steps came after them.
    shown = workflow.events.all()
    if not Drill.known_to(signed_in(request), workflow, checkpoint):  # an unannounced drill says nothing yet
        shown = shown.exclude(verb__in=Drill.TELLING_VERBS)
    events = list(shown.select_related("actor_user", "actor_agent").order_by("-at", "-pk")[: WORKBENCH_EVENTS + 1])
    about = checkpoint.events.select_related("actor_user", "actor_agent").order_by("-pk")
    trajectory = _trajectory_window(workflow, checkpoint)
    steps = trajectory.steps
    decision = checkpoint.decisions.select_related("decided_by", "approved_by", "new_owner").first()
    acting = can_act(user)
    versions = checkpoint.runbook_versions()  # its own and, for a fork, the checkpoints' it came from
    context = {
        "checkpoint": checkpoint,
        "workflow": workflow,
        "steps": steps,
        "trajectory": trajectory,
        "steps_html": render_steps(steps, stop_seq=checkpoint.at_seq),
        "events": events[:WORKBENCH_EVENTS][::-1],
        "events_clipped": len(events) > WORKBENCH_EVENTS,
        "comments": {
            c.pk: c
            for c in workflow.comments.filter(
                pk__in=[e.data.get("comment") for e in events if e.verb == Event.Verb.COMMENTED]
            )
        },
        "ghost_stop": checkpoint.at_seq is not None
        and not trajectory.later
        and checkpoint.at_seq > (steps[-1].seq if steps else 0),
        "holder_event": _latest(events, about, checkpoint, [Event.Verb.CLAIMED, Event.Verb.ASSIGNED])
        if checkpoint.assignee_id
        else None,
        "decision": decision,
        "decision_error": error,
        "can_act": acting,
        "can_approve": acting and decision is not None and decision.may_be_approved_by(user),
        "can_decide": acting and checkpoint.may_be_decided_by(user),
        "form": form,
        "assign_form": AssignForm() if acting else None,
        "transfer_teams": Team.objects.exclude(checkpoints=checkpoint) if acting else [],
        "actions": [
            a for a in Action if all(v.allows(a) for v in versions) and (a != Action.FAILOVER or form.standbys)
        ],
        "lineage_effects": lineage_effects(checkpoint),
        "repeated": form.repeated,
        "bound_by": versions[1:],
        "four_eyes_on_money": any(v.requires_four_eyes or v.four_eyes_on_every_resume for v in versions),
        "four_eyes_on_every_resume": any(v.four_eyes_on_every_resume for v in versions),
        "failover_why_not": ""
        if form.standbys
        else (f"no other active agent advertises failover for {workflow.kind} workflows."),
        "returns_to": _returns_to(checkpoint, _latest(events, about, checkpoint, [Event.Verb.OPENED])),
        "money_check": (money := checkpoint.money_check()),
        "money_reasons": money.reasons,
        "money": bool(money),
        "version": _workbench_version(checkpoint),
        "live": not (workflow.is_terminal and checkpoint.status == Checkpoint.Status.RESOLVED),
        "since": None if checkpoint.clock_runs else checkpoint.since_interruption(),
        **replay_offer(request, workflow, checkpoint, last=trajectory.last_seq_overall or 0),
    }
    return _render(request, "console/workbench.html", context, partials=WORKBENCH_PARTIALS, status=status)


def _latest(
    events: list[Event], about: QuerySet[Event], checkpoint: Checkpoint, verbs: list[Event.Verb]
) -> Event | None:
    """The checkpoint's latest event with one of ``verbs``: among the newest events the page read already
    (newest first) when it is there, else one indexed read of the checkpoint's own events."""
    found = next((e for e in events if e.checkpoint_id == checkpoint.pk and e.verb in verbs), None)
    return found or about.filter(verb__in=verbs).first()


def _returns_to(checkpoint: Checkpoint, opened: Event | None) -> str | None:
    """The owner the workflow had when it was interrupted (recorded on "opened"), else today's default."""
    if opened and "owner" in opened.data:
        recorded: str | None = opened.data["owner"]  # None: it had no owner then
        return recorded
    owner = checkpoint.workflow.owner or checkpoint.workflow.agent.owner
    return owner.get_username() if owner else None


def _workbench_url(checkpoint: Checkpoint) -> str:
    return reverse("workbench", args=[checkpoint.pk])


def _holder_message(checkpoint: Checkpoint, user: Operator) -> str:
    """Why a claim lost, naming who has the checkpoint."""
    checkpoint.refresh_from_db()
    if checkpoint.status == Checkpoint.Status.CLAIMED and checkpoint.assignee:
        if checkpoint.assignee_id == user.pk:
            return "You already hold this checkpoint."
        return f"{checkpoint.assignee.get_username()} has already claimed this checkpoint."
    return Decider(checkpoint).conflict_message()


@operator_required
@require_POST
def claim(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("assignee"), pk=pk)
    if checkpoint.claim(by=request.user):
        messages.success(
            request,
            f"You claimed “{checkpoint.workflow.title}”. Changed your mind? "
            "“Undo claim” is on the row and the workbench for two minutes.",
        )
    else:
        messages.error(request, _holder_message(checkpoint, signed_in(request)))
    return _back(request, _workbench_url(checkpoint))


@role_required(*READERS)
@require_POST
def comment(request: HttpRequest, pk: int) -> HttpResponse:
    """An internal comment on the checkpoint (markdown; @username notifies them in the console)."""
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("workflow"), pk=pk)
    form = CommentForm(request.POST)
    if form.is_valid():
        posted = Comment.post(checkpoint=checkpoint, author=request.user, body=form.cleaned_data["body"])
        told = (
            f" {', '.join('@' + m for m in posted.mentions)} will see it in their notifications."
            if posted.mentions
            else ""
        )
        messages.success(request, "Comment added." + told)
    else:
        messages.error(request, error_text(form))
    return _back(request, _workbench_url(checkpoint))


BULK_LIMIT = 200


@operator_required
@require_POST
def bulk(request: HttpRequest) -> HttpResponse:
    """Claim, or assign to one operator, the rows selected on the queue (``x``); each row is its own
    compare-and-set, so a row someone else took meanwhile is reported, never overwritten."""
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()][:BULK_LIMIT]
    checkpoints = list(Checkpoint.objects.filter(pk__in=ids).select_related("assignee", "workflow"))
    if not checkpoints:
        messages.error(request, "Select rows first: x selects the row under the cursor.")
        return _back(request, reverse("queue"))
    if request.POST.get("bulk") == "assign":
        form = AssignForm(request.POST)
        if not form.is_valid():
            messages.error(request, error_text(form))
            return _back(request, reverse("queue"))
        to = form.cleaned_data["to"]
        won = [c for c in checkpoints if c.assign(to=to, by=request.user, note=form.cleaned_data["note"])]
        done = f"Assigned {len(won)} to {to.get_username()}"
    else:
        won = [c for c in checkpoints if c.claim(by=request.user)]
        done = f"Claimed {len(won)}"
    lost = [c for c in checkpoints if c not in won]
    (messages.success if not lost else messages.warning)(
        request,
        done
        + (
            f"; {len(lost)} not: " + "; ".join(_holder_message(c, signed_in(request)) for c in lost[:5])
            if lost
            else "."
        ),
    )
    return _back(request, reverse("queue"))


@operator_required
@require_POST
def release(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint, pk=pk)
    if checkpoint.assignee_id != request.user.pk and not is_admin(request.user):
        messages.error(request, "Only the operator who holds a checkpoint, or an admin, can release it.")
    elif checkpoint.release(by=request.user):
        messages.success(request, "Released: the checkpoint is back on the queue, unassigned.")
    else:
        messages.error(request, Decider(checkpoint).conflict_message())
    return _back(request, _workbench_url(checkpoint))


@operator_required
@require_POST
def assign(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint, pk=pk)
    form = AssignForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
    elif not checkpoint.may_reassign(request.user):
        messages.error(
            request,
            f"{checkpoint.assignee.get_username() if checkpoint.assignee else 'Someone'} holds "
            "this checkpoint: only they (by releasing or assigning it) or an admin can give it "
            "to someone else.",
        )
    elif checkpoint.assign(to=form.cleaned_data["to"], by=request.user, note=form.cleaned_data["note"]):
        messages.success(request, f"Assigned to {form.cleaned_data['to'].get_username()}.")
    else:
        messages.error(request, Decider(checkpoint).conflict_message())
    return _back(request, _workbench_url(checkpoint))


@operator_required
@require_POST
def decide(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.for_workbench(), pk=pk)
    if request.POST.get("action") == "check":  # the no-JavaScript way to unlock resume: re-render, decide nothing
        return _workbench(request, checkpoint, form=DecisionForm(initial=request.POST.dict(), checkpoint=checkpoint))
    form = DecisionForm(request.POST, checkpoint=checkpoint)
    if not form.is_valid():
        return _workbench(request, checkpoint, form=form, status=422)
    try:
        decision = Decider(checkpoint).decide(by=signed_in(request), **form.decision_kwargs())
    except Conflict as exc:
        return _workbench(request, checkpoint, form=form, error=str(exc), status=409)
    except ValueError as exc:
        form.add_error(None, str(exc))
        return _workbench(request, checkpoint, form=form, status=422)
    messages.success(request, f"Decision recorded: {decision.get_action_display().lower()} ({decision.status}).")
    return redirect(_workbench_url(checkpoint))


@operator_required
@require_POST
def approve(request: HttpRequest, pk: int) -> HttpResponse:
    decision = get_object_or_404(Decision.objects.select_related("checkpoint"), pk=pk)
    if request.POST.get("reviewed") != "1":  # an approval is of what was read: the form's tick names it
        messages.error(
            request,
            "Nothing approved: tick that you have read what you approve (the money at "
            "stake, the resume state and the proposer's note) first.",
        )
    elif decision.approve(by=request.user):
        messages.success(request, "Approved: the decision is queued for delivery.")
    else:
        messages.error(request, decision.refusal(by=request.user))
    return _back(request, _workbench_url(decision.checkpoint))


@operator_required
@require_POST
def reject(request: HttpRequest, pk: int) -> HttpResponse:
    decision = get_object_or_404(Decision.objects.select_related("checkpoint"), pk=pk)
    form = RejectForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
        return _back(request, _workbench_url(decision.checkpoint))
    if decision.reject(by=request.user, note=form.cleaned_data["note"]):
        messages.success(request, f"Rejected: the checkpoint is back with {decision.decided_by.get_username()}.")
    else:
        messages.error(request, decision.refusal(by=request.user))
    return _back(request, _workbench_url(decision.checkpoint))


# --- my workflows ------------------------------------------------------------------


@operator_required
@require_POST
def complete_handoff(request: HttpRequest, pk: int) -> HttpResponse:
    """The new owner of handed-off work says it is done."""
    workflow = get_object_or_404(Workflow.objects.owned_by(request.user), pk=pk, status=Workflow.Status.HANDED_OFF)
    form = CompleteForm(request.POST)
    form.is_valid()
    # No Conflict here: a handed-off workflow has no unresolved checkpoint (only running ones pause).
    if workflow.finish(Workflow.Status.COMPLETED, form.cleaned_data.get("summary", ""), actor=request.user):
        messages.success(request, f"“{workflow.title}” is completed.")
    else:
        messages.error(request, f"Could not complete “{workflow.title}”: it changed meanwhile.")
    return redirect("mine")
