"""Bulk confirmation of an incident's unknown effects against the provider's evidence: paste or upload
the list, read the matching (matched / unmatched both ways), then confirm. The rules live on the models
(workflows/models/evidence.py); these views only carry the text and the operator's answer."""

from __future__ import annotations

from django.contrib import messages
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from workflows.models import Conflict, Evidence, EvidenceError, Incident
from workflows.models.evidence import MAX_BYTES, preview_facts, text_of, unconfirmed_effects

from ..roles import READERS, can_act, operator_required, role_required, signed_in
from .htmx import _render


def _form_page(
    request: HttpRequest, incident: Incident, *, text: str = "", error: str = "", status: int = 200
) -> HttpResponse:
    effects = unconfirmed_effects(incident)
    return _render(
        request,
        "console/incident_evidence.html",
        {
            "incident": incident,
            "text": text,
            "error": error,
            "effects": effects[:200],
            "effect_count": len(effects),
            "can_act": can_act(signed_in(request)),
            "max_bytes": MAX_BYTES,
        },
        status=status,
    )


def _uploaded_text(upload: UploadedFile) -> str:
    if upload.size is not None and upload.size > MAX_BYTES:
        raise EvidenceError(f"The file is {upload.size:,} bytes: at most {MAX_BYTES:,} are read. Split it.")
    return text_of(upload.read(MAX_BYTES + 1))


@role_required(*READERS)
@require_GET
def evidence(request: HttpRequest, pk: int) -> HttpResponse:
    return _form_page(request, get_object_or_404(Incident, pk=pk))


@operator_required
@require_POST
def submit_evidence(request: HttpRequest, pk: int) -> HttpResponse:
    """Keep the pasted or uploaded list and show its preview; a list that cannot be read comes back in the
    form with why, nothing kept and nothing lost."""
    incident = get_object_or_404(Incident, pk=pk)
    text = request.POST.get("text", "")
    upload = request.FILES.get("file")
    try:
        if upload is not None and text.strip():
            raise EvidenceError("Paste the list or upload a file, not both.")
        if upload is not None:
            text = _uploaded_text(upload)
        kept = Evidence.submit(
            incident, text=text, by=signed_in(request), filename=upload.name or "" if upload is not None else ""
        )
    except (EvidenceError, Conflict) as exc:
        what = " (the file was not kept: choose it again once fixed)" if upload is not None else ""
        return _form_page(request, incident, text=text if upload is None else "", error=f"{exc}{what}", status=400)
    return redirect(reverse("evidence_preview", args=[kept.pk]))


@role_required(*READERS)
@require_GET
def evidence_preview(request: HttpRequest, pk: int) -> HttpResponse:
    kept = get_object_or_404(Evidence.objects.select_related("incident", "submitted_by"), pk=pk)
    context: dict[str, object] = {"evidence": kept, "incident": kept.incident, "can_act": can_act(signed_in(request))}
    if kept.status == Evidence.Status.PREVIEWED:
        context.update(preview_facts(kept.matching()))
    return _render(request, "console/evidence_preview.html", context)


@operator_required
@require_POST
def apply_evidence(request: HttpRequest, pk: int) -> HttpResponse:
    kept = get_object_or_404(Evidence.objects.select_related("incident"), pk=pk)
    try:
        result = kept.apply(
            by=signed_in(request),
            digest=request.POST.get("digest", ""),
            did_not_happen=request.POST.get("did_not_happen") == "1",
        )
    except Conflict as exc:
        messages.error(request, str(exc))
        return redirect(reverse("evidence_preview", args=[kept.pk]))
    except ValueError as exc:  # a confirmation the single decision's rule refuses: nothing was confirmed
        messages.error(request, f"Nothing confirmed: {exc}")
        return redirect(reverse("evidence_preview", args=[kept.pk]))
    done = len(result.matched)
    not_happened = len(result.unmatched_effects) if request.POST.get("did_not_happen") == "1" else 0
    messages.success(
        request,
        f"Confirmed {done} unknown effects as happened with the provider's reference"
        + (f" and {not_happened} as did not happen" if not_happened else "")
        + ".",
    )
    return redirect(reverse("incident", args=[kept.incident_id]))
