"""What readiness counts among steps and checkpoints, defined once for both of its readers.

The live review (``workflows.readiness``) and the daily rollups (``workflows.rollups``)
compute readiness's figures with these very definitions; the review then reads the
rollups. Keeping the definitions here lets both import them without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery

from .models import Checkpoint, Step

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class InterruptionSteps(TypedDict):
    """What ``with_interruption_steps`` annotates a checkpoint with (None: no such step was recorded)."""

    at_name: str | None
    before_name: str | None


def with_interruption_steps(qs: QuerySet[Checkpoint]) -> QuerySet[WithAnnotations[Checkpoint, InterruptionSteps]]:
    """Checkpoints annotated with the name of the step they stopped at and of the step before it."""
    at = Step.objects.filter(workflow=OuterRef("workflow"), seq=OuterRef("at_seq"))
    before = Step.objects.filter(workflow=OuterRef("workflow"), seq__lt=OuterRef("at_seq")).order_by("-seq")
    annotated: QuerySet[WithAnnotations[Checkpoint, InterruptionSteps]] = qs.annotate(
        at_name=Subquery(at.values("name")[:1]), before_name=Subquery(before.values("name")[:1])
    )
    return annotated


def interruption_label(at_name: str | None, before_name: str | None) -> str:
    if at_name:
        return f"at {at_name}"
    if before_name:
        return f"after {before_name}"
    return "before the first step"


# What readiness counts among the steps of the workflows launched in the period.
STEP_COUNTS = {
    "tools": Q(kind=Step.Kind.TOOL, status=Step.Status.COMMITTED),
    "tools_verified": Q(kind=Step.Kind.TOOL, status=Step.Status.COMMITTED, verified=True),
    "promises": Q(promise__isnull=False) & ~Q(promise=""),
}


def effect_aggregates() -> dict[str, Count]:
    """Per effect name: its steps, the committed ones, and those of them with an external reference."""
    return {
        "steps": Count("pk"),
        "committed": Count("pk", filter=Q(status=Step.Status.COMMITTED)),
        "with_ref": Count(
            "pk", filter=Q(status=Step.Status.COMMITTED, external_ref__isnull=False) & ~Q(external_ref="")
        ),
    }
