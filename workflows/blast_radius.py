"""What an incident puts at stake, in one place: the incident page, the queue's incident rows and (later)
the postmortem read these figures and compute none of their own.

Money is read by ``workflows.money``'s rule (the one behind ``Checkpoint.money_at_stake``, which fails
safe): this module only sorts what that rule finds into committed (effects already done), pending
(unknown, pending or re-run effects) and planned (the agent's plan), and adds up the amounts of each
currency. An amount the rule finds but cannot read is counted as "amount unknown" for its stage,
never dropped. The rule reads each checkpoint's resume state once, when it opens (``Checkpoint.at_stake``,
with its unknown effects and promises).

The figures are read by the database over all members at once, grouped by incident, and no member is built
as an object: counts and the SLA exposure are SQL aggregates, and each distinct ``at_stake`` comes back once
with how many members keep it (an incident's members mostly keep the same few), so a page sums a handful of
readings, not 10,000. An amount kept by ``n`` members adds ``amount * n``: the same Decimal, exponent included,
as ``n`` additions while the sums fit Decimal's 28 digits (past them both round, and the members never came in a
defined order). The customer keys are read with ``->``, which SQLite has from 3.38 on.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict

from django.db.models import Count, F, Func, Min, OuterRef, Q, Subquery, TextField, Value
from django.db.models.functions import Cast, TruncMinute
from django.utils import timezone

from .models import Agent, Checkpoint, Decision, Incident, Runbook
from .models.checkpoint_money import AtStake, stake_in
from .models.queue import CheckpointQuerySet
from .money import Amount
from .money_reading import staged_amounts

_DUE = re.compile(r"\bwithin\s+(\d{1,4})\s+(minute|hour|day|week)s?\b", re.I)
_UNITS = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}


def promise_due(promise: str, made_at: datetime) -> datetime | None:
    """When a promise like "refund within 5 days" falls due, counted from when it was made; None when it
    names no span the console can read."""
    match = _DUE.search(promise)
    if match is None:
        return None
    return made_at + int(match.group(1)) * _UNITS[match.group(2).lower()]


class MoneyRow(TypedDict):
    """One currency's sums by stage (None where nothing of that stage is at stake)."""

    currency: str
    committed: Decimal | None
    pending: Decimal | None
    planned: Decimal | None


class Promise(TypedDict):
    """A promise made to users across the members: how many made it, and the earliest it falls due."""

    text: str
    count: int
    due: datetime | None


class QueueRow(TypedDict):
    """An unresolved incident as the queue shows it: one row for its open members."""

    incident: Incident
    members: int
    oldest: Checkpoint | None
    oldest_due: datetime | None
    money: list[str]
    unknown_effects: int
    breached: int


# What the queue's incident row reads of its oldest member: its SLA timer (console/_sla_timer.html), nothing else.
SLA_TIMER_FIELDS = ("pk", "due_at", "warn_at", "breached_at")
# The queue's incident rows sum at most this many open members (the first by due time).
QUEUE_ROW_MEMBERS = 5000


@dataclass
class Money:
    """Per currency and stage: the sum of the readable amounts, and how many could not be read."""

    sums: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    unreadable: Counter[str] = field(default_factory=Counter)

    def add(self, stage: str, amount: Amount, times: int = 1) -> None:
        """``amount`` at stake ``times`` over (members keeping the same reading)."""
        if amount.value is None:
            self.unreadable[stage] += times
            return
        key = (amount.currency or "?", stage)
        self.sums[key] = self.sums.get(key, Decimal(0)) + amount.value * times

    def rows(self) -> list[MoneyRow]:
        """One row per currency: its committed, pending and planned sums (None where nothing is at stake)."""
        currencies = sorted({currency for currency, _ in self.sums})
        return [
            MoneyRow(
                currency=c,
                committed=self.sums.get((c, "committed")),
                pending=self.sums.get((c, "pending")),
                planned=self.sums.get((c, "planned")),
            )
            for c in currencies
        ]

    @property
    def unreadable_by_stage(self) -> list[tuple[str, int]]:
        return sorted(self.unreadable.items())

    @property
    def at_stake(self) -> list[str]:
        """What a resume can still move (pending and planned), per currency, as the queue row shows it."""
        totals: dict[str, Decimal] = defaultdict(Decimal)
        for (currency, stage), value in self.sums.items():
            if stage != "committed":
                totals[currency] += value
        shown = [f"{value} {currency}" for currency, value in sorted(totals.items())]
        unknown = self.unreadable["pending"] + self.unreadable["planned"]
        return shown + ([f"{unknown} × amount unknown"] if unknown else [])


_NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass
class BlastRadius:
    members: int = 0
    open_members: int = 0
    workflows: int = 0
    tickets: int = 0
    customers: int = 0
    money: Money = field(default_factory=Money)
    unknown_effects: int = 0
    members_with_unknown_effects: int = 0
    promised: dict[str, Promise] = field(default_factory=dict)
    breached: int = 0
    breaching_15: int = 0
    breaching_60: int = 0
    oldest_due_at: datetime | None = None
    runbooks: list[Runbook] = field(default_factory=list)  # filled by for_incident

    @property
    def promises(self) -> list[Promise]:
        """The promises, the soonest due first, those with no due date the console can read last."""
        return sorted(self.promised.values(), key=lambda p: (p["due"] is None, p["due"] or _NEVER, p["text"]))

    def add_stake(self, stake: AtStake, members: int, first_opened: datetime) -> None:
        """What ``members`` members keep alike in ``at_stake``, the first of them opened at ``first_opened``: a
        promise falls due soonest for the member that made it first."""
        for stage, amounts in staged_amounts(stake["money"]).items():
            for amount in amounts:
                self.money.add(stage, amount, members)
        unknown = stake["unknown_effects"]
        self.unknown_effects += unknown * members
        self.members_with_unknown_effects += members if unknown else 0
        for text in stake["promises"]:
            entry = self.promised.setdefault(text, {"text": text, "count": 0, "due": None})
            entry["count"] += members
            due = promise_due(text, first_opened)
            if due is not None and (entry["due"] is None or due < entry["due"]):
                entry["due"] = due


# Each part reads some figures of the members (a QuerySet without ordering) for every incident among them.
Radii = defaultdict[int, BlastRadius]
Part = Callable[[Radii, CheckpointQuerySet, datetime], None]


def _counts(radii: Radii, members: CheckpointQuerySet, now: datetime) -> None:
    for row in members.values("incident_id").annotate(
        n=Count("pk"),
        workflows=Count("workflow_id", distinct=True),
        tickets=Count("workflow__external_id", distinct=True),
    ):
        radius = radii[row["incident_id"]]
        radius.members, radius.workflows, radius.tickets = row["n"], row["workflows"], row["tickets"]


def _clock(radii: Radii, members: CheckpointQuerySet, now: datetime) -> None:
    """The SLA exposure of the members whose clock runs (``on_clock``: open, or awaiting a second operator)."""
    unbreached = Q(breached_at__isnull=True, due_at__gt=now)
    for row in (
        members.on_clock()
        .values("incident_id")
        .annotate(
            n=Count("pk"),
            oldest=Min("due_at"),
            breached=Count("pk", filter=Q(breached_at__isnull=False) | Q(due_at__lte=now)),
            within_15=Count("pk", filter=unbreached & Q(due_at__lte=now + timedelta(minutes=15))),
            within_60=Count("pk", filter=unbreached & Q(due_at__lte=now + timedelta(minutes=60))),
        )
    ):
        radius = radii[row["incident_id"]]
        radius.open_members, radius.oldest_due_at = row["n"], row["oldest"]
        radius.breached, radius.breaching_15, radius.breaching_60 = row["breached"], row["within_15"], row["within_60"]


# A member's customer: the first of these keys of its workflow's context holding a string or an integer.
CUSTOMER_KEYS = ("customer", "customer_id", "customer_email")


def _json_of(column: str, key: str) -> Cast:
    """The JSON text of ``key``'s value in a JSON column: NULL where the key is missing or the value is no object
    (``->`` means this on PostgreSQL's jsonb and SQLite alike)."""
    member = Func(F(column), Cast(Value(key), TextField()), arg_joiner=" -> ", template="(%(expressions)s)")
    return Cast(member, TextField())


def _customer(texts: Iterable[str | None]) -> str | None:
    for text in texts:
        if text is not None and isinstance(value := json.loads(text), str | int):
            return str(value)
    return None


def _customers(radii: Radii, members: CheckpointQuerySet, now: datetime) -> None:
    """Distinct customers: the database gives each distinct spelling of the customer keys once."""
    keys = {key: _json_of("workflow__context", key) for key in CUSTOMER_KEYS}
    found: defaultdict[int, set[str]] = defaultdict(set)
    for incident_id, *texts in members.values_list("incident_id", *keys.values()).distinct():
        if (customer := _customer(texts)) is not None:
            found[incident_id].add(customer)
    for incident_id, customers in found.items():
        radii[incident_id].customers = len(customers)


def _stakes(radii: Radii, members: CheckpointQuerySet, now: datetime) -> None:
    """Money, unknown effects and promises: each distinct ``at_stake`` once, with how many members keep it. A
    row written without it (around the model) is read from its resume state, as ``Checkpoint.stake`` does."""
    written_around = False
    for row in members.values("incident_id", "at_stake").annotate(n=Count("pk"), first=Min("opened_at")):
        if row["at_stake"] is None:
            written_around = True
        else:
            radii[row["incident_id"]].add_stake(row["at_stake"], row["n"], row["first"])
    if written_around:
        for row in (
            members.filter(at_stake__isnull=True)
            .values("incident_id", "resume_state", "workflow__kind")
            .annotate(n=Count("pk"), first=Min("opened_at"))
        ):
            stake = stake_in(row["resume_state"], kind=row["workflow__kind"])
            radii[row["incident_id"]].add_stake(stake, row["n"], row["first"])


WHOLE: Sequence[Part] = (_counts, _clock, _customers, _stakes)


