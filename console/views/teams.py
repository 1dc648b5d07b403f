"""Moving a checkpoint to another team: one from its workbench, or the queue's selected rows.

The checkpoint's team is the one it was routed to when it opened (``workflows.models.teams``);
this transfer, audited, is its only other way to change. The queue's team tabs are
``console.team_scope``.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_POST

from workflows.models import Checkpoint, Team
from workflows.models.teams import transfer as transfer_checkpoint

from ..roles import operator_required, signed_in
from .checkpoints import BULK_LIMIT, _workbench_url
from .htmx import _back


class TransferForm(forms.Form):
    team = forms.ModelChoiceField(
        queryset=Team.objects.all(),
        to_field_name="slug",
        error_messages={
            "required": "Choose the team to transfer it to.",
            "invalid_choice": "That team does not exist (any more).",
        },
    )
    note = forms.CharField(max_length=1000, required=False, strip=True)


def _error(form: forms.Form) -> str:
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


@operator_required
@require_POST
def transfer(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("team"), pk=pk)
    form = TransferForm(request.POST)
    if not form.is_valid():
        messages.error(request, _error(form))
    elif transfer_checkpoint(
        checkpoint, to=form.cleaned_data["team"], by=signed_in(request), note=form.cleaned_data["note"]
    ):
        messages.success(request, f"Transferred to {form.cleaned_data['team'].name}.")
    else:
        messages.error(
            request,
            f"Not transferred: it is {checkpoint.status} and belongs to "
            f"{checkpoint.team.name if checkpoint.team else 'no team'} now.",
        )
    return _back(request, _workbench_url(checkpoint))


@operator_required
@require_POST
def bulk_transfer(request: HttpRequest) -> HttpResponse:
    """Move the queue's selected rows to a team; each row is its own compare-and-set."""
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()][:BULK_LIMIT]
    checkpoints = list(Checkpoint.objects.filter(pk__in=ids).select_related("team"))
    form = TransferForm(request.POST)
    if not checkpoints:
        messages.error(request, "Select rows first: x selects the row under the cursor.")
    elif not form.is_valid():
        messages.error(request, _error(form))
    else:
        team = form.cleaned_data["team"]
        moved = sum(
            transfer_checkpoint(c, to=team, by=signed_in(request), note=form.cleaned_data["note"]) for c in checkpoints
        )
        (messages.success if moved == len(checkpoints) else messages.warning)(
            request,
            f"Transferred {moved} to {team.name}"
            + (
                f"; {len(checkpoints) - moved} not (already there, or decided meanwhile)."
                if moved < len(checkpoints)
                else "."
            ),
        )
    return _back(request, reverse("queue"))
