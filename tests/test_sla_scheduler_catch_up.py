"""The database is the timer: a scheduler down for an hour catches up with true timestamps, and
schedulers racing on PostgreSQL record every warning, breach, escalation level and notification once."""

import threading
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.db import connection

from tests.helpers import make_checkpoint, make_policy, make_runbook, make_user, run_together
from workflows import tasks
from workflows.models import Channel, Checkpoint, Delivery, EscalationLevel, Event, Notification


def chain_policy(adam, watchers):
    policy = make_policy(
        target=10,
        warning=3,
        claim_target_minutes=5,
        claim_warning=2,
        watchers=watchers,
        claim_reminder_minutes=4,
        claim_release_minutes=8,
    )
    EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, user=adam, stop_once_claimed=False)
    EscalationLevel.objects.create(
        policy=policy,
        delay_minutes=20,
        notify=True,
        user=adam,
        repeat_every_minutes=10,
        max_repeats=1,
        stop_once_claimed=False,
    )
    make_runbook(workflow_kind="refund", policy=policy)
    return policy


def expected_events(checkpoint) -> dict:
    return {
        "claim_warning": checkpoint.claim_warn_at,
        "claim_breached": checkpoint.claim_due_at,
        "sla_warning": checkpoint.warn_at,
        "sla_breached": checkpoint.due_at,
    }


def test_a_scheduler_down_for_an_hour_records_everything_once_at_its_true_time(db, adam):
    watchers = Group.objects.create(name="watchers")
    make_user("wanda").groups.add(watchers)
    chain_policy(adam, watchers)
    checkpoint = make_checkpoint()
    due = checkpoint.due_at
    counts = tasks.sweep_clocks(checkpoint.opened_at + timedelta(hours=1))  # the first sweep in an hour
    assert counts == {
        "claim_warnings": 1,
        "claim_breaches": 1,
        "warnings": 1,
        "breaches": 1,
        "escalations": 3,
        "reminders": 0,
        "releases": 0,
    }
    for verb, at in expected_events(checkpoint).items():
        assert list(Event.objects.filter(checkpoint=checkpoint, verb=verb).values_list("at", flat=True)) == [at]
    assert list(Event.objects.filter(checkpoint=checkpoint, verb="escalated").values_list("at", flat=True)) == [
        due,
        due + timedelta(minutes=20),
        due + timedelta(minutes=30),
    ]
    notified = Notification.objects.filter(checkpoint=checkpoint)
    assert sorted(notified.filter(recipient__username="wanda").values_list("kind", flat=True)) == [
        "claim_breached",
        "claim_warning",
        "sla_breached",
        "sla_warning",
    ]
    assert notified.filter(recipient=adam, kind="escalated").count() == 3
    assert {n.at for n in notified.filter(recipient=adam)} == {
        due,
        due + timedelta(minutes=20),
        due + timedelta(minutes=30),
    }
    # Running the sweep again, or later, adds nothing.
    before = (Event.objects.count(), Notification.objects.count())
    tasks.sweep_clocks(checkpoint.opened_at + timedelta(hours=1, seconds=5))
    tasks.sweep_clocks(checkpoint.opened_at + timedelta(hours=5))
    assert (Event.objects.count(), Notification.objects.count()) == before


def test_a_claim_after_the_claim_target_is_a_claim_breach_even_when_no_sweep_ran(db, alice, adam):
    chain_policy(adam, None)
    checkpoint = make_checkpoint()
    with time_machine.travel(checkpoint.claim_due_at + timedelta(minutes=1), tick=False):
        assert checkpoint.claim(by=alice)
    checkpoint.refresh_from_db()
    assert checkpoint.claim_breached_at == checkpoint.claim_due_at
    assert tasks.sweep_clocks(checkpoint.claim_due_at + timedelta(minutes=2))["claim_breaches"] == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_schedulers_record_each_warning_breach_escalation_and_notification_once():
    adam = make_user("adam", role="admin")
    watchers = Group.objects.create(name="watchers")
    make_user("wanda").groups.add(watchers)
    Channel.objects.create(kind="email", user=adam, address="adam@example.invalid")
    Channel.objects.create(kind="webhook", group=watchers, url="http://127.0.0.1:9/hook", slack=True)
    chain_policy(adam, watchers)
    checkpoints = [make_checkpoint() for _ in range(12)]
    later = max(c.opened_at for c in checkpoints) + timedelta(hours=1)
    schedulers = 6
    barrier = threading.Barrier(schedulers)
    errors = []

    def scheduler():
        try:
            barrier.wait()
            for _ in range(3):  # overlapping scans, again and again
                tasks.sweep_clocks(later)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    run_together([scheduler] * schedulers)
    assert errors == []
    n = len(checkpoints)
    for verb in ("claim_warning", "claim_breached", "sla_warning", "sla_breached"):
        assert Event.objects.filter(verb=verb).count() == n, verb
    assert Event.objects.filter(verb="escalated").count() == 3 * n
    assert Checkpoint.objects.filter(escalations_fired=3, escalation_at__isnull=True).count() == n
    # Per checkpoint: wanda hears 4 things, adam 3 escalations, and the group's channel gets the 4 group messages.
    assert Notification.objects.filter(recipient__username="wanda").count() == 4 * n
    assert Notification.objects.filter(recipient=adam).count() == 3 * n
    assert Notification.objects.filter(group=watchers).count() == 4 * n
    assert Delivery.objects.filter(channel__user=adam).count() == 3 * n
    assert Delivery.objects.filter(channel__group=watchers).count() == 4 * n