def radii(members: CheckpointQuerySet, *, now: datetime | None = None, parts: Sequence[Part] = WHOLE) -> Radii:
    """The figures of each incident among ``members``, by incident id (``parts``: which figures)."""
    found: Radii = defaultdict(BlastRadius)
    members, now = members.order_by(), now or timezone.now()
    for part in parts:
        part(found, members, now)
    return found


def for_incident(incident: Incident, *, now: datetime | None = None) -> BlastRadius:
    """The incident's figures, with the runbooks its members match."""
    radius = radii(incident.members.all(), now=now)[incident.pk]
    radius.runbooks = list(Runbook.objects.filter(pk__in=incident.members.values("runbook_id")).order_by("title"))
    return radius


def timeline(incident: Incident, *, limit: int = 300) -> list[dict[str, Any]]:
    """The incident's own trail, the first and last member, and its members' decisions, by time: the latest
    ``limit`` entries. Each entry has ``at`` and ``actor``, and one of ``event``, ``decision`` or ``arrival``
    (with ``which``: "first" or "last")."""
    entries: list[dict[str, Any]] = [
        {"at": e.at, "actor": e.actor, "event": e}
        for e in incident.events().select_related("actor_user", "actor_agent").order_by("-at", "-pk")[:limit]
    ]
    for d in (
        Decision.objects.filter(checkpoint__incident=incident)
        .select_related("decided_by", "checkpoint__workflow")
        .order_by("-decided_at")[:limit]
    ):
        entries.append({"at": d.decided_at, "actor": d.decided_by.get_username(), "decision": d})
    ends = incident.members.order_by("opened_at").select_related("workflow")
    if first := ends.first():
        entries.append({"at": first.opened_at, "actor": "", "arrival": first, "which": "first"})
        last = ends.last()
        if last is not None and last.pk != first.pk:
            entries.append({"at": last.opened_at, "actor": "", "arrival": last, "which": "last"})
    return sorted(entries, key=lambda e: e["at"])[-limit:]


def arrivals(members: CheckpointQuerySet, *, max_buckets: int = 120) -> tuple[list[str], list[float]]:
    """Member arrivals bucketed by minute from the first to the last (wider buckets past ``max_buckets``),
    counted per minute by the database."""
    per_minute = (
        members.order_by()
        .annotate(minute=TruncMinute("opened_at", tzinfo=UTC))
        .values("minute")
        .annotate(n=Count("pk"))
        .values_list("minute", "n")
    )
    return _bucketed(dict(per_minute), max_buckets)


def _bucketed(per_minute: Mapping[datetime, int], max_buckets: int) -> tuple[list[str], list[float]]:
    if not per_minute:
        return [], []
    start, last = min(per_minute), max(per_minute)
    minutes = int((last - start).total_seconds() // 60) + 1
    width = max(1, -(-minutes // max_buckets))
    counts = [0.0] * (-(-minutes // width))
    for at, n in per_minute.items():
        counts[int((at - start).total_seconds() // 60) // width] += n
    labels = [f"{(start + timedelta(minutes=i * width)):%H:%M}" for i in range(len(counts))]
    return labels, counts


def queue_rows(limit: int = 20) -> list[QueueRow]:
    """The queue's incident rows: each unresolved incident with members on the queue, as one row."""
    first_open = Checkpoint.objects.open().filter(incident=OuterRef("pk")).order_by("due_at", "pk").values("pk")
    incidents = list(
        Incident.objects.unresolved()
        .annotate(
            open_members=Count("members", filter=Q(members__status__in=Checkpoint.OPEN_STATUSES)),
            oldest_due=Min("members__due_at", filter=Q(members__status__in=Checkpoint.OPEN_STATUSES)),
            first_open=Subquery(first_open[:1]),
        )
        .filter(open_members__gt=0)
        .select_related("agent")
        .defer(*(f"agent__{name}" for name in Agent.NOT_IN_A_LIST))
        .order_by("oldest_due")[:limit]
    )
    if not incidents:
        return []
    summed = Checkpoint.objects.open().filter(incident__in=incidents).order_by("due_at", "pk")[:QUEUE_ROW_MEMBERS]
    found = radii(Checkpoint.objects.filter(pk__in=summed.values("pk")), parts=(_clock, _stakes))
    # An incident's first open member is summed whenever any of its members is (they are summed by due time).
    firsts = [i.first_open for i in incidents]  # type: ignore[attr-defined]
    oldest = Checkpoint.objects.filter(pk__in=firsts).only(*SLA_TIMER_FIELDS)
    by_pk = {c.pk: c for c in oldest}
    rows: list[QueueRow] = []
    for incident in incidents:
        radius = found[incident.pk]
        rows.append(
            {
                "incident": incident,
                "members": incident.open_members,  # type: ignore[attr-defined]
                "oldest": by_pk.get(incident.first_open) if radius.open_members else None,  # type: ignore[attr-defined]
                "oldest_due": incident.oldest_due,  # type: ignore[attr-defined]
                "money": radius.money.at_stake,
                "unknown_effects": radius.unknown_effects,
                "breached": radius.breached,
            }
        )
    return rows
