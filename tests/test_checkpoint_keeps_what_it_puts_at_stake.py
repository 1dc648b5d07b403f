"""A checkpoint reads what it puts at stake once, when it opens (``Checkpoint.at_stake``: workflows.money's
reading, its unknown effects, its promises), and the incident page and the queue's incident rows sum that
instead of walking every member's resume state through the money rule again. What is stored must be what the
rule reads, amount by amount (seeded random resume states, the seed printed), for the blast radius and for a
rollout's total at stake; the migration fills it for the checkpoints opened before it by the same rule; a row
written without it is read from its resume state."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import REMAINING_PLAN, make_agent, make_checkpoint, make_step, make_worked_example, make_workflow
from workflows import blast_radius
from workflows.models import Checkpoint, Incident, Rollout
from workflows.models.checkpoint_money import stake_in
from workflows.money import MoneyAtStake, amounts_by_stage
from workflows.money_reading import reading_of, reads_money, staged_amounts

SEED = random.randrange(2**32)
NAMES = ("issue_refund", "write_ticket_note", "charge_card", "notify_customer", "update_crm", "payout")
TEXTS = ("420.00 EUR", "€12,50", "1,234.56 USD", "¥500", "1e3 USD", "four hundred", "12 pcs", "-5.00 EUR", "7 gbp")


def _value(rng: random.Random, depth: int = 0) -> object:
    """Something an agent may put in an input: amounts in many spellings, words, numbers, nesting."""
    roll = rng.random()
    if depth < 3 and roll < 0.25:
        keys = ("amount", "refundAmount", "amount_cents", "total", "price", "fee", "note", "eur", "USD", "value",
                "currency", "ticket_id", "refund", "qty", "line", "payment")  # fmt: skip
        return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(1, 3))}
    if depth < 3 and roll < 0.35:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.55:
        return rng.choice(TEXTS)
    if roll < 0.7:
        return rng.choice(("EUR", "usd", "JPY", "KWD", "hello", ""))
    if roll < 0.8:
        return round(rng.uniform(-10, 10_000), rng.choice((0, 2, 3)))
    if roll < 0.9:
        return rng.randint(-5, 100_000)
    return rng.choice((None, True, "12345678901234567890123456789.99 EUR"))


def _step(rng: random.Random, seq: int) -> dict[str, object]:
    kind = rng.choice(("effect", "effect", "tool", "model"))
    step: dict[str, object] = {"seq": seq, "name": rng.choice(NAMES), "kind": kind, "input": _value(rng)}
    if rng.random() < 0.7:
        step["idempotency_key"] = f"k{rng.randrange(6)}"
    return step


def _plan_step(rng: random.Random) -> dict[str, object]:
    step: dict[str, object] = {"name": rng.choice(NAMES), "kind": rng.choice(("effect", "tool", "model"))}
    if rng.random() < 0.5:
        step["amount"] = _value(rng)
    if rng.random() < 0.4:
        step["currency"] = rng.choice(("EUR", "USD", None))
    if rng.random() < 0.3:
        step["moves_money"] = rng.random() < 0.5
    return step


def _resume_state(rng: random.Random) -> dict[str, Any]:
    state: dict[str, object] = {
        "committed": [_step(rng, i) for i in range(rng.randint(0, 3))],
        "unknown_effects": [_step(rng, 10 + i) for i in range(rng.randint(0, 2))],
        "pending": _step(rng, 20) if rng.random() < 0.5 else None,
        "promises": rng.sample(["refund within 5 days", "a call back within 2 hours", "we will write", 42], 2),
        "state": {},
    }
    if rng.random() < 0.6:
        state["plan"] = [_plan_step(rng) for _ in range(rng.randint(0, 3))]
    elif rng.random() < 0.5:
        state["state"] = {"remaining": rng.sample(NAMES, 2)}
    if rng.random() < 0.2:
        state["state"] = {
            "fork": {"step": rng.choice(NAMES), "kind": "effect", "input": _value(rng), "from_workflow_id": 1}
        }
    return state


class _History:
    """A trail that remembers some kinds and names as having moved money."""

    def __init__(self, rng: random.Random) -> None:
        self.kind = rng.random() < 0.5
        self.names = set(rng.sample(NAMES, rng.randint(0, 3)))

    def kind_moved_money(self, kind: str) -> bool:
        return self.kind

    def names_that_moved_money(self, names):
        return set(names) & self.names


def _exact(amounts):
    """Amounts as text, so that 1.0 and 1.00 differ (Decimal equality would not tell them apart)."""
    return [(None if a.value is None else str(a.value), a.currency) for a in amounts]


def test_the_stored_reading_is_the_rules_reading_of_random_resume_states():
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    for i in range(3000):
        state = _resume_state(rng)
        kind = rng.choice(("refund", "ticket_triage"))
        stored = json.loads(json.dumps(stake_in(state, kind=kind)))  # through JSON, as the column keeps it
        reading = stored["money"]
        expected = amounts_by_stage(state, kind=kind)
        got = staged_amounts(reading)
        assert {s: _exact(a) for s, a in got.items()} == {s: _exact(a) for s, a in expected.items()}, (SEED, i)
        history = _History(rng)
        assert reads_money(reading, kind=kind, history=history) == bool(
            MoneyAtStake.of(state, kind=kind, history=history)
        ), (SEED, i, state)
        assert stored["unknown_effects"] == len(state["unknown_effects"])
        assert stored["promises"] == [p for p in state["promises"] if isinstance(p, str)]


@pytest.mark.django_db
def test_a_checkpoint_keeps_what_its_resume_state_puts_at_stake_when_it_opens():
    agent, _ = make_agent()
    checkpoint = Checkpoint.open_for(
        make_workflow(agent), reason="tool_error", at_seq=4, plan=REMAINING_PLAN, detail="502"
    )
    checkpoint.refresh_from_db()
    assert checkpoint.at_stake == stake_in(checkpoint.resume_state, kind=checkpoint.workflow.kind)
    unknown = make_checkpoint(make_worked_example(refund_status="pending"))
    unknown.refresh_from_db()
    assert unknown.at_stake == stake_in(unknown.resume_state, kind=unknown.workflow.kind)
    assert unknown.at_stake["unknown_effects"] == 1 and unknown.at_stake["money"]["pending"]


@pytest.mark.django_db
def test_what_it_keeps_is_read_in_the_order_the_database_gives_the_resume_state_back():
    """PostgreSQL's jsonb orders an object's keys (shorter first), and the rule reads amounts in key order:
    what is kept is what the readers of the stored resume state read before the column, amount by amount."""
    workflow = make_workflow()
    make_step(workflow, 1, "read_ticket")
    make_step(
        workflow,
        2,
        "issue_refund",
        kind="effect",
        status="pending",
        input={"refund_total": "5.00", "fee": "1.00", "shipping_cost": "2.50", "currency": "EUR"},
    )
    checkpoint = Checkpoint.open_for(workflow, reason="tool_error", at_seq=2, plan=REMAINING_PLAN)
    checkpoint.refresh_from_db()
    staged = amounts_by_stage(checkpoint.resume_state, kind="refund")
    assert _exact(staged_amounts(checkpoint.at_stake["money"])["pending"]) == _exact(staged["pending"])
    assert len(staged["pending"]) == 3


def _money_incident(n: int) -> Incident:
    agent, _ = make_agent()
    agent.incident_threshold = n
    agent.save()
    for i in range(n):
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending" if i % 2 else "committed"),
            reason="tool_error",
            detail=f"provider answered 502 for T-{i}",
        )
    return Incident.objects.get()


def _figures(radius: blast_radius.BlastRadius):
    return (
        radius.money.rows(),
        radius.money.unreadable_by_stage,
        radius.money.at_stake,
        radius.unknown_effects,
        radius.members_with_unknown_effects,
        radius.promises,
    )


@pytest.mark.django_db
def test_the_blast_radius_and_the_stake_read_from_the_column_are_the_rules_and_a_row_without_it_is_read_whole():
    incident = _money_incident(4)
    stored = _figures(blast_radius.for_incident(incident))
    # The rule, member by member, as the blast radius read it before the column.
    members = list(incident.members.select_related("workflow"))
    for c in members:
        for stage, amounts in amounts_by_stage(c.resume_state, kind=c.workflow.kind).items():
            assert _exact(staged_amounts(c.at_stake["money"])[stage]) == _exact(amounts)
    assert stored[0] and any(row["pending"] for row in stored[0]) and stored[3] == 2
    gate = Rollout.stake_of(incident, "resume")
    page = Rollout.stake_of(incident, "resume", stored=True)
    assert (page.totals, page.members, page.unreadable) == (gate.totals, gate.members, gate.unreadable)
    assert gate.totals and all(isinstance(v, Decimal) for v in gate.totals.values())

    Checkpoint.objects.filter(incident=incident).update(at_stake=None)  # rows written around the model
    assert _figures(blast_radius.for_incident(incident)) == stored
    page = Rollout.stake_of(incident, "resume", stored=True)
    assert (page.totals, page.members, page.unreadable) == (gate.totals, gate.members, gate.unreadable)
    assert [r["money"] for r in blast_radius.queue_rows()] == [stored[2]]


@pytest.mark.django_db(transaction=True)
def test_the_migration_reads_the_checkpoints_opened_before_it_by_the_same_rule():
    executor = MigrationExecutor(connection)
    # Found by name, not number: migrations are renumbered when branches land together.
    name = next(
        n for app, n in executor.loader.disk_migrations if app == "workflows" and n.endswith("_checkpoint_at_stake")
    )
    before = [d for d in executor.loader.get_migration("workflows", name).dependencies if d[0] == "workflows"]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    agent = old.get_model("workflows", "Agent").objects.create(name="bot", token_hash="h" * 64, token_prefix="p")
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    states = [_resume_state(rng) for _ in range(5)] + [{}]
    OldCheckpoint = old.get_model("workflows", "Checkpoint")
    for i, state in enumerate(states):
        workflow = old.get_model("workflows", "Workflow").objects.create(
            agent=agent, external_id=f"T-{i}", kind="refund", title=f"T-{i}"
        )
        OldCheckpoint.objects.create(
            workflow=workflow,
            reason="tool_error",
            resume_state=state,
            status="resolved",
            warn_at="2026-01-01T00:00:00Z",
            due_at="2026-01-01T00:10:00Z",
        )
    executor = MigrationExecutor(connection)
    executor.migrate([("workflows", name)])

    # The rule reads the resume state as the database gives it back (jsonb orders an object's keys), as every
    # reader of it did before the column.
    rows = list(Checkpoint.objects.order_by("pk").values_list("resume_state", "at_stake"))
    assert len(rows) == len(states)
    for resume_state, at_stake in rows:
        assert at_stake == json.loads(json.dumps(stake_in(resume_state, kind="refund"))), SEED
        assert at_stake["money"] == json.loads(json.dumps(reading_of(resume_state, kind="refund")))
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
