"""Incidents: the list, the incident page (blast radius, timeline, members, hold), and the operator's
actions on them (open from a queue selection, merge, take a member out, status, commander, note,
hold and lift). The rules live on the models (workflows/models/incidents.py); the figures in
workflows/blast_radius.py."""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Count, Max, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from workflows import blast_radius
from workflows.models import Action, Agent, Checkpoint, Conflict, Event, Hold, Incident, Rollout
from workflows.models.evidence import unconfirmed_effects
from workflows.models.people import operators
from workflows.models.rollouts import ACTIVE as ROLLOUT_ACTIVE

from .. import postmortem as postmortems
from ..charts import Line, column_chart
from ..forms import choose_from, error_text
from ..roles import READERS, can_act, operator_required, role_required, signed_in
from .checkpoints import BULK_LIMIT
from .htmx import _back, _htmx, _render

MEMBERS_SHOWN = 200
TIMELINE_SHOWN = 300
INCIDENT_POLL_SECONDS = 3
INCIDENT_FRESHNESS_SECONDS = 60  # SLA exposure moves with time alone: an unchanged page renders once a minute


class HoldForm(forms.Form):
    kind = forms.CharField(required=False, max_length=100, help_text="Empty: every kind of the agent.")
    new_workflows = forms.ChoiceField(choices=Hold.NewWorkflows.choices, initial=Hold.NewWorkflows.REFUSE)
    note = forms.CharField(required=False, max_length=2000)


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Incident.Status.choices)


class CommanderForm(forms.Form):
    commander = forms.ModelChoiceField(queryset=operators(), required=False, to_field_name="username")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choose_from(self, "commander", operators())  # who may act now, not when the module was imported


class NoteForm(forms.Form):
    note = forms.CharField(max_length=2000, strip=True)


class MergeForm(forms.Form):
    other = forms.IntegerField(min_value=1, max_value=2_147_483_647, label="Incident number to merge into this one")


