"""The SLA figures: decisions by outcome, the breach rate, targets met, what the sweep did, where breaches fall.

Computed from the clocks stamped on checkpoints (opened, first claim, decision, breach) and from the
sweep's events; nothing here is a number written for the report. The TPM breach review, the daily
rollups and the readiness page read them; the periods and filters are ``workflows.metrics``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, timedelta

from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import TruncDate

from .filters import Filters, in_scope
from .metrics import Share, V
from .models import Checkpoint, Decision, Event
from .models.events import SWEEP_VERBS
from .timings import Timing, _timing, opened_checkpoints
from .trends import _as_day
from .via import Via


def decisions(filters: Filters) -> QuerySet[Decision]:
    """Decisions on checkpoints opened in the period (every one: failed and rejected ones too)."""
    return Decision.objects.filter(checkpoint__in=opened_checkpoints(filters).values("pk"))


def decisions_by_action_and_outcome(filters: Filters) -> dict[tuple[str, str], int]:
    rows = decisions(filters).values("action", "status").annotate(n=Count("pk")).order_by("action", "status")
    return {(r["action"], r["status"]): r["n"] for r in rows}


@dataclass(frozen=True)
class BreachRate:
    breached: int
    opened: int

    @property
    def value(self) -> float | None:
        return self.breached / self.opened if self.opened else None


# A checkpoint that breached its time-to-claim or time-to-decision target.
BREACHED = Q(breached_at__isnull=False) | Q(claim_breached_at__isnull=False)


def breach_rate(filters: Filters) -> BreachRate:
    counts = opened_checkpoints(filters).aggregate(opened=Count("pk"), breached=Count("pk", filter=BREACHED))
    return BreachRate(counts["breached"], counts["opened"])


def decision_target_met(filters: Filters) -> Share:
    """Of the checkpoints opened in the period whose decision target is settled, the share that met it."""
    counts = opened_checkpoints(filters).aggregate(
        settled=Count("pk", filter=Q(breached_at__isnull=False) | Q(clock_stopped_at__isnull=False)),
        met=Count("pk", filter=Q(breached_at__isnull=True, clock_stopped_at__isnull=False)),
    )
    return Share(
        "decision_target_met",
        "Decision target met",
        counts["met"],
        counts["settled"],
        "Of the checkpoints opened in the period that are decided or past their decision target, the "
        "share decided by their due time.",
    )


def claim_target_met(filters: Filters) -> Share:
    """Of the checkpoints opened in the period with a claim target that is settled, the share that met it."""
    counts = (
        opened_checkpoints(filters)
        .filter(claim_due_at__isnull=False)
        .aggregate(
            settled=Count("pk", filter=Q(claim_breached_at__isnull=False) | Q(first_claimed_at__isnull=False)),
            met=Count("pk", filter=Q(claim_breached_at__isnull=True, first_claimed_at__isnull=False)),
        )
    )
    return Share(
        "claim_target_met",
        "Claim target met",
        counts["met"],
        counts["settled"],
        "Of the checkpoints opened in the period with a time-to-claim target that are claimed or past it, "
        "the share claimed in time.",
    )


SLA_ACTIVITY = {  # what the sweep did, counted from its events
    "escalations": Q(verb=V.ESCALATED),
    "reminders": Q(verb=V.CLAIM_REMINDER),
    "releases": Q(verb=V.RELEASED, actor_type=Event.ActorType.SYSTEM),
}


def sla_activity(filters: Filters) -> dict[str, int]:
    """Escalation levels fired, claim reminders sent and claims released by the sweep in the period."""
    # Through the small partial index of the sweep's verbs, not every event of the period.
    qs = Event.objects.filter(
        verb__in=SWEEP_VERBS, at__gte=filters.since, at__lt=filters.until, checkpoint__isnull=False
    )
    if filters.agent:
        qs = qs.filter(workflow__agent__name=filters.agent)
    if filters.kind:
        qs = qs.filter(workflow__kind=filters.kind)
    if filters.runbook:
        qs = qs.filter(checkpoint__runbook__slug=filters.runbook)
    if filters.team:
        qs = qs.filter(checkpoint__team__slug=filters.team)
    qs = in_scope(qs, filters.drills, to_workflow="workflow__")
    counts: dict[str, int] = qs.aggregate(**{name: Count("pk", filter=q) for name, q in SLA_ACTIVITY.items()})
    return counts


def met_and_breached_by_day(filters: Filters) -> tuple[list[date], list[int], list[int]]:
    """Per day opened: the settled checkpoints that met their decision target and those that breached it."""
    rows = (
        opened_checkpoints(filters)
        .filter(Q(breached_at__isnull=False) | Q(clock_stopped_at__isnull=False))
        .annotate(day=TruncDate("opened_at", tzinfo=UTC))
        .values("day")
        .annotate(
            met=Count("pk", filter=Q(breached_at__isnull=True)),
            breached=Count("pk", filter=Q(breached_at__isnull=False)),
        )
    )
    by_day = {_as_day(r["day"]): (r["met"], r["breached"]) for r in rows}
    days = [filters.start + timedelta(days=i) for i in range(filters.days)]
    return days, [by_day.get(d, (0, 0))[0] for d in days], [by_day.get(d, (0, 0))[1] for d in days]


def breaches_by(breaches: QuerySet[Checkpoint], lookup: str, limit: int = 10) -> list[tuple[str, int]]:
    """The most frequent values of ``lookup`` among ``breaches`` (checkpoints), most first."""
    rows = breaches.order_by().values(lookup).annotate(n=Count("pk")).order_by("-n", lookup)[:limit]
    return [(str(r[lookup]) if r[lookup] is not None else "", r["n"]) for r in rows]


def breaches_by_hour_of_week(breaches: QuerySet[Checkpoint]) -> list[list[int]]:
    """7 rows (Monday first) of 24 hours (UTC): how many breaches fell in each hour of the week."""
    from django.db.models.functions import ExtractHour, ExtractIsoWeekDay

    grid = [[0] * 24 for _ in range(7)]
    rows = (
        breaches.order_by()
        .annotate(dow=ExtractIsoWeekDay("breached_at", tzinfo=UTC), hour=ExtractHour("breached_at", tzinfo=UTC))
        .values("dow", "hour")
        .annotate(n=Count("pk"))
    )
    for r in rows:
        grid[r["dow"] - 1][r["hour"]] += r["n"]
    return grid


def decision_times_by_channel(filters: Filters) -> list[Timing]:
    """Time to decision by the channel its first decision (or four-eyes proposal) came through: the console,
    Slack, an email link (``Decision.channel``). Over the checkpoints opened in the period, from the opening
    to that decision, like ``time_to_decision``; a checkpoint with no decision row (rows loaded in bulk) is
    in no channel."""
    firsts = decisions(filters).filter(decided_at=F("checkpoint__first_decision_at"))
    return [
        _timing(f"Time to decision via {label}", firsts.filter(channel=value), "checkpoint__opened_at", "decided_at")
        for value, label in Via.choices
    ]


def claim_times_by_channel(filters: Filters) -> list[Timing]:
    """Time to claim by the channel the first claim came through (``Checkpoint.first_claim_channel``): over
    the checkpoints opened in the period, from the opening to that claim, like ``time_to_claim``. A decision
    made without a claim counts as the claim (it stops the claim clock too); a checkpoint an escalation
    reassigned before anyone claimed it, or claimed before channels were recorded, is in no channel."""
    claimed = opened_checkpoints(filters).filter(first_claimed_at__isnull=False)
    return [
        _timing(
            f"Time to claim via {label}", claimed.filter(first_claim_channel=value), "opened_at", "first_claimed_at"
        )
        for value, label in Via.choices
    ]
