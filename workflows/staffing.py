"""The staffing budget: operators needed per hour of the week, by Erlang C, against who actually worked.

The model (as contact-centre workforce tools use it):

- Checkpoints arrive at random (a Poisson process) at the rate recorded for
  that hour of the week: checkpoints opened in that hour-of-week cell over
  the period, divided by the number of such hours in the period.
- Handling time is what operators recorded: from a checkpoint's first claim
  (or assignment) to its first decision, averaged over the period
  (exponentially distributed, as Erlang C assumes). Checkpoints decided
  without a claim count from their opening.
- One pooled team works every checkpoint first come, first served; nobody
  abandons the queue (checkpoints wait until someone decides). With a team
  chosen (``Filters.team``), the budget is that team's alone: its checkpoints,
  and its members as the operators who worked (teams do not share operators).
- Each SLA policy, as frozen onto its checkpoints when they opened, is met
  when the chosen share of its checkpoints (the service level, 80 % by
  default) is picked up by an operator in time: within its time-to-claim
  target, or, for a policy with only a time-to-decision target, within that
  target less the mean handling time (the decision must fit in it too). The
  hour needs the largest head-count any policy present in that hour asks for.
- Business hours: a policy's clocks run only inside its calendar (as frozen
  onto its checkpoints), so an hour of the week outside the calendar needs
  no operator for that policy; its checkpoints opened then wait for the
  calendar to open and are not part of that hour's traffic. (The model does
  not move them onto the opening hour: a Monday-morning backlog is
  under-stated.) An hour counts as inside the calendar when the calendar is
  open at its middle on one of the period's days with that weekday.
- Actual staffing is the operators who did something on the queue (claim,
  release, assign, decide, approve, reject) in that hour, averaged over the
  weeks of the period. An hour is under-staffed when fewer operators worked
  than the model needs.

Limits worth knowing: arrivals are bursty under incidents (Erlang C
under-states the need then), operators do other work (the model assumes
they are fully available), and a few weeks of data make thin estimates for
quiet hours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta

from django.db.models import Count, F, Q
from django.db.models.fields.json import KT
from django.db.models.functions import ExtractHour, ExtractIsoWeekDay

from . import metrics, timings
from .business_time import Hours
from .models import Event

DEFAULT_POLICY = "default (no policy)"
DEFAULT_DECISION_TARGET = 30 * 60  # SLAPolicy.fallback(): no runbook, or a runbook without a policy
V = Event.Verb
WORK_VERBS = (V.CLAIMED, V.RELEASED, V.ASSIGNED, V.DECIDED, V.APPROVED, V.REJECTED)
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def erlang_c(agents: int, traffic: float) -> float:
    """Probability that an arrival waits (Erlang C), for ``traffic`` erlangs offered to ``agents``.

    Computed through the Erlang B recursion, which stays stable for large teams.
    """
    if traffic <= 0:
        return 0.0
    if agents <= traffic:
        return 1.0  # the queue grows without bound: everyone waits
    blocking = 1.0
    for n in range(1, agents + 1):
        blocking = traffic * blocking / (n + traffic * blocking)
    return blocking / (1 - (traffic / agents) * (1 - blocking))


def service_level(agents: int, traffic: float, handle_seconds: float, target_seconds: float) -> float:
    """Share of arrivals answered within ``target_seconds``: 1 - C * exp(-(N - A) * t / AHT)."""
    if traffic <= 0:
        return 1.0
    if agents <= traffic:
        return 0.0
    return 1 - erlang_c(agents, traffic) * math.exp(-(agents - traffic) * target_seconds / handle_seconds)


def agents_needed(
    arrivals_per_hour: float, handle_seconds: float, target_seconds: float, level: float = 0.8, limit: int = 10_000
) -> int:
    """The fewest operators that answer ``level`` of the arrivals within the target."""
    if arrivals_per_hour <= 0 or handle_seconds <= 0:
        return 0
    traffic = arrivals_per_hour * handle_seconds / 3600
    agents = max(1, math.floor(traffic) + 1)
    while agents < limit and service_level(agents, traffic, handle_seconds, target_seconds) < level:
        agents += 1
    return agents


@dataclass
class Cell:
    arrivals_per_hour: float = 0.0
    needed: int = 0
    worked: float = 0.0
    by_policy: dict[str, float] = field(default_factory=dict)  # policy name -> arrivals per hour

    @property
    def under_staffed(self) -> bool:
        return self.needed > 0 and self.worked < self.needed


@dataclass
class Budget:
    filters: metrics.Filters
    level: float
    handle_seconds: float | None
    handled: int
    cells: list[list[Cell]]  # 7 days x 24 hours, Monday first, UTC
    policies: list[Policy]

    @property
    def under_staffed(self) -> list[tuple[int, int]]:
        return [(d, h) for d in range(7) for h in range(24) if self.cells[d][h].under_staffed]

    @property
    def peak_needed(self) -> int:
        return max(c.needed for row in self.cells for c in row)


def _hours_per_cell(filters: metrics.Filters) -> list[list[int]]:
    """How many times each hour of the week occurs in the period."""
    counts = [[0] * 24 for _ in range(7)]
    day = filters.start
    while day <= filters.end:
        for h in range(24):
            counts[day.weekday()][h] += 1
        day += timedelta(days=1)
    return counts


def handling_seconds(filters: metrics.Filters) -> tuple[float | None, int]:
    """Mean recorded handling time (first claim, or opening, to first decision) and how many were decided."""
    rows = (
        timings.with_clocks(timings.opened_checkpoints(filters))
        # In a Q: django-stubs checks an annotation's __isnull against the annotation's own type.
        .filter(Q(first_decided_at__isnull=False))
        .values_list("opened_at", "claimed_first_at", "first_decided_at")
    )
    spans = [
        (decided - (claimed if claimed and claimed <= decided else opened)).total_seconds()
        for opened, claimed, decided in rows
    ]
    spans = [s for s in spans if s >= 0]
    return (sum(spans) / len(spans) if spans else None), len(spans)


@dataclass
class Policy:
    name: str
    claim_target: float | None  # seconds
    decision_target: float | None
    arrivals: int = 0
    peak_needed: int = 0
    hours: Hours | None = None  # the business-hours calendar its checkpoints froze; None: round the clock
    calendar: str = ""
    open_hours: set[tuple[int, int]] = field(default_factory=set)  # (weekday, hour) cells inside the calendar

    def is_open(self, day: int, hour: int) -> bool:
        return self.hours is None or (day, hour) in self.open_hours

    def pick_up_within(self, handle_seconds: float) -> float:
        """How soon an operator must pick a checkpoint up for this policy's targets to hold."""
        if self.claim_target:
            return self.claim_target
        return max((self.decision_target or DEFAULT_DECISION_TARGET) - handle_seconds, 0.0)


