"""What an incident puts at stake, in one place: the incident page, the queue's incident rows and (later)
the postmortem read these figures and compute none of their own.

Money is read by ``workflows.money``'s rule (the one behind ``Checkpoint.money_at_stake``, which fails
safe): this module only sorts what that rule finds into committed (effects already done), pending
(unknown, pending or re-run effects) and planned (the agent's plan), and adds up the amounts of each
currency. An amount the rule finds but cannot read is counted as "amount unknown" for its stage,
never dropped. The rule reads each checkpoint's resume state once, when it opens (``Checkpoint.at_stake``,
with its unknown effects and promises): the pages sum thousands of members without walking their resume
states again.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict

from django.db.models import Count, Min, Q
from django.utils import timezone

from .models import Checkpoint, Decision, Incident, Runbook
from .money import Amount
from .money_reading import staged_amounts
from .shapes import Json

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


def money_by_stage(checkpoint: Checkpoint) -> dict[str, list[Amount]]:
    """The amounts of a checkpoint's resume state by stage, as ``workflows.money`` read them when it opened."""
    return staged_amounts(checkpoint.stake["money"])


# What the pages read of a member: never its resume state (``at_stake`` holds what they sum, read once when
# it opened); ``Checkpoint.with_stakes`` reads the resume state of a row written without it, in one query.
MEMBER_FIELDS = (
    "pk",
    "incident_id",
    "at_stake",
    "due_at",
    "warn_at",
    "breached_at",
    "status",
    "opened_at",
    "runbook_id",
    "workflow__external_id",
    "workflow__context",
    "workflow__kind",
)


@dataclass
class Money:
    """Per currency and stage: the sum of the readable amounts, and how many could not be read."""

    sums: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    unreadable: Counter[str] = field(default_factory=Counter)

    def add(self, stage: str, amount: Amount) -> None:
        if amount.value is None:
            self.unreadable[stage] += 1
            return
        key = (amount.currency or "?", stage)
        self.sums[key] = self.sums.get(key, Decimal(0)) + amount.value

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
    promises: list[Promise] = field(default_factory=list)
    breached: int = 0
    breaching_15: int = 0
    breaching_60: int = 0
    oldest_due_at: datetime | None = None
    runbook_ids: set[int] = field(default_factory=set)
    runbooks: list[Runbook] = field(default_factory=list)  # filled by for_incident


def _customer(context: Json) -> str | None:
    if not isinstance(context, dict):
        return None
    for key in ("customer", "customer_id", "customer_email"):
        if isinstance(value := context.get(key), str | int):
            return str(value)
    return None


def blast_radius(members: Iterable[Checkpoint], *, now: datetime | None = None) -> BlastRadius:
    """The figures over an incident's members (``members`` with their workflows and runbooks joined)."""
    now = now or timezone.now()
    radius = BlastRadius()
    members = list(members)
    # Whose clock still runs: open, or awaiting a second operator's approval, read for all members in one
    # query (``Checkpoint.clock_runs`` asks one per decided member: a rollout decides thousands).
    decided = [c.pk for c in members if c.status == Checkpoint.Status.DECIDED]
    awaiting = (
        set(Decision.objects.proposed().filter(checkpoint_id__in=decided).values_list("checkpoint_id", flat=True))
        if decided
        else set()
    )
    workflows, tickets, customers = set(), set(), set()
    promises: dict[str, Promise] = {}
    for c in Checkpoint.with_stakes(members):
        stake = c.stake
        radius.members += 1
        workflows.add(c.workflow_id)
        tickets.add(c.workflow.external_id)
        if (customer := _customer(c.workflow.context)) is not None:
            customers.add(customer)
        if c.runbook_id is not None:
            radius.runbook_ids.add(c.runbook_id)
        for stage, amounts in staged_amounts(stake["money"]).items():
            for amount in amounts:
                radius.money.add(stage, amount)
        unknown = stake["unknown_effects"]
        radius.unknown_effects += unknown
        radius.members_with_unknown_effects += bool(unknown)
        for text in stake["promises"]:
            entry = promises.setdefault(text, {"text": text, "count": 0, "due": None})
            entry["count"] += 1
            due = promise_due(text, c.opened_at)
            if due is not None and (entry["due"] is None or due < entry["due"]):
                entry["due"] = due
        if c.is_open or c.pk in awaiting:  # Checkpoint.clock_runs, with the approvals read above
            radius.open_members += 1
            if radius.oldest_due_at is None or c.due_at < radius.oldest_due_at:
                radius.oldest_due_at = c.due_at
            if c.breached_at is not None or c.due_at <= now:
                radius.breached += 1
            elif c.due_at <= now + timedelta(minutes=15):
                radius.breaching_15 += 1
            if c.breached_at is None and now < c.due_at <= now + timedelta(minutes=60):
                radius.breaching_60 += 1
    radius.workflows, radius.tickets, radius.customers = len(workflows), len(tickets), len(customers)
    radius.promises = sorted(promises.values(), key=lambda p: (p["due"] is None, p["due"] or now, p["text"]))
    return radius


def for_incident(incident: Incident, *, now: datetime | None = None) -> BlastRadius:
    """The incident's figures, with the runbooks its members match."""
    radius = blast_radius(incident.members.select_related("workflow").only(*MEMBER_FIELDS), now=now)
    radius.runbooks = list(Runbook.objects.filter(pk__in=radius.runbook_ids).order_by("title"))
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


def arrivals_per_minute(opened: list[datetime], *, max_buckets: int = 120) -> tuple[list[str], list[float]]:
    """Member arrivals bucketed by minute from the first to the last (wider buckets past ``max_buckets``)."""
    if not opened:
        return [], []
    first, last = min(opened), max(opened)
    start = first.replace(second=0, microsecond=0)
    minutes = int((last - start).total_seconds() // 60) + 1
    width = max(1, -(-minutes // max_buckets))
    counts = [0.0] * (-(-minutes // width))
    for at in opened:
        counts[int((at - start).total_seconds() // 60) // width] += 1
    labels = [f"{(start + timedelta(minutes=i * width)):%H:%M}" for i in range(len(counts))]
    return labels, counts


def queue_rows(limit: int = 20) -> list[QueueRow]:
    """The queue's incident rows: each unresolved incident with members on the queue, as one row."""
    incidents = list(
        Incident.objects.unresolved()
        .annotate(
            open_members=Count("members", filter=Q(members__status__in=Checkpoint.OPEN_STATUSES)),
            oldest_due=Min("members__due_at", filter=Q(members__status__in=Checkpoint.OPEN_STATUSES)),
        )
        .filter(open_members__gt=0)
        .select_related("agent")
        .order_by("oldest_due")[:limit]
    )
    if not incidents:
        return []
    members: dict[int, list[Checkpoint]] = {i.pk: [] for i in incidents}
    for c in (
        Checkpoint.objects.open().filter(incident__in=incidents).select_related("workflow").only(*MEMBER_FIELDS)[:5000]
    ):
        members[c.incident_id].append(c)  # type: ignore[index]
    rows: list[QueueRow] = []
    for incident in incidents:
        radius = blast_radius(members[incident.pk])
        rows.append(
            {
                "incident": incident,
                "members": incident.open_members,  # type: ignore[attr-defined]
                "oldest": min(members[incident.pk], key=lambda c: (c.due_at, c.pk), default=None),
                "oldest_due": incident.oldest_due,  # type: ignore[attr-defined]
                "money": radius.money.at_stake,
                "unknown_effects": radius.unknown_effects,
                "breached": radius.breached,
            }
        )
    return rows
