"""A claim with no progress gets a reminder, then goes back to the queue; both once, at their times."""

from datetime import timedelta

import time_machine

from tests.helpers import make_checkpoint, make_policy, make_runbook
from workflows import tasks
from workflows.models import Decider, Event, Notification


def claimed_checkpoint(operator):
    make_runbook(
        workflow_kind="refund",
        policy=make_policy(target=60, warning=10, claim_reminder_minutes=10, claim_release_minutes=20),
    )
    checkpoint = make_checkpoint()
    checkpoint.claim(by=operator)
    return checkpoint


def test_a_stale_claim_is_reminded_then_released_to_the_queue(db, alice):
    checkpoint = claimed_checkpoint(alice)
    claimed = checkpoint.claimed_at
    assert checkpoint.remind_at == claimed + timedelta(minutes=10)
    assert tasks.sweep_clocks(claimed + timedelta(minutes=11))["reminders"] == 1
    assert tasks.sweep_clocks(claimed + timedelta(minutes=12))["reminders"] == 0
    [reminder] = Notification.objects.filter(kind="claim_reminder")
    assert reminder.recipient == alice and reminder.at == claimed + timedelta(minutes=10)
    checkpoint.refresh_from_db()
    assert checkpoint.status == "claimed"

    assert tasks.sweep_clocks(claimed + timedelta(minutes=21))["releases"] == 1
    checkpoint.refresh_from_db()
    assert checkpoint.status == "open" and checkpoint.assignee is None
    released = Event.objects.get(checkpoint=checkpoint, verb="released")
    assert released.at == claimed + timedelta(minutes=20) and released.data["from_assignee"] == "alice"
    assert Notification.objects.get(kind="claim_released").recipient == alice


def test_a_decision_stops_the_no_progress_timers(db, alice):
    checkpoint = claimed_checkpoint(alice)
    Decider(checkpoint).decide(by=alice, action="abort", instructions="withdrawn")
    counts = tasks.sweep_clocks(checkpoint.claimed_at + timedelta(minutes=30))
    assert (counts["reminders"], counts["releases"]) == (0, 0)


def test_a_new_claim_restarts_the_no_progress_timers(db, alice, bob):
    checkpoint = claimed_checkpoint(alice)
    with time_machine.travel(checkpoint.claimed_at + timedelta(minutes=15), tick=False):
        checkpoint.assign(to=bob, by=alice, note="yours")
    tasks.sweep_clocks(checkpoint.claimed_at + timedelta(minutes=9))
    checkpoint.refresh_from_db()
    assert checkpoint.status == "claimed" and checkpoint.assignee == bob
    assert not Notification.objects.filter(kind="claim_reminder").exists()
