"""The money guard fails safe (issue 22, finding 2): an effect moves money unless the console can tell it does not.

Each shape that once slipped past the guard (it keyed on the exact name ``amount``) goes through the real
workbench POST under a runbook with four eyes on money: without the money tick the decision is refused,
with it the decision waits for a second operator, and the workbench names the amount (or says "amount
unknown"). A seeded property test then hides money at random depths under random key spellings.
"""

from __future__ import annotations

import json
import os
import random
import sys

import pytest
from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_step, make_workflow
from workflows.models import Agent, Decision, Step, fork_workflow
from workflows.money import MoneyAtStake, amounts_in, carries_money

pytestmark = pytest.mark.django_db

MONEY_TICK = "This decision touches money: tick the explicit confirmation."


def _paused_on_a_pending_effect(effect_input, *, name="issue_refund", kind="refund", plan=None):
    """A workflow stopped at step 2, an effect whose outcome is unknown; under four eyes on money."""
    make_runbook(workflow_kind=kind, requires_four_eyes=True)
    workflow = make_workflow(kind=kind)
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1"}, verified=True)
    make_step(workflow, 2, name, "effect", status="pending", input=effect_input)
    return make_checkpoint(workflow, at_seq=2, plan=plan if plan is not None else [])


def _resume(client, checkpoint, **fields):
    data = {"action": "resume", "confirm_0": "did_not_happen", "instructions": "go", **fields}
    return client.post(reverse("decide", args=[checkpoint.pk]), data)


def _assert_guarded(client, alice, checkpoint, shown: str) -> None:
    """No tick: refused, nothing recorded. Tick: proposed to a second operator, not queued."""
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="money-confirm"' in html and shown in html

    refused = _resume(client, checkpoint)

    assert refused.status_code == 422 and MONEY_TICK in refused.content.decode()
    assert not Decision.objects.exists()

    _resume(client, checkpoint, money_confirmed="1")

    decision = Decision.objects.get()
    assert decision.status == Decision.Status.PROPOSED  # four eyes: nothing goes out on one operator's word


@pytest.mark.parametrize(
    ("effect_input", "shown"),
    [
        ({"Amount": "420.00", "Currency": "EUR"}, "420.00 EUR"),
        ({"refund": {"amount": "420.00", "currency": "EUR"}}, "420.00 EUR"),
        ({"amount_cents": 42000, "currency": "EUR"}, "420.00 EUR"),
        ({"order": "O-1", "payment": {"totalPrice": {"value": "420.00", "currency": "EUR"}}}, "420.00 EUR"),
        ({"lines": [{"sku": "A", "unitPriceMinor": 42000}], "currency": "EUR"}, "420.00 EUR"),
        ({"note": "420.00 EUR"}, "420.00 EUR"),
        ({"AMOUNT": 420, "CURRENCY": "eur"}, "420 EUR"),
    ],
    ids=[
        "Amount",
        "refund.amount",
        "amount_cents",
        "nested value+currency",
        "minor units in a list",
        "a string",
        "shouting",
    ],
)
def test_a_pending_refund_in_any_spelling_asks_the_tick_and_four_eyes(client, alice, effect_input, shown):
    checkpoint = _paused_on_a_pending_effect(effect_input)

    assert checkpoint.money_reasons() == [f"issue_refund (outcome unknown): {shown}"]
    _assert_guarded(client, alice, checkpoint, shown)


def test_an_amount_it_cannot_read_still_asks_the_tick_and_says_amount_unknown(client, alice):
    checkpoint = _paused_on_a_pending_effect({"amount": "four hundred and twenty", "currency": "EUR"})

    assert checkpoint.money_reasons() == ["issue_refund (outcome unknown): amount unknown (EUR)"]
    assert checkpoint.money_at_stake == ["amount unknown (EUR)"]
    _assert_guarded(client, alice, checkpoint, "amount unknown")


