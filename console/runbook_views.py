"""Runbook preview for admins: which runbook and SLA policy would a checkpoint of kind X and reason Y get,
and when would each of its clocks fire if it opened now?"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from workflows.models import Reason, Runbook, SLAPolicy, Terms
from workflows.models.people import ADMIN

from .roles import role_required


class PreviewForm(forms.Form):
    kind = forms.CharField(max_length=100, required=False, label="Workflow kind")
    reason = forms.ChoiceField(choices=Reason.choices, required=False)


@role_required(ADMIN)
@require_GET
def runbook_preview(request: HttpRequest) -> HttpResponse:
    form = PreviewForm(request.GET or None)
    context: dict[str, Any] = {"form": form}
    if form.is_valid() and form.cleaned_data["reason"]:
        kind, reason = form.cleaned_data["kind"], form.cleaned_data["reason"]
        runbook = Runbook.match(kind, reason)
        policy = runbook.policy if runbook else None
        terms = Terms(policy.freeze() if policy else SLAPolicy.fallback())
        now = timezone.now()
        deadlines = terms.deadlines(now)
        breach = deadlines["due_at"]
        assert breach is not None  # the decision clock always has a due time
        context.update({
            "runbook": runbook, "policy": policy, "terms": terms, "now": now, "deadlines": deadlines,
            "local_tz": terms.hours.tz if terms.hours else None,
            "escalations": [(f, terms.firing_at(breach, f.number)) for f in terms.firings()],
            "paused": terms.is_paused(now),
        })
    return render(request, "console/runbook_preview.html", context)