class RolloutForm(forms.Form):
    """One decision for the incident's members. A handoff names an operator or the human process taking the
    members over; a failover, the standby agent (``Rollout.start`` judges it against the members)."""

    action = forms.ChoiceField(choices=Action.choices)
    instructions = forms.CharField(max_length=10_000, required=False, strip=True)
    new_owner = forms.ModelChoiceField(
        queryset=operators().none(), to_field_name="username", required=False, label="Hand off to (an operator)"
    )
    handoff_to = forms.CharField(max_length=200, required=False, strip=True, label="or the process that takes over")
    standby = forms.ModelChoiceField(
        queryset=Agent.objects.none(), to_field_name="name", required=False, label="Fail over to (standby agent)"
    )
    canary_percent = forms.IntegerField(min_value=1, max_value=100, initial=5)
    per_minute = forms.IntegerField(min_value=1, max_value=10_000, initial=30)
    # Shown to people in percent and minutes; the rollout keeps a share and seconds.
    halt_percent = forms.IntegerField(
        min_value=1, max_value=100, required=False, label="Halt past (% of a wave failed)"
    )
    watch_minutes = forms.IntegerField(min_value=1, max_value=120, required=False, label="Watch each wave (minutes)")

    def __init__(self, *args: Any, incident: Incident, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choose_from(self, "new_owner", operators())  # who may act now, not when the module was imported
        able = [
            a.pk
            for a in Agent.objects.filter(is_active=True).order_by("name")
            if a.can(Agent.Capability.FAILOVER) and a.pk != incident.agent_id
        ]
        choose_from(self, "standby", Agent.objects.filter(pk__in=able).order_by("name"))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == Action.HANDOFF and not (data.get("new_owner") or data.get("handoff_to")):
            self.add_error("new_owner", "A handoff needs a new owner or the process that takes the members over.")
        if data.get("action") == Action.FAILOVER and not data.get("standby"):
            self.add_error("standby", "Choose the standby agent that takes the members over.")
        return data

    def terms(self) -> dict[str, Any]:
        """The cleaned fields as ``Rollout.start`` takes them (a halt share, a watch window in seconds)."""
        data = dict(self.cleaned_data)
        halt, watch = data.pop("halt_percent"), data.pop("watch_minutes")
        if halt is not None:  # left empty: the model's defaults (20 %, 10 minutes)
            data["halt_share"] = halt / 100
        if watch is not None:
            data["watch_seconds"] = watch * 60
        return data


def _incident(pk: int) -> Incident:
    return get_object_or_404(Incident.objects.select_related("agent", "commander", "opened_by", "merged_into"), pk=pk)


@role_required(*READERS)
@require_GET
def incident_rows(request: HttpRequest) -> HttpResponse:
    """The queue's incident rows, polled on their own."""
    return _render(request, "console/queue.html#incident-rows", {"incident_rows": blast_radius.queue_rows()})


@role_required(*READERS)
@require_GET
def incidents(request: HttpRequest) -> HttpResponse:
    shown = request.GET.get("status", "unresolved")
    rows = Incident.objects.select_related("agent", "commander").annotate(member_count=Count("members"))
    if shown == "unresolved":
        rows = rows.unresolved()
    elif shown in Incident.Status.values:
        rows = rows.filter(status=shown)
    return _render(
        request,
        "console/incidents.html",
        {"incidents": rows[:200], "shown": shown, "statuses": Incident.Status.choices},
    )


def _incident_version(incident: Incident) -> str:
    """Everything the incident page shows writes an Event: the incident's own trail (opened, joined, holds,
    notes, rollout waves), its rollouts' transitions, and its members' workflows (arrivals, decisions,
    deliveries, steps, outcomes). The latest such event's id, with the minute for the SLA exposure that
    moves with time alone, is the version of the page: two indexed aggregates, no render."""
    subjects = [f"incident:{incident.pk}", *(f"rollout:{pk}" for pk in incident.rollouts.values_list("pk", flat=True))]
    own = Event.objects.filter(subject__in=subjects).aggregate(latest=Max("pk"))["latest"] or 0
    members = (
        Event.objects.filter(workflow_id__in=incident.members.values("workflow_id")).aggregate(latest=Max("pk"))[
            "latest"
        ]
        or 0
    )
    return f"{max(own, members)}.{int(time.time() // INCIDENT_FRESHNESS_SECONDS)}"


@role_required(*READERS)
@require_GET
def incident(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    version, htmx = _incident_version(item), _htmx(request)
    if htmx and htmx.target == "incident-live" and request.GET.get("v") == version:
        return HttpResponse(status=204)  # the poll's answer while nothing changed: no render, no swap
    radius = blast_radius.for_incident(item)
    labels, counts = blast_radius.arrivals(item.members.all())
    user = signed_in(request)
    context = {
        "incident": item,
        "radius": radius,
        "timeline": blast_radius.timeline(item, limit=TIMELINE_SHOWN),
        "chart": column_chart("Arrivals per minute", labels, [Line("checkpoints", counts)]) if labels else "",
        "members": _first_members(item),
        "holds": Hold.objects.filter(Q(incident=item) | Q(agent=item.agent, status=Hold.Status.ACTIVE))
        .select_related("agent", "placed_by", "lifted_by")
        .distinct()
        if item.agent
        else Hold.objects.filter(incident=item).select_related("agent", "placed_by", "lifted_by"),
        "can_act": can_act(user),
        "hold_form": HoldForm(initial={"kind": item.kind}),
        "next_statuses": [s for s in Incident.Status if s in item.TRANSITIONS.get(item.status, set())],
        "operators": operators() if can_act(user) else [],
        "members_shown": MEMBERS_SHOWN,
        "rollouts": item.rollouts.select_related("started_by", "approved_by", "new_owner", "standby")[:5],
        "rollout_form": RolloutForm(incident=item),
        "version": version,
        "live": not item.is_resolved or item.rollouts.filter(status__in=ROLLOUT_ACTIVE).exists(),
        "poll_seconds": INCIDENT_POLL_SECONDS,
        **_gate_context(item),
    }
    return _render(request, "console/incident.html", context, partials=("incident-live",))


# What the members table reads of each member (console/incident.html): never the resume states.
MEMBER_COLUMNS = (
    "pk",
    "due_at",
    "status",
    "breached_at",
    "workflow__title",
    "workflow__external_id",
    "assignee__username",
)


def _first_members(item: Incident) -> QuerySet[Checkpoint]:
    """The members the page lists, by due time: chosen from their own narrow rows, then joined and read, so that
    10,000 members are not joined and sorted whole to list 200."""
    first = item.members.order_by("due_at", "pk").values("pk")[:MEMBERS_SHOWN]
    return (
        Checkpoint.objects.filter(pk__in=first)
        .select_related("workflow", "assignee")
        .only(*MEMBER_COLUMNS)
        .order_by("due_at", "pk")
    )


@role_required(*READERS)
@require_GET
def postmortem(request: HttpRequest, pk: int) -> HttpResponse:
    """The incident's postmortem draft, a Markdown download (console/postmortem.py)."""
    item = _incident(pk)
    return HttpResponse(
        postmortems.draft(item),
        content_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="incident-{item.pk}-postmortem.md"'},
    )


def _gate_context(item: Incident) -> dict[str, Any]:
    """The rollout's gates as the incident page shows them (templates/console/_rollout_gate.html and
    _incident_evidence.html): what a resume would put at stake, who waits and why."""
    active = item.rollouts.filter(status__in=Rollout.ACTIVE).select_related("started_by", "incident").first()
    return {
        "stake": Rollout.stake_of(item, Action.RESUME, stored=True),  # what each member kept when it opened
        "active_rollout": active,
        "waiting": active.waiting() if active else [],
        "unconfirmed_effects": len(unconfirmed_effects(item)) if not item.is_resolved else 0,
    }


def _to(incident: Incident) -> str:
    return reverse("incident", args=[incident.pk])


@operator_required
@require_POST
def open_incident(request: HttpRequest) -> HttpResponse:
    """From the queue's selection (``ids``): one incident holding the selected checkpoints."""
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit() and len(i) < 10][:BULK_LIMIT]
    chosen = list(Checkpoint.objects.filter(pk__in=ids).select_related("workflow"))
    if not chosen:
        messages.error(request, "Select rows first: x selects the row under the cursor.")
        return _back(request, reverse("queue"))
    try:
        item = Incident.open_from(chosen, by=signed_in(request), title=request.POST.get("title", "")[:300])
    except Conflict as exc:
        messages.error(request, str(exc))
        return _back(request, reverse("queue"))
    messages.success(request, f"Incident {item.pk} opened with {item.members.count()} checkpoints.")
    if getattr(request, "htmx", False):  # from the queue's bulk bar: leave the queue for the incident page
        return HttpResponse(status=204, headers={"HX-Redirect": _to(item)})
    return redirect(_to(item))


@operator_required
@require_POST
def merge(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = MergeForm(request.POST)
    other = Incident.objects.filter(pk=form.cleaned_data["other"]).first() if form.is_valid() else None
    if not form.is_valid():
        messages.error(request, error_text(form))
    elif other is None:
        messages.error(request, f"There is no incident {form.cleaned_data['other']}.")
    elif item.merge(other, by=signed_in(request)):
        messages.success(request, f"Incident {other.pk} merged into this one.")
    else:
        messages.error(request, "Not merged: both incidents must be unresolved and different.")
    return redirect(_to(item))


@operator_required
@require_POST
def remove_member(request: HttpRequest, pk: int, checkpoint_pk: int) -> HttpResponse:
    item = _incident(pk)
    checkpoint = get_object_or_404(Checkpoint, pk=checkpoint_pk)
    if item.remove(checkpoint, by=signed_in(request)):
        messages.success(request, f"Checkpoint {checkpoint.pk} taken out of the incident.")
    else:
        messages.error(request, f"Checkpoint {checkpoint.pk} is not in this incident.")
    return redirect(_to(item))


@operator_required
@require_POST
def set_status(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = StatusForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
    elif item.set_status(form.cleaned_data["status"], by=signed_in(request)):
        messages.success(request, f"The incident is {item.status} now.")
    else:
        messages.error(request, f"The incident is {item.status}: it cannot become {form.cleaned_data['status']}.")
    return redirect(_to(item))


@operator_required
@require_POST
def command(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = CommanderForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
    elif item.take_command(form.cleaned_data["commander"], by=signed_in(request)):
        who = item.commander.get_username() if item.commander else "nobody"
        messages.success(request, f"Incident commander: {who}.")
    else:
        messages.error(request, "Not changed: the incident is resolved or its commander changed meanwhile.")
    return redirect(_to(item))


@operator_required
@require_POST
def note(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = NoteForm(request.POST)
    if form.is_valid():
        item.add_note(form.cleaned_data["note"], by=signed_in(request))
        messages.success(request, "Note added to the timeline.")
    else:
        messages.error(request, error_text(form))
    return redirect(_to(item))


@operator_required
@require_POST
def hold(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = HoldForm(request.POST)
    if not form.is_valid():
        messages.error(request, error_text(form))
        return redirect(_to(item))
    try:
        placed = item.hold(by=signed_in(request), **form.cleaned_data)
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{placed.scope} is on hold: running workflows pause at their next step.")
    return redirect(_to(item))


@operator_required
@require_POST
def lift_hold(request: HttpRequest, pk: int) -> HttpResponse:
    placed = get_object_or_404(Hold.objects.select_related("agent"), pk=pk)
    if placed.lift(by=signed_in(request)):
        messages.success(request, f"The hold on {placed.scope} is lifted.")
    else:
        messages.error(request, "That hold was already lifted.")
    return _back(request, _to(placed.incident) if placed.incident else reverse("incidents"))


@operator_required
@require_POST
def start_rollout(request: HttpRequest, pk: int) -> HttpResponse:
    item = _incident(pk)
    form = RolloutForm(request.POST, incident=item)
    if not form.is_valid():
        messages.error(request, error_text(form))
        return redirect(_to(item))
    typed = {
        key.removeprefix("money_total_"): str(request.POST.get(key, ""))[:40]
        for key in request.POST
        if key.startswith("money_total_") and len(key) < 40
    }
    try:
        rollout = Rollout.start(item, by=signed_in(request), money_total=typed, **form.terms())
    except (Conflict, ValueError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            "Rollout proposed: a second operator must approve it before any wave goes out."
            if rollout.awaits_approval
            else "Rollout started: the canary goes out with the next sweep.",
        )
    return redirect(_to(item))


@operator_required
@require_POST
def steer_rollout(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a rollout, let a halted one carry on, or (a second operator) approve or reject a proposed one
    (``do``: cancel | continue | approve | reject)."""
    rollout = get_object_or_404(Rollout.objects.select_related("incident", "started_by"), pk=pk)
    do, user = request.POST.get("do"), signed_in(request)
    if do in ("approve", "reject"):
        done = (
            rollout.approve(by=user)
            if do == "approve"
            else rollout.reject(by=user, note=request.POST.get("note", "")[:1000])
        )
        if not done:
            messages.error(request, rollout.refusal(by=user))
            return redirect(_to(rollout.incident))
    else:
        done = rollout.cancel(by=user) if do == "cancel" else rollout.carry_on(by=user) if do == "continue" else False
        if not done and do == "continue" and rollout.approved_by_id is not None and user.pk == rollout.started_by_id:
            messages.error(request, "Under four eyes another operator than its proposer lets a halted rollout go on.")
            return redirect(_to(rollout.incident))
    if done:
        messages.success(request, f"Rollout {rollout.status}.")
    else:
        messages.error(request, f"The rollout is {rollout.status}: nothing to {do or 'do'}.")
    return redirect(_to(rollout.incident))
