"""The incident figures, defined once: how fast an incident was detected, held and recovered, and how much of
the work arrived inside incidents. The postmortem, the resume dashboard and ``/metrics`` read them here.

- **start** of an incident: its first member's arrival (the checkpoint that opened first).
- **time to detect**: from the start to the incident's opening (grouping formed it, or an operator opened
  it from a selection).
- **time to hold**: from the start to the first hold placed from the incident (none: never held).
- **time to recover**: from the start to the moment its last member was resolved (a decision reached the
  agent), once every member is; an incident with a member still unresolved has not recovered.
- **incidents** in a period: opened in it, merged ones left out (their members count in the incident they
  were merged into).
- **checkpoints inside an incident**: checkpoints opened in the period that are members of one now (a member
  an operator took out is counted as on its own), over every checkpoint opened in the period.

All three times are measured from the start, so they add up along one axis: detect ≤ hold ≤ recover in a
well-run incident. Drilled workflows (issue 26) are left out of the checkpoint share as every figure does
(``metrics.in_scope``); incidents are formed by production traffic and drills alike, and counted as formed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict, cast

from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet, Subquery

from .filters import CHECKPOINT_LOOKUPS, Filters, checkpoints_in, narrowed
from .models import Checkpoint, Hold, Incident
from .timings import Timing

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class IncidentTimes(TypedDict):
    """What ``with_times`` annotates an incident with."""

    started_at: datetime | None
    held_at: datetime | None
    last_resolved_at: datetime | None
    member_count: int
    unresolved_members: int


def with_times(qs: QuerySet[Incident]) -> QuerySet[WithAnnotations[Incident, IncidentTimes]]:
    """Incidents annotated with the ends of their times: ``started_at``, ``held_at``, ``last_resolved_at``, and
    ``member_count`` / ``unresolved_members`` (which say whether ``last_resolved_at`` is a recovery)."""
    first_hold = Hold.objects.filter(incident=OuterRef("pk")).order_by("placed_at").values("placed_at")[:1]
    annotated: QuerySet[WithAnnotations[Incident, IncidentTimes]] = qs.annotate(
        started_at=Min("members__opened_at"),
        last_resolved_at=Max("members__resolved_at"),
        member_count=Count("members", distinct=True),
        unresolved_members=Count("members", filter=~Q(members__status=Checkpoint.Status.RESOLVED), distinct=True),
        held_at=Subquery(first_hold),
    )
    return annotated


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


@dataclass(frozen=True)
class Times:
    """One incident's times (seconds; None where that moment has not come)."""

    started_at: datetime | None
    detected_at: datetime
    held_at: datetime | None
    recovered_at: datetime | None

    @classmethod
    def of(cls, incident: Incident) -> Times:
        """From an incident ``with_times`` annotated, or any incident (annotated here, one query)."""
        row = (
            cast("WithAnnotations[Incident, IncidentTimes]", incident)
            if hasattr(incident, "started_at")
            else with_times(Incident.objects.filter(pk=incident.pk)).get()
        )
        recovered = row.last_resolved_at if row.member_count and not row.unresolved_members else None
        return cls(row.started_at, incident.opened_at, row.held_at, recovered)

    @property
    def to_detect(self) -> float | None:
        return _seconds(self.started_at, self.detected_at)

    @property
    def to_hold(self) -> float | None:
        return _seconds(self.started_at, self.held_at)

    @property
    def to_recover(self) -> float | None:
        return _seconds(self.started_at, self.recovered_at)


def opened_in(filters: Filters) -> QuerySet[Incident]:
    """The incidents a period counts: opened in it, not merged into another; narrowed by agent, kind and reason
    (the signature's own), and by runbook and team through their members: an incident counts for a runbook or
    a team when one of its members matched that runbook or belonged to that team."""
    qs = Incident.objects.filter(opened_at__gte=filters.since, opened_at__lt=filters.until, merged_into__isnull=True)
    if filters.agent:
        qs = qs.filter(agent__name=filters.agent)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.reason:
        qs = qs.filter(reason=filters.reason)
    by_member = {name: CHECKPOINT_LOOKUPS[name] for name in ("runbook", "team") if getattr(filters, name)}
    if by_member:
        members = Checkpoint.objects.filter(incident=OuterRef("pk"))
        qs = qs.filter(Exists(narrowed(members, filters, by_member)))
    return qs


@dataclass(frozen=True)
class IncidentFigures:
    incidents: int
    recovered: int
    time_to_recover: Timing
    checkpoints: int
    inside: int

    @property
    def inside_share(self) -> float | None:
        """The share of the period's checkpoints that arrived inside an incident (None: none opened)."""
        return self.inside / self.checkpoints if self.checkpoints else None


def figures(filters: Filters) -> IncidentFigures:
    times = [Times.of(i) for i in with_times(opened_in(filters))]
    recovered = [t.to_recover for t in times if t.to_recover is not None]
    opened = checkpoints_in(filters).filter(opened_at__gte=filters.since, opened_at__lt=filters.until)
    counts = opened.aggregate(n=Count("pk"), inside=Count("pk", filter=Q(incident__isnull=False)))
    return IncidentFigures(
        len(times), len(recovered), Timing.of("Time to recover", recovered), counts["n"] or 0, counts["inside"] or 0
    )
