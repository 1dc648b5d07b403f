"""The incident page's figures are read by the database (grouped counts and sums, each distinct ``at_stake``
once), and they are the figures the page computed member by member before: the same money per currency and
stage (down to each Decimal's exponent), unreadable amounts, distinct tickets and customers, unknown effects,
promises with due dates, SLA exposure, runbooks, arrivals per minute, the rollout's stake and the queue's
incident rows. The members are seeded at random (the seed printed): several currencies, stages and spellings
of amounts, unreadable ones, promises, customers of every JSON type, deadlines on either side of 15 and 60
minutes, statuses with and without a proposal waiting, and rows written without ``at_stake``."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_user, make_worked_example
from workflows import blast_radius
from workflows.models import Checkpoint, Decision, Incident, Rollout, Runbook, Workflow
from workflows.money_reading import reads_money, staged_amounts

pytestmark = pytest.mark.django_db

SEED = random.randrange(2**32)
VALUES = ("42.00", "5", "0.10", "-3.5", "1E+2", "12.345", "0", "-0.00", "999999.99", None)
CURRENCIES = ("EUR", "USD", "JPY", "eur", None)
PROMISES = ("refund within 5 days", "a call back within 2 hours", "we will write", "refund within 1 week")
CONTEXTS: tuple[Any, ...] = (
    {"customer": "C-1"},
    {"customer": "C-2"},
    {"customer": 7},
    {"customer": "7"},
    {"customer": True},
    {"customer": "true"},
    {"customer": 1.5, "customer_id": "X-1"},
    {"customer": "1.5"},
    {"customer": "null"},
    {"customer": None, "customer_email": "zoë@example.com"},
    {"customer": {"id": 1}, "customer_id": 12345678901234567890},
    {"customer": ["C-1"]},
    {"customer_email": 'say "hi"\\'},
    {"other": "C-1"},
    {},
    ["C-1"],
    "C-1",
)


def _amounts(rng: random.Random) -> list[list[str | None]]:
    return [[rng.choice(VALUES), rng.choice(CURRENCIES)] for _ in range(rng.randint(0, 3))]


def _stake(rng: random.Random) -> dict[str, Any]:
    return {
        "money": {
            "committed": _amounts(rng),
            "pending": _amounts(rng),
            "planned": _amounts(rng),
            "unseen": rng.sample(["issue_refund", "charge_card"], rng.randint(0, 1)),
            "planless": rng.random() < 0.3,
        },
        "unknown_effects": rng.choice((0, 0, 1, 2)),
        "promises": rng.sample(PROMISES, rng.randint(0, 2)),
    }


def _incident(rng: random.Random, agent_name: str, n: int, runbooks: list[Runbook | None], now: datetime) -> Incident:
    """An incident of ``n`` members copied from one opened the real way, as the incidents bench makes them, each
    with its own workflow and random figures; a few stakes kept by many members, others by one."""
    agent, _ = make_agent(agent_name)
    agent.incident_threshold = 1  # the first checkpoint opens the incident
    agent.save()
    template = make_checkpoint(
        make_worked_example(agent=agent, refund_status=rng.choice(("committed", "pending"))),
        reason="tool_error",
        detail="provider answered 502",
    )
    incident = Incident.objects.get(members=template)
    shared = [_stake(rng) for _ in range(4)]
    varied = ("id", "workflow_id", "at_stake", "status", "due_at", "breached_at", "opened_at", "runbook_id")
    copied = {
        f.attname: getattr(template, f.attname) for f in Checkpoint._meta.concrete_fields if f.attname not in varied
    }
    # A ticket is one workflow of an agent: a few agents' workflows share tickets.
    owners = [agent, *(make_agent(f"{agent_name}-{k}")[0] for k in range(2))]
    tickets: set[tuple[int, str]] = set()
    for i in range(n):
        owner, ticket = rng.choice(owners), f"T-{rng.randrange(n // 2 + 1)}"
        while (owner.pk, ticket) in tickets:
            owner, ticket = rng.choice(owners), f"T-{rng.randrange(n)}"
        tickets.add((owner.pk, ticket))
        runbook = rng.choice(runbooks)
        workflow = Workflow.objects.create(
            agent=owner,
            external_id=ticket,
            kind=rng.choice(("refund", "refund", "ticket_triage")),
            title=f"member {i}",
            context=rng.choice(CONTEXTS),
        )
        due_at = now + timedelta(minutes=rng.choice((-30, -1, 0, 1, 14, 15, 16, 45, 59, 60, 61, 90)))
        roll = rng.random()
        Checkpoint.objects.create(
            **{
                **copied,
                "workflow_id": workflow.pk,
                "at_stake": None if roll < 0.1 else rng.choice(shared) if roll < 0.7 else _stake(rng),
                "status": rng.choice(list(Checkpoint.Status)),
                "due_at": due_at + timedelta(microseconds=rng.choice((0, 0, 1, 500_000))),
                "breached_at": due_at if rng.random() < 0.2 else None,
                "opened_at": now - timedelta(seconds=rng.randrange(4 * 3600)),
                "runbook_id": runbook.pk if runbook else None,
            }
        )
    operator = make_user(f"{agent_name}-operator")
    for c in incident.members.filter(status=Checkpoint.Status.DECIDED):
        status = rng.choice((Decision.Status.PROPOSED, Decision.Status.QUEUED, Decision.Status.REJECTED))
        Decision.objects.create(checkpoint=c, action="resume", decided_by=operator, status=status)
    return incident


# The computations the pages made before the figures were read in SQL, member by member, kept here as the
# reference (workflows/blast_radius.py and models/rollout_gates.py as they were).


def _old_customer(context: Any) -> str | None:
    if not isinstance(context, dict):
        return None
    for key in ("customer", "customer_id", "customer_email"):
        if isinstance(value := context.get(key), str | int):
            return str(value)
    return None


def _old_radius(members: list[Checkpoint], now: datetime) -> dict[str, Any]:
    decided = [c.pk for c in members if c.status == Checkpoint.Status.DECIDED]
    awaiting = set(
        Decision.objects.proposed().filter(checkpoint_id__in=decided).values_list("checkpoint_id", flat=True)
    )
    sums: dict[tuple[str, str], Decimal] = {}
    unreadable: Counter[str] = Counter()
    workflows, tickets, customers, runbook_ids = set(), set(), set(), set()
    promises: dict[str, dict[str, Any]] = {}
    figures: dict[str, Any] = dict.fromkeys(
        ("members", "open_members", "unknown_effects", "members_with_unknown_effects"), 0
    )
    figures.update(breached=0, breaching_15=0, breaching_60=0, oldest_due_at=None)
    for c in members:
        stake = c.stake
        figures["members"] += 1
        workflows.add(c.workflow_id)
        tickets.add(c.workflow.external_id)
        if (customer := _old_customer(c.workflow.context)) is not None:
            customers.add(customer)
        if c.runbook_id is not None:
            runbook_ids.add(c.runbook_id)
        for stage, amounts in staged_amounts(stake["money"]).items():
            for amount in amounts:
                if amount.value is None:
                    unreadable[stage] += 1
                else:
                    key = (amount.currency or "?", stage)
                    sums[key] = sums.get(key, Decimal(0)) + amount.value
        figures["unknown_effects"] += stake["unknown_effects"]
        figures["members_with_unknown_effects"] += bool(stake["unknown_effects"])
        for text in stake["promises"]:
            entry = promises.setdefault(text, {"text": text, "count": 0, "due": None})
            entry["count"] += 1
            due = blast_radius.promise_due(text, c.opened_at)  # unchanged: the one rule
            if due is not None and (entry["due"] is None or due < entry["due"]):
                entry["due"] = due
        if c.is_open or c.pk in awaiting:
            figures["open_members"] += 1
            if figures["oldest_due_at"] is None or c.due_at < figures["oldest_due_at"]:
                figures["oldest_due_at"] = c.due_at
            if c.breached_at is not None or c.due_at <= now:
                figures["breached"] += 1
            elif c.due_at <= now + timedelta(minutes=15):
                figures["breaching_15"] += 1
            if c.breached_at is None and now < c.due_at <= now + timedelta(minutes=60):
                figures["breaching_60"] += 1
    money = blast_radius.Money(sums, unreadable)
    figures.update(
        workflows=len(workflows),
        tickets=len(tickets),
        customers=len(customers),
        money=_exact_rows(money),
        unreadable=money.unreadable_by_stage,
        at_stake=money.at_stake,
        promises=sorted(promises.values(), key=lambda p: (p["due"] is None, p["due"] or now, p["text"])),
        runbooks=[r.pk for r in Runbook.objects.filter(pk__in=runbook_ids).order_by("title", "pk")],
    )
    return figures


def _old_arrivals(opened: list[datetime], max_buckets: int = 120) -> tuple[list[str], list[float]]:
    if not opened:
        return [], []
    first, last = min(opened), max(opened)
    start = first.replace(second=0, microsecond=0)
    minutes = int((last - start).total_seconds() // 60) + 1
    width = max(1, -(-minutes // max_buckets))
    counts = [0.0] * (-(-minutes // width))
    for at in opened:
        counts[int((at - start).total_seconds() // 60) // width] += 1
    return [f"{(start + timedelta(minutes=i * width)):%H:%M}" for i in range(len(counts))], counts


def _old_stake(incident: Incident) -> tuple[dict[str, str], list[int], int]:
    from workflows.models.rollout_gates import RememberedTrail

    trail, totals, members, unreadable = RememberedTrail(), {}, [], 0
    for c in incident.members.open().select_related("workflow").order_by("pk"):
        reading = c.stake["money"]
        if not reads_money(reading, kind=c.workflow.kind, history=trail):
            continue
        staged = staged_amounts(reading)
        amounts = [a for stage in ("pending", "planned") for a in staged[stage]]
        if not amounts or any(a.value is None for a in amounts):
            unreadable += 1
            continue
        for a in amounts:
            currency = (a.currency or "?").upper()
            totals[currency] = totals.get(currency, Decimal(0)) + (a.value or Decimal(0))
        members.append(c.pk)
    return {c: str(v) for c, v in totals.items()}, members, unreadable


def _exact_rows(money: blast_radius.Money) -> list[tuple[str, str, str, str]]:
    """Money rows as text, so that 15.0 and 15.00 differ (Decimal equality would not tell them apart)."""
    return [(r["currency"], str(r["committed"]), str(r["pending"]), str(r["planned"])) for r in money.rows()]


def _new_radius(incident: Incident, now: datetime) -> dict[str, Any]:
    radius = blast_radius.for_incident(incident, now=now)
    figures = {
        name: getattr(radius, name)
        for name in (
            "members", "open_members", "unknown_effects", "members_with_unknown_effects", "breached",
            "breaching_15", "breaching_60", "oldest_due_at", "workflows", "tickets", "customers", "promises",
        )
    }  # fmt: skip
    figures.update(
        money=_exact_rows(radius.money),
        unreadable=radius.money.unreadable_by_stage,
        at_stake=radius.money.at_stake,
        runbooks=[r.pk for r in radius.runbooks],
    )
    return figures


def test_the_figures_read_by_the_database_are_the_figures_read_member_by_member(monkeypatch):
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    now = timezone.now().replace(microsecond=0)
    runbooks: list[Runbook | None] = [None, None, make_runbook(title="Refunds"), make_runbook(title="Payouts")]
    incidents = [_incident(rng, f"bot-{k}-{SEED}", rng.randint(60, 120), runbooks, now) for k in range(2)]
    for incident in incidents:
        members = list(incident.members.select_related("workflow"))
        expected = _old_radius(members, now)
        got = _new_radius(incident, now)
        assert got == expected, SEED
        assert expected["money"] and expected["promises"] and expected["customers"] > 1, SEED  # the seed tested much
        assert blast_radius.arrivals(incident.members.all()) == _old_arrivals([c.opened_at for c in members]), SEED
        stake = Rollout.stake_of(incident, "resume", stored=True)
        assert ({c: str(v) for c, v in stake.totals.items()}, stake.members, stake.unreadable) == _old_stake(incident)
        assert list(stake.totals) == list(_old_stake(incident)[0]), SEED  # shown in the order members come

    # The queue's incident rows: each unresolved incident over its open members, at a moment of its own.
    later = now + timedelta(seconds=rng.choice((0, 30, 60)))
    monkeypatch.setattr(timezone, "now", lambda: later)
    rows = {r["incident"].pk: r for r in blast_radius.queue_rows()}
    for incident in incidents:
        members = list(incident.members.open().select_related("workflow"))
        expected = _old_radius(members, later)
        row = rows[incident.pk]
        assert (row["money"], row["unknown_effects"]) == (expected["at_stake"], expected["unknown_effects"]), SEED
        assert (row["members"], row["breached"]) == (len(members), expected["breached"]), SEED
        oldest = min(members, key=lambda c: (c.due_at, c.pk))
        assert row["oldest"] is not None and row["oldest"].pk == oldest.pk, SEED


def test_the_queue_rows_sum_the_first_members_by_due_time_as_before(monkeypatch):
    """Past the queue's limit, a row sums its incident's first open members by due time, and an incident none of
    whose members is among them shows no oldest member (the limit made small here)."""
    monkeypatch.setattr(blast_radius, "QUEUE_ROW_MEMBERS", 3)
    rng = random.Random(SEED)
    now = timezone.now()
    incidents = [_incident(rng, f"late-{k}-{SEED}", 6, [None], now) for k in range(2)]
    Checkpoint.objects.filter(incident__in=incidents).update(status=Checkpoint.Status.OPEN)
    Checkpoint.objects.filter(incident=incidents[1]).update(due_at=now + timedelta(days=1))
    rows = {r["incident"].pk: r for r in blast_radius.queue_rows()}
    first = list(Checkpoint.objects.filter(incident=incidents[0]).order_by("due_at", "pk")[:3])
    expected = _old_radius(list(Checkpoint.objects.filter(pk__in=[c.pk for c in first])), now)
    assert rows[incidents[0].pk]["money"] == expected["at_stake"], SEED
    assert rows[incidents[0].pk]["oldest"].pk == first[0].pk
    assert rows[incidents[1].pk]["oldest"] is None and rows[incidents[1].pk]["money"] == []