def _seconds(value: str | None) -> float | None:
    if value is None or value in ("", "null"):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _read_calendar(policy: Policy, filters: metrics.Filters) -> None:
    """The calendar the policy's latest checkpoint of the period froze, as the hours of the week it is open."""
    name = None if policy.name == DEFAULT_POLICY else policy.name
    terms = (
        timings.opened_checkpoints(filters)
        .filter(sla__policy=name or DEFAULT_POLICY)
        .order_by("-opened_at")
        .values_list("sla", flat=True)
        .first()
    ) or {}
    policy.hours = Hours.from_dict(terms.get("hours"))
    policy.calendar = terms.get("calendar") or ""
    if policy.hours is None:
        return
    last = filters.end
    for back in range(min(filters.days, 35)):  # the last five weeks of the period say which hours are open
        day = last - timedelta(days=back)
        for h in range(24):
            if policy.hours.is_open(datetime.combine(day, time(h, 30), tzinfo=UTC)):
                policy.open_hours.add((day.weekday(), h))


def budget(filters: metrics.Filters, level: float = 0.8) -> Budget:
    hours = _hours_per_cell(filters)
    cells = [[Cell() for _ in range(24)] for _ in range(7)]
    handle, handled = handling_seconds(filters)
    arrivals = (
        timings.opened_checkpoints(filters)
        .annotate(
            day=ExtractIsoWeekDay("opened_at"),
            hour=ExtractHour("opened_at"),
            policy_name=KT("sla__policy"),
            claim_target=KT("sla__claim_target"),
            decision_target=KT("sla__decision_target"),
        )
        .values("day", "hour", "policy_name", "claim_target", "decision_target")
        .annotate(n=Count("pk"))
        .order_by()
    )
    policies: dict[str, Policy] = {}
    for row in arrivals:
        d, h = row["day"] - 1, row["hour"]
        name = row["policy_name"] or DEFAULT_POLICY
        policy = policies.setdefault(
            name,
            Policy(name, _seconds(row["claim_target"]), _seconds(row["decision_target"]) or DEFAULT_DECISION_TARGET),
        )
        rate = row["n"] / max(hours[d][h], 1)
        cell = cells[d][h]
        cell.arrivals_per_hour += rate
        cell.by_policy[name] = cell.by_policy.get(name, 0.0) + rate
        policy.arrivals += row["n"]
    for policy in policies.values():
        _read_calendar(policy, filters)
    for d in range(7):
        for h in range(24):
            cell = cells[d][h]
            # Checkpoints of a policy whose calendar is closed this hour wait for it to open: no traffic now.
            open_now = [name for name in cell.by_policy if policies[name].is_open(d, h)]
            traffic = sum(cell.by_policy[name] for name in open_now)
            if handle and traffic:
                # The pooled queue must meet every policy present: the strictest target decides.
                for name in open_now:
                    policy = policies[name]
                    need = agents_needed(traffic, handle, policy.pick_up_within(handle), level)
                    policy.peak_needed = max(policy.peak_needed, need)
                    cell.needed = max(cell.needed, need)
    work = Event.objects.filter(
        verb__in=WORK_VERBS, actor_user__isnull=False, at__gte=filters.since, at__lt=filters.until
    )
    if filters.team:
        work = work.filter(actor_user__teams__slug=filters.team)
    worked = (
        work.annotate(day=ExtractIsoWeekDay("at"), hour=ExtractHour("at"), date=F("at__date"))
        .values("day", "hour", "date")
        .annotate(operators=Count("actor_user", distinct=True))
        .order_by()
    )
    for row in worked:
        d, h = row["day"] - 1, row["hour"]
        cells[d][h].worked += row["operators"] / max(hours[d][h], 1)
    return Budget(filters, level, handle, handled, cells, sorted(policies.values(), key=lambda p: p.name))
