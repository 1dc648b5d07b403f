"""A reopened checkpoint continues its decision clock, and work returned to its previous holder falls
back to the queue when that person is inactive, lost the operator role, or is outside their hours."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import time_machine
from django.conf import settings

from console.roles import set_role
from tests.helpers import make_checkpoint, make_policy, make_runbook, make_worked_example
from workflows.models import BusinessCalendar, Decider, Decision, Event, OperatorProfile


def test_a_failed_delivery_reopens_the_checkpoint_with_the_clock_where_it_stopped(db, alice):
    make_runbook(workflow_kind="refund", policy=make_policy(target=30, warning=10))
    checkpoint = make_checkpoint()
    opened = checkpoint.opened_at
    with time_machine.travel(opened + timedelta(minutes=12), tick=False):  # 18 minutes left
        decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="stop")
    with time_machine.travel(opened + timedelta(minutes=50), tick=False):  # delivery failed for good
        Decision.objects.filter(pk=decision.pk).update(status="running", attempts=settings.DELIVERY_MAX_ATTEMPTS)
        decision.refresh_from_db()
        # A worker's failure runs on the database's clock (workflows.clock): the test says when it is.
        assert decision.mark_attempt_failed("agent down", now=opened + timedelta(minutes=50))
        checkpoint.refresh_from_db()
        assert checkpoint.status == "open" and checkpoint.breached_at is None
        assert checkpoint.due_at == opened + timedelta(minutes=50 + 18)  # continued, not restarted from 30
        assert checkpoint.warn_at == opened + timedelta(minutes=50 + 8)


def test_a_checkpoint_breached_before_its_decision_keeps_its_breach_when_reopened(db, alice):
    checkpoint = make_checkpoint()
    with time_machine.travel(checkpoint.due_at + timedelta(minutes=5), tick=False):
        decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="stop")
    Decision.objects.filter(pk=decision.pk).update(status="running", attempts=settings.DELIVERY_MAX_ATTEMPTS)
    decision.refresh_from_db()
    decision.mark_attempt_failed("agent down")
    checkpoint.refresh_from_db()
    assert checkpoint.breached_at == checkpoint.due_at and checkpoint.status == "open"


def four_eyes_rejected(proposer, reviewer):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    checkpoint.claim(by=proposer)
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = Decider(checkpoint).decide(
        by=proposer,
        action="resume",
        confirmations={key: "happened"},
        confirmation_refs={key: "R-1"},
        money_confirmed=True,
    )
    assert decision.status == "proposed"
    return checkpoint, decision


def test_a_rejected_proposal_goes_back_to_its_proposer_when_they_can_take_it(db, alice, bob):
    checkpoint, decision = four_eyes_rejected(alice, bob)
    assert decision.reject(by=bob, note="not yet")
    checkpoint.refresh_from_db()
    assert checkpoint.status == "claimed" and checkpoint.assignee == alice


def test_a_rejected_proposal_falls_back_to_the_queue_when_the_proposer_is_inactive(db, alice, bob):
    checkpoint, decision = four_eyes_rejected(alice, bob)
    alice.is_active = False
    alice.save()
    assert decision.reject(by=bob, note="not yet")
    checkpoint.refresh_from_db()
    assert checkpoint.status == "open" and checkpoint.assignee is None
    back = Event.objects.get(checkpoint=checkpoint, verb="returned_to_queue")
    assert back.data["fallback"] == "alice is inactive"


def test_a_rejected_proposal_falls_back_to_the_queue_when_the_proposer_lost_the_operator_role(db, alice, bob):
    checkpoint, decision = four_eyes_rejected(alice, bob)
    set_role(alice, "tpm")
    assert decision.reject(by=bob, note="not yet")
    checkpoint.refresh_from_db()
    assert checkpoint.status == "open"
    assert (
        Event.objects.get(checkpoint=checkpoint, verb="returned_to_queue").data["fallback"]
        == "alice no longer has the operator role"
    )


def test_a_rejected_proposal_falls_back_to_the_queue_outside_the_proposers_working_hours(db, alice, bob):
    checkpoint, decision = four_eyes_rejected(alice, bob)
    weekdays = BusinessCalendar.objects.create(name="weekdays", time_zone="Europe/Berlin", weekdays=[0, 1, 2, 3, 4])
    OperatorProfile.objects.create(user=alice, calendar=weekdays)
    with time_machine.travel(datetime(2026, 12, 5, 11, tzinfo=ZoneInfo("Europe/Berlin")), tick=False):  # Saturday
        assert decision.reject(by=bob, note="not yet")
    checkpoint.refresh_from_db()
    assert checkpoint.status == "open"
    assert (
        Event.objects.get(checkpoint=checkpoint, verb="returned_to_queue").data["fallback"]
        == "alice is outside their working hours"
    )
