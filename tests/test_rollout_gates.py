"""A rollout's gates before any wave goes out: the money at stake typed per currency (a mismatch refuses,
members the typed total does not cover wait), and under a four-eyes runbook the rollout as a whole is
proposed by one operator and approved (or rejected) by another eligible one, never the proposer; each
member's decision is then proposed by the one and approved by the other. Audited on the incident."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_worked_example
from workflows.models import Checkpoint, Conflict, Decision, Event, Incident, Rollout

pytestmark = pytest.mark.django_db

SHIPPING = {"name": "refund_shipping", "kind": "effect", "amount": "5.00", "currency": "EUR", "moves_money": True}
FEE = {"name": "refund_fee", "kind": "effect", "amount": "1.50", "currency": "USD", "moves_money": True}


def _incident(n=3, *, plan=(SHIPPING,), agent=None):
    if agent is None:
        agent, _ = make_agent()
        agent.incident_threshold = n
        agent.save()
    for i in range(n):
        make_checkpoint(
            make_worked_example(agent=agent),
            reason="tool_error",
            plan=list(plan),
            detail=f"provider answered 502 for T-{i}",
        )
    return Incident.objects.get(agent=agent)


def _decided():
    return Decision.objects.filter(checkpoint__incident__isnull=False)


def _incident_events(incident, verb):
    return Event.objects.filter(subject=f"incident:{incident.pk}", verb=verb)


def test_the_total_at_stake_is_typed_per_currency_and_a_mismatch_refuses(alice):
    incident = _incident(3, plan=(SHIPPING, FEE))
    stake = Rollout.stake_of(incident, "resume")
    assert stake.text() == "15.00 EUR, 4.50 USD" and len(stake.members) == 3
    for typed, says in [
        (None, "type the total at stake"),
        ({"EUR": "15.00"}, "in USD too"),
        ({"EUR": "15.01", "USD": "4.50"}, "in EUR is 15.00, not 15.01"),
        ({"EUR": "fifteen", "USD": "4.50"}, "not an amount of EUR"),
        ({"EUR": "15", "USD": "4.5", "GBP": "1"}, "No GBP is at stake"),
    ]:
        with pytest.raises(ValueError, match=says):
            Rollout.start(incident, action="resume", by=alice, money_total=typed)
    assert not Rollout.objects.exists()
    rollout = Rollout.start(
        incident, action="resume", by=alice, canary_percent=100, money_total={"eur": " 15 ", "USD": "4.500"}
    )  # the same amounts, spelled otherwise
    assert rollout.money_total == {"EUR": "15.00", "USD": "4.50"} and rollout.money_confirmed
    started = _incident_events(incident, Event.Verb.ROLLOUT_STARTED).get()
    assert started.data["money_total"] == {"EUR": "15.00", "USD": "4.50"} and started.actor_user == alice
    Rollout.advance_due(timezone.now())
    assert _decided().count() == 3


def test_an_abort_moves_no_money_and_asks_for_no_total(alice):
    incident = _incident(2)
    Rollout.start(incident, action="abort", by=alice, canary_percent=100)
    Rollout.advance_due(timezone.now())
    assert _decided().count() == 2


def test_a_member_joining_after_the_total_was_confirmed_waits_for_its_own_decision(alice):
    incident = _incident(2)
    rollout = Rollout.start(incident, action="resume", by=alice, canary_percent=100, money_total={"EUR": "10.00"})
    _incident(1, agent=incident.agent)  # joins the open incident: its 5.00 EUR is not in the typed total
    assert incident.members.count() == 3
    Rollout.advance_due(timezone.now())
    rollout.refresh_from_db()
    assert len(rollout.waves[0]["checkpoints"]) == 2
    [(late, why)] = rollout.waiting()
    assert late.pk not in rollout.money_members and "total does not cover" in why


def test_under_four_eyes_the_rollout_is_proposed_and_no_wave_goes_out_until_another_operator_approves(alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    incident = _incident(3)
    rollout = Rollout.start(incident, action="resume", by=alice, canary_percent=100, money_total={"EUR": "15.00"})
    assert rollout.status == Rollout.Status.PROPOSED and rollout.awaits_approval
    assert Rollout.advance_due(timezone.now()) == 0 and not _decided().exists()
    with pytest.raises(Conflict):
        Rollout.start(incident, action="abort", by=bob)  # a proposal is an active rollout

    assert not rollout.approve(by=alice), "never the proposer"
    assert "another operator" in rollout.refusal(by=alice)
    assert rollout.approve(by=bob)
    assert (rollout.status, rollout.approved_by) == (Rollout.Status.RUNNING, bob)
    Rollout.advance_due(timezone.now())
    decisions = list(_decided())
    assert len(decisions) == 3
    assert {(d.decided_by, d.approved_by, d.status) for d in decisions} == {(alice, bob, Decision.Status.QUEUED)}
    assert _incident_events(incident, Event.Verb.ROLLOUT_PROPOSED).get().actor_user == alice
    assert _incident_events(incident, Event.Verb.ROLLOUT_APPROVED).get().actor_user == bob
    assert Event.objects.filter(decision__in=decisions, verb=Event.Verb.APPROVED, actor_user=bob).count() == 3


def test_a_tpm_may_not_approve_and_a_rejected_rollout_never_sends_a_wave(alice, bob, tess):
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    incident = _incident(2, plan=())
    rollout = Rollout.start(incident, action="resume", by=alice)
    assert rollout.awaits_approval
    assert not rollout.approve(by=tess) and "active operator" in rollout.refusal(by=tess)
    assert not rollout.reject(by=alice)
    assert rollout.reject(by=bob, note="the provider is still down")
    assert rollout.status == Rollout.Status.REJECTED
    assert not rollout.approve(by=bob) and "rejected" in rollout.refusal(by=bob)
    Rollout.advance_due(timezone.now())
    assert not _decided().exists()
    rejected = _incident_events(incident, Event.Verb.ROLLOUT_REJECTED).get()
    assert rejected.actor_user == bob and rejected.data["note"] == "the provider is still down"
    Rollout.start(incident, action="resume", by=bob)  # a rejected rollout is over: another may be proposed


def test_without_a_four_eyes_runbook_the_rollout_runs_at_once(alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    incident = _incident(2, plan=())
    for c in incident.members.all():  # no money anywhere: requires_four_eyes is about money only
        Checkpoint.objects.filter(pk=c.pk).update(resume_state={**c.resume_state, "committed": []})
    assert Rollout.start(incident, action="resume", by=alice).status == Rollout.Status.RUNNING


def test_a_member_joining_after_the_approval_is_proposed_for_a_second_operator_not_approved_in_the_approvers_name(
    alice, bob
):
    """Four eyes on every resume, no money: the approver approved the members open then, not whoever joins."""
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    incident = _incident(2, plan=())
    rollout = Rollout.start(incident, action="resume", by=alice, canary_percent=100)
    assert rollout.approve(by=bob)
    _incident(1, plan=(), agent=incident.agent)  # a third one of the same failure joins afterwards
    latecomer = incident.members.order_by("-pk").first()
    assert latecomer.pk not in rollout.approved_members

    Rollout.advance_due(timezone.now())

    decided = {d.checkpoint_id: d for d in _decided()}
    assert decided[latecomer.pk].status == Decision.Status.PROPOSED and decided[latecomer.pk].approved_by is None
    assert {d.status for pk, d in decided.items() if pk != latecomer.pk} == {Decision.Status.QUEUED}


def test_under_four_eyes_the_proposer_alone_cannot_let_a_halted_rollout_go_on(alice, bob, client):
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    incident = _incident(2, plan=())
    rollout = Rollout.start(incident, action="resume", by=alice)
    assert rollout.approve(by=bob)
    Rollout.objects.filter(pk=rollout.pk).update(status=Rollout.Status.HALTED, halt_reason="2 of 2 failed")
    rollout.refresh_from_db()

    assert not rollout.carry_on(by=alice)
    client.force_login(alice)
    page = client.post(f"/rollouts/{rollout.pk}/", {"do": "continue"}, follow=True).content.decode()
    assert "another operator than its proposer" in page
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.HALTED
    assert rollout.carry_on(by=bob)
