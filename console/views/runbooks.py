"""Runbook pages: the list, the editor and the preview for admins; every version, its history and the
diff between two for everyone who reads the console (the workbench links to the version it opened with).

Every save that changes a runbook writes its next version (``Runbook.snapshot``); the editor refuses a
save based on a version someone else replaced meanwhile, and links to what they changed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from workflows.models import Agent, Checkpoint, Event, Reason, Runbook, RunbookVersion, SLAPolicy, Terms
from workflows.models.people import ADMIN
from workflows.models.runbooks import ONE_DEFAULT

from ..roles import READERS, role_required, signed_in
from ..runbook_forms import RunbookForm


class PreviewForm(forms.Form):
    kind = forms.CharField(max_length=100, required=False, label="Workflow kind")
    reason = forms.ChoiceField(choices=Reason.choices, required=False)
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.order_by("name"), to_field_name="name", required=False, empty_label="any agent"
    )


@role_required(ADMIN)
@require_GET
def runbook_preview(request: HttpRequest) -> HttpResponse:
    """Which runbook, version and SLA policy would a checkpoint of kind X, reason Y, agent Z get, and when
    would each of its clocks fire if it opened now?"""
    form = PreviewForm(request.GET or None)
    context: dict[str, object] = {"form": form}
    if form.is_valid() and form.cleaned_data["reason"]:
        kind, reason, agent = form.cleaned_data["kind"], form.cleaned_data["reason"], form.cleaned_data["agent"]
        candidates = Runbook.candidates(kind, reason, agent)
        runbook = candidates[0] if candidates else None
        policy = runbook.policy if runbook else None
        terms = Terms(policy.freeze() if policy else SLAPolicy.fallback())
        now = timezone.now()
        deadlines = terms.deadlines(now)
        breach = deadlines["due_at"]
        assert breach is not None  # the decision clock always has a due time
        context.update(
            {
                "runbook": runbook,
                "version": runbook.current_version if runbook else None,
                "policy": policy,
                "others": candidates[1:],
                "terms": terms,
                "now": now,
                "deadlines": deadlines,
                "local_tz": terms.hours.tz if terms.hours else None,
                "escalations": [(f, terms.firing_at(breach, f.number)) for f in terms.firings()],
                "paused": terms.is_paused(now),
            }
        )
    return render(request, "console/runbook_preview.html", context)


@role_required(ADMIN)
@require_GET
def runbooks(request: HttpRequest) -> HttpResponse:
    """Every runbook with its match rules, current version, owner and review date; stale ones flagged."""
    rows = list(Runbook.objects.select_related("agent", "policy", "owner", "current_version__created_by"))
    rows.sort(key=lambda r: (not r.is_default, r.title.lower()))
    stale = [r for r in rows if r.is_stale]
    return render(
        request,
        "console/runbooks.html",
        {
            "runbooks": rows,
            "stale": len(stale),
            "today": timezone.localdate(),
            # Say only what is true of each: told, to be told by the next sweep, or nobody to tell.
            "stale_told": sum(r.stale_owner_told for r in stale),
            "stale_untold": sum(r.owner_id is not None and not r.stale_owner_told for r in stale),
            "stale_unowned": sum(r.owner_id is None for r in stale),
        },
    )


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def runbook_new(request: HttpRequest) -> HttpResponse:
    form = RunbookForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        runbook = _save(request, form, created=True)
        if runbook is not None:
            messages.success(request, f"Runbook “{runbook.title}” created: version 1.")
            return redirect("runbook", runbook.pk)
    return render(request, "console/runbook_form.html", {"form": form}, status=422 if form.errors else 200)


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def runbook_edit(request: HttpRequest, pk: int) -> HttpResponse:
    runbook = get_object_or_404(Runbook.objects.select_related("current_version"), pk=pk)
    based_on = runbook.current_version.number if runbook.current_version else 0
    form = RunbookForm(request.POST or None, instance=runbook)
    if request.method == "POST" and form.is_valid():
        posted = request.POST.get("based_on", "")
        if posted.isdigit() and int(posted) != based_on:
            form.add_error(
                None,
                f"Someone saved version {based_on} while you were editing version {posted}. "
                "Nothing was saved: read what they changed, then edit again.",
            )
            return render(
                request,
                "console/runbook_form.html",
                {"form": form, "runbook": runbook, "based_on": based_on, "conflict_from": int(posted)},
                status=409,
            )
        before = based_on
        saved = _save(request, form, created=False)
        if saved is not None:
            number = saved.current_version.number if saved.current_version else 0
            if number == before:
                messages.info(request, f"Nothing changed: “{saved.title}” stays at version {number}.")
            else:
                messages.success(
                    request,
                    f"Saved “{saved.title}” as version {number}. Checkpoints already open "
                    "keep the version they opened with.",
                )
            return redirect("runbook", saved.pk)
    return render(
        request,
        "console/runbook_form.html",
        {"form": form, "runbook": runbook, "based_on": based_on},
        status=422 if form.errors else 200,
    )


def _save(request: HttpRequest, form: RunbookForm, *, created: bool) -> Runbook | None:
    """Save the head and its version, with an audit event; None (and a form error) if a default won a race."""
    runbook = form.instance
    runbook.editor = signed_in(request)
    before = runbook.current_version_id
    try:
        with transaction.atomic():
            runbook = form.save()
            if runbook.current_version_id != before:
                version = runbook.current_version
                Event.record(
                    runbook,
                    Event.Verb.ADMIN_CREATED if created else Event.Verb.ADMIN_CHANGED,
                    actor=signed_in(request),
                    data={
                        "model": "runbook",
                        "object": runbook.title[:200],
                        "version": version.number if version else None,
                    },
                )
    except IntegrityError:  # another admin made another runbook the default between our check and our save
        form.add_error("is_default", ONE_DEFAULT)
        return None
    return runbook


@role_required(*READERS)
@require_GET
def runbook(request: HttpRequest, pk: int) -> HttpResponse:
    """A runbook's history: its versions, who saved each and what each changed; pick two to compare."""
    runbook = get_object_or_404(Runbook.objects.select_related("owner", "current_version"), pk=pk)
    versions = list(runbook.versions.select_related("created_by", "agent", "policy", "owner"))
    history = [(v, v.changed_since(versions[i + 1]) if i + 1 < len(versions) else []) for i, v in enumerate(versions)]
    in_use = dict(
        Checkpoint.objects.unresolved()
        .filter(runbook_version__runbook=runbook)
        .values_list("runbook_version__number")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return render(
        request,
        "console/runbook.html",
        {"runbook": runbook, "history": history, "in_use": in_use, "current": runbook.current_version},
    )


@role_required(*READERS)
@require_GET
def runbook_version(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = get_object_or_404(
        RunbookVersion.objects.select_related("runbook__current_version", "created_by", "agent", "policy", "owner"),
        runbook_id=pk,
        number=number,
    )
    return render(request, "console/runbook_version.html", {"version": version, "runbook": version.runbook})


@dataclass(frozen=True)
class Line:
    """One row of a diff: ``kind`` is "same", "old" (removed) or "new" (added); text is escaped when shown."""

    kind: str
    old: int | None
    new: int | None
    text: str


def diff_lines(a: list[str], b: list[str], context: int = 3) -> list[list[Line]]:
    """Hunks of a line diff (difflib), with ``context`` unchanged lines around each change."""
    hunks = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        hunk = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                hunk += [Line("same", i1 + k + 1, j1 + k + 1, a[i1 + k]) for k in range(i2 - i1)]
                continue
            hunk += [Line("old", i + 1, None, a[i]) for i in range(i1, i2)]
            hunk += [Line("new", None, j + 1, b[j]) for j in range(j1, j2)]
        hunks.append(hunk)
    return hunks


@role_required(*READERS)
@require_GET
def runbook_diff(request: HttpRequest, pk: int) -> HttpResponse:
    """What changed between two versions (?from=N&to=M; by default the previous and the current one)."""
    runbook = get_object_or_404(Runbook.objects.select_related("current_version"), pk=pk)
    numbers = list(runbook.versions.order_by("number").values_list("number", flat=True))
    if not numbers:
        raise Http404("This runbook has no version yet.")
    to = _number(request.GET.get("to"), default=numbers[-1])
    start = _number(request.GET.get("from"), default=max(to - 1, numbers[0]))
    versions = {
        v.number: v
        for v in runbook.versions.filter(number__in=(start, to)).select_related(
            "agent", "policy", "owner", "created_by"
        )
    }
    if start not in versions or to not in versions:
        raise Http404("No such version of this runbook.")
    old, new = versions[start], versions[to]
    return render(
        request,
        "console/runbook_diff.html",
        {
            "runbook": runbook,
            "old": old,
            "new": new,
            "numbers": numbers,
            "hunks": diff_lines(old.lines(), new.lines()),
            "changed": new.changed_since(old),
        },
    )


def _number(value: str | None, *, default: int) -> int:
    return int(value) if value and value.isdigit() and len(value) < 9 else default