def test_moves_money_false_never_hides_the_amount_a_plan_step_carries(client, alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    workflow = make_workflow()
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1"}, verified=True)
    checkpoint = make_checkpoint(
        workflow,
        at_seq=2,
        plan=[{"name": "issue_refund", "kind": "effect", "amount": "420.00", "currency": "EUR", "moves_money": False}],
    )

    assert checkpoint.money_reasons() == ["issue_refund is planned: 420.00 EUR"]
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="plan-money">moves money: 420.00 EUR' in html
    refused = client.post(reverse("decide", args=[checkpoint.pk]), {"action": "resume"})
    assert refused.status_code == 422 and MONEY_TICK in refused.content.decode()
    client.post(reverse("decide", args=[checkpoint.pk]), {"action": "resume", "money_confirmed": "1"})
    assert Decision.objects.get().status == Decision.Status.PROPOSED


def _earlier_refund(kind="refund", name="issue_refund"):
    """Another workflow that committed a refund, its amount spelt as the guard never used to read it."""
    workflow = make_workflow(kind=kind)
    make_step(workflow, 1, name, "effect", input={"refund": {"Amount": "12.00", "Currency": "EUR"}}, external_ref="R-1")
    return workflow


def test_a_kind_that_moved_money_before_counts_when_the_agent_sends_no_plan(client, alice):
    _earlier_refund()
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    workflow = make_workflow()
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1"}, verified=True)
    checkpoint = make_checkpoint(workflow, at_seq=2, plan=None, state={})

    assert checkpoint.money_reasons() == [
        "the agent did not report its plan, and refund workflows have moved money before"
    ]
    client.force_login(alice)
    refused = client.post(reverse("decide", args=[checkpoint.pk]), {"action": "resume"})
    assert refused.status_code == 422 and MONEY_TICK in refused.content.decode()
    client.post(reverse("decide", args=[checkpoint.pk]), {"action": "resume", "money_confirmed": "1"})
    assert Decision.objects.get().status == Decision.Status.PROPOSED


def test_an_effect_name_that_moved_money_in_another_kind_counts_with_no_amount_and_moves_money_false(client, alice):
    _earlier_refund(kind="chargeback")  # another kind of workflow refunded through issue_refund
    checkpoint = _paused_on_a_pending_effect(
        {"order": "O-1"},
        kind="returns",
        plan=[{"name": "issue_refund", "kind": "effect", "amount": None, "currency": None, "moves_money": False}],
    )

    assert checkpoint.money_reasons() == [
        "issue_refund (outcome unknown): amount unknown (issue_refund has moved money before)"
    ]
    _assert_guarded(client, alice, checkpoint, "issue_refund has moved money before")


def test_a_fork_that_reruns_an_effect_with_an_edited_amount_asks_the_tick_even_for_a_new_kind(alice):
    agent, _ = make_agent()
    Agent.objects.filter(pk=agent.pk).update(capabilities=["fork"], kinds=["goodwill"], fork_edits=["effect"])
    agent.refresh_from_db()
    workflow = make_workflow(agent, kind="goodwill")  # no goodwill workflow, no issue_gift, ever moved money
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1"}, verified=True)
    make_step(workflow, 2, "issue_gift", "effect", status="failed", input={"note": "a voucher"})

    with pytest.raises(ValueError, match="tick the explicit confirmation"):
        fork_workflow(
            workflow,
            from_seq=2,
            by=alice,
            reason="send it again",
            edited_input={"gift": {"AmountCents": 9_999_900, "currency": "EUR"}},
        )

    decision = fork_workflow(
        workflow,
        from_seq=2,
        by=alice,
        reason="send it again",
        money_confirmed=True,
        edited_input={"gift": {"AmountCents": 9_999_900, "currency": "EUR"}},
    )
    assert decision.checkpoint.money_reasons() == ["issue_gift (re-run by the fork): 99999.00 EUR"]


def test_a_recorded_step_remembers_money_in_any_spelling():
    workflow = make_workflow()
    make_step(workflow, 1, "issue_refund", "effect", input={"AmountCents": 500, "currency": "EUR"})
    make_step(workflow, 2, "write_ticket_note", "effect", input={"note": "refunded"})
    make_step(workflow, 3, "read_ticket", "tool", input={"amount": "5.00"})  # a tool call moves nothing

    assert list(Step.objects.filter(workflow=workflow).order_by("seq").values_list("carries_money", flat=True)) == [
        True,
        False,
        False,
    ]


def test_effects_without_money_and_a_kind_that_never_moved_any_need_no_tick(client, alice):
    workflow = make_workflow(kind="ticket_triage", title="Triage Q-7")
    make_step(
        workflow,
        1,
        "set_priority",
        "effect",
        status="pending",
        input={"field": "priority", "value": 3, "feedback": 2, "ticket_id": 42, "note": "refund asked"},
    )
    checkpoint = make_checkpoint(
        workflow,
        at_seq=1,
        plan=[{"name": "write_ticket_note", "kind": "effect", "amount": None, "currency": None, "moves_money": False}],
    )

    assert not checkpoint.touches_money()
    client.force_login(alice)
    _resume(client, checkpoint)
    assert Decision.objects.get().status == Decision.Status.QUEUED


# --- the reading itself: any shape, bounded -------------------------------------------------------------------


def test_deep_nesting_is_read_without_recursion_error_and_counts_as_unknown_money():
    deep: dict = {"amount": "1.00"}
    for _ in range(sys.getrecursionlimit() * 3):
        deep = {"x": deep}

    assert [str(a) for a in amounts_in(deep)] == ["amount unknown"]  # too deep to read: fail safe
    assert MoneyAtStake.of(
        {"unknown_effects": [{"name": "pay", "kind": "effect", "seq": 1, "input": deep}]}, kind="refund"
    ).amounts == ["amount unknown"]


def test_minor_units_follow_the_currency_exponent():
    assert [str(a) for a in amounts_in({"amount_cents": 42000, "currency": "EUR"})] == ["420.00 EUR"]
    assert [str(a) for a in amounts_in({"amountMinor": 500, "currency": "JPY"})] == ["500 JPY"]
    assert [str(a) for a in amounts_in({"total_minor_units": "12345", "currency": "KWD"})] == ["12.345 KWD"]


SPELLINGS = [
    "amount",
    "Amount",
    "AMOUNT",
    "refundAmount",
    "refund_amount",
    "total",
    "TotalPrice",
    "price",
    "unit-price",
    "grand total",
    "Amount.Value",
    "fee",
    "cost",
    "amt",
    "sum",
]
MINOR_SPELLINGS = ["amount_cents", "AmountCents", "priceCents", "amount_minor", "amountInMinorUnits", "totalCents"]
NOISE_KEYS = ["ticket", "customer", "channel", "note", "reason", "priority", "step", "context", "items", "meta"]


def _noise(rng: random.Random, depth: int):
    """Random JSON with no money in it: words, ids, flags and numbers under keys that name no money."""
    roll = rng.random()
    if depth <= 0 or roll < 0.3:
        return rng.choice([rng.randrange(10_000), "item arrived damaged", True, None, f"T-{rng.randrange(99)}", 3.5])
    if roll < 0.65:
        return {rng.choice(NOISE_KEYS) + str(i): _noise(rng, depth - 1) for i in range(rng.randrange(1, 4))}
    return [_noise(rng, depth - 1) for _ in range(rng.randrange(0, 4))]


def _hide(rng: random.Random, money: tuple[str, object], depth: int):
    """``money`` (key, value) placed at a random depth, inside dicts and lists of noise."""
    key, value = money
    node: object = {key: value, **({"currency": "EUR"} if rng.random() < 0.5 else {})}
    for _ in range(depth):
        node = (
            {rng.choice(NOISE_KEYS): node, "sibling": _noise(rng, 1)} if rng.random() < 0.6 else [_noise(rng, 1), node]
        )
    return node


def _seed() -> int:
    return int(os.environ.get("MONEY_SEED") or random.SystemRandom().randrange(2**32))


def test_money_hidden_at_random_depths_under_random_spellings_is_always_found():
    seed = _seed()
    print(f"money property seed: {seed}")  # rerun a failure with MONEY_SEED=<seed>
    rng = random.Random(seed)
    for _ in range(400):
        if rng.random() < 0.7:
            key = rng.choice(SPELLINGS)
            value = rng.choice(
                [
                    rng.randrange(1, 10**6),
                    f"{rng.randrange(1, 10**5)}.{rng.randrange(100):02d}",
                    rng.randrange(1, 10**4) / 4,
                    "1,234.56",
                    "unreadable",
                    {"value": 7},
                    [rng.randrange(1, 99)],
                ]
            )
        else:
            key, value = rng.choice(MINOR_SPELLINGS), rng.choice([rng.randrange(1, 10**7), str(rng.randrange(1, 999))])
        if rng.random() < 0.1:
            key, value = rng.choice(NOISE_KEYS), f"{rng.randrange(1, 999)}.00 {rng.choice(['EUR', 'USD', 'GBP'])}"
        data = _hide(rng, (key, value), rng.randrange(0, 12))
        state = {"pending": {"name": "issue_refund", "kind": "effect", "seq": 2, "input": data}}

        assert carries_money(data), json.dumps(data)[:500]
        assert MoneyAtStake.of(state, kind="refund"), json.dumps(data)[:500]


def test_random_inputs_without_money_are_not_money():
    seed = _seed()
    print(f"no-money property seed: {seed}")
    rng = random.Random(seed)
    for _ in range(400):
        data = _noise(rng, rng.randrange(0, 8))

        assert not carries_money(data), json.dumps(data)[:500]


def test_the_migration_marks_the_effects_recorded_before_it_by_the_same_rule(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    # Found by name, not number: migrations are renumbered when branches land together.
    name = next(
        n for app, n in executor.loader.disk_migrations if app == "workflows" and n.endswith("_step_carries_money")
    )
    before = [d for d in executor.loader.get_migration("workflows", name).dependencies if d[0] == "workflows"]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    agent = old.get_model("workflows", "Agent").objects.create(name="bot", token_hash="h" * 64, token_prefix="p")
    workflow = old.get_model("workflows", "Workflow").objects.create(
        agent=agent, external_id="T-1", kind="refund", title="T-1"
    )
    OldStep = old.get_model("workflows", "Step")
    for seq, kind, data in [
        (1, "effect", {"refund": {"Amount": "9.00"}}),
        (2, "effect", {"note": "hi"}),
        (3, "tool", {"amount": "9.00"}),
        (4, "effect", {"amount_cents": 900}),
    ]:
        OldStep.objects.create(
            workflow=workflow,
            seq=seq,
            name=f"s{seq}",
            kind=kind,
            status="committed",
            input=data,
            idempotency_key=f"k{seq}" if kind == "effect" else None,
        )
    executor = MigrationExecutor(connection)
    executor.migrate([("workflows", name)])

    assert list(Step.objects.order_by("seq").values_list("carries_money", flat=True)) == [True, False, False, True]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
