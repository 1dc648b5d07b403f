"""One money effect is counted once (issue 28, item 3): a pending credit that the agent's plan lists again was
two identical "64.50 USD" badges on INV-1008's queue row and two money reasons on its workbench."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_step, make_workflow
from workflows.money import MoneyAtStake

pytestmark = pytest.mark.django_db

CREDIT = {"name": "issue_credit", "kind": "effect", "amount": "64.50", "currency": "USD", "moves_money": True}
NOTIFY = {"name": "notify_customer", "kind": "message", "amount": None, "currency": None, "moves_money": False}


def _inv_1008(plan):
    workflow = make_workflow(kind="invoice_dispute", external_id="INV-1008", title="Dispute INV-1008")
    make_step(workflow, 1, "read_invoice", "tool", output={"total": "64.50"}, verified=True)
    make_step(workflow, 2, "issue_credit", "effect", status="pending", input={"amount": "64.50", "currency": "USD"})
    return make_checkpoint(workflow, at_seq=2, plan=plan)


def test_a_pending_effect_the_plan_repeats_is_one_badge_and_one_reason(client, alice):
    checkpoint = _inv_1008([CREDIT, NOTIFY])

    assert checkpoint.money_at_stake == ["64.50 USD"]
    assert checkpoint.money_reasons() == ["issue_credit (outcome unknown): 64.50 USD"]
    client.force_login(alice)
    queue = client.get(reverse("queue")).content.decode()
    assert queue.count('data-testid="badge-money"') == 1
    workbench = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    reasons = re.search(r'data-testid="money-reasons">(.*?)</ul>', workbench, re.S)
    assert reasons is not None and reasons.group(1).count("<li>") == 1
    assert 'data-testid="plan-same-effect"' in workbench  # the plan says it is the same credit, not a second


def test_the_plan_step_without_an_amount_is_the_pending_effect_and_lends_it_nothing_new():
    checkpoint = _inv_1008([{**CREDIT, "amount": None, "currency": None}])

    assert checkpoint.money_at_stake == ["64.50 USD"]


def test_two_like_credits_in_the_plan_stay_two_and_a_different_amount_is_another_effect():
    state: dict[str, Any] = {
        "plan": [CREDIT, CREDIT, {**CREDIT, "amount": "10.00"}],
        "unknown_effects": [
            {
                "name": "issue_credit",
                "kind": "effect",
                "seq": 2,
                "idempotency_key": "k",
                "input": {"amount": "64.50", "currency": "USD"},
            }
        ],
    }
    state["pending"] = state["unknown_effects"][0]  # the pending step is the unknown one: still once

    money = MoneyAtStake.of(state, kind="invoice_dispute")

    assert money.amounts == ["64.50 USD", "64.50 USD", "10.00 USD"]
    assert [e.where for e in money.effects] == ["outcome unknown", "planned", "planned"]
