"""The money rule fails safe for shapes that name no money word (a security review's finding): a currency as the
key (``{"eur": 420}``), a currency code in lower case in free text (``"420 eur"``), exponent notation
(``"1e3 USD"``), a currency code on its own beside a number, and a negative amount, which is never netted
against another so that no total at stake can be made to cancel out. Each is seen by the reading itself, by the
workbench's money tick and four eyes, by the API's refusal of a drilled workflow's money effect, and by an
incident rollout's total."""

from __future__ import annotations

import pytest

from tests.apitools import assert_error, issue_refund
from tests.helpers import make_agent, make_checkpoint, make_step, make_workflow
from tests.test_drills import drilling_agent, make_drill
from tests.test_money_guard_fails_safe import _assert_guarded, _paused_on_a_pending_effect
from workflows.models import Incident, Rollout
from workflows.money import amounts_in, carries_money

pytestmark = pytest.mark.django_db

SHAPES = [
    ({"usd": 420}, ["420 USD"]),
    ({"EUR": "420.00"}, ["420.00 EUR"]),
    ({"refund_to_card": {"eur": 420}}, ["420 EUR"]),
    ({"note": "420 eur"}, ["420 EUR"]),
    ({"note": "1e3 USD"}, ["amount unknown (USD)"]),
    ({"note": "USD 1e3"}, ["amount unknown (USD)"]),
    ({"amount": "1e999999"}, ["amount unknown"]),  # never expanded to its digits
    ({"line": [420, "EUR"]}, ["amount unknown (EUR)"]),
    ({"amount": -500, "currency": "EUR"}, ["amount unknown (EUR)"]),
    ({"note": "-500.00 EUR"}, ["amount unknown (EUR)"]),
]


@pytest.mark.parametrize(("effect_input", "read"), SHAPES, ids=[repr(s) for s, _ in SHAPES])
def test_each_shape_is_read_as_money(effect_input, read):
    assert carries_money(effect_input)
    assert [str(a) for a in amounts_in(effect_input)] == read


@pytest.mark.parametrize(
    "effect_input",
    [
        {"note": "12 pcs"},
        {"top": "news", "all": True},
        {"currency": "EUR", "amount": "5.00"},  # the code beside its amount is not a second, unknown one
        {"field": "priority", "value": 3, "ticket_id": 42},
    ],
)
def test_words_that_look_like_codes_are_not_money_and_a_code_beside_its_amount_is_read_once(effect_input):
    expected = ["5.00 EUR"] if "amount" in effect_input else []
    assert [str(a) for a in amounts_in(effect_input)] == expected


@pytest.mark.parametrize(
    ("effect_input", "shown"),
    [({"eur": 420}, "420 EUR"), ({"note": "420 eur"}, "420 EUR"), ({"note": "1e3 USD"}, "amount unknown")],
)
def test_the_workbench_asks_the_tick_and_four_eyes_for_them(client, alice, effect_input, shown):
    checkpoint = _paused_on_a_pending_effect(effect_input)
    _assert_guarded(client, alice, checkpoint, shown)


@pytest.mark.parametrize("effect_input", [{"eur": 420}, {"refund_to_card": {"usd": 420}}, {"note": "420 eur"}])
def test_a_drilled_workflow_cannot_move_them(effect_input):
    bot = drilling_agent()
    make_drill(bot.agent, runs=3).start()
    wf = bot.create_workflow("T-1")["id"]
    assert_error(bot.post(f"/workflows/{wf}/steps", issue_refund(input=effect_input)), 409, "drill_refuses_money")


def test_a_negative_amount_cannot_cancel_another_out_of_a_rollouts_total(alice):
    agent, _ = make_agent()
    agent.incident_threshold = 2
    agent.save()
    for i, amount in enumerate(("500.00", "-500.00")):
        workflow = make_workflow(agent, kind="refund")
        make_step(workflow, 1, "read_ticket", "tool", output={"ticket": f"T-{i}"}, verified=True)
        make_step(
            workflow,
            2,
            "issue_refund",
            "effect",
            status="pending",
            input={"amount": amount, "currency": "EUR"},
            idempotency_key=f"T-{i}:refund",
        )
        make_checkpoint(workflow, at_seq=2, reason="tool_error", plan=[], detail=f"provider answered 502 for T-{i}")
    incident = Incident.objects.get(agent=agent)

    stake = Rollout.stake_of(incident, "resume")

    assert stake.text() == "500.00 EUR" and len(stake.members) == 1  # not "0.00 EUR" over both
    assert stake.unreadable == 1  # the negative one waits for its own decision
    with pytest.raises(ValueError, match="500.00"):
        Rollout.start(incident, action="resume", by=alice, money_total={"EUR": "0"})
