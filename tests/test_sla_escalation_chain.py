"""The escalation chain: each level fires once at its delay after the breach, notifies and/or reassigns,
repeats up to its cap, and stops once someone holds the checkpoint when told to."""

from datetime import UTC, datetime, timedelta

import time_machine
from django.contrib.auth.models import Group

from tests.helpers import make_checkpoint, make_policy, make_runbook, make_user
from workflows import tasks
from workflows.models import BusinessCalendar, EscalationLevel, Event, Notification, OperatorProfile


def policy_with(*levels: dict, **fields):
    policy = make_policy(target=30, warning=10, **fields)
    for spec in levels:
        EscalationLevel.objects.create(policy=policy, **spec)
    make_runbook(workflow_kind="refund", policy=policy)
    return policy


def team(*names: str) -> Group:
    group, _ = Group.objects.get_or_create(name="night-desk")
    for name in names:
        make_user(name).groups.add(group)
    return group


def fired(checkpoint) -> list[dict]:
    return [e.data for e in Event.objects.filter(checkpoint=checkpoint, verb="escalated").order_by("at", "pk")]


def test_each_level_fires_once_at_its_delay_after_the_breach(db, adam):
    policy_with(
        {"delay_minutes": 0, "notify": True, "user": adam},
        {"delay_minutes": 15, "notify": True, "reassign": True, "user": adam},
    )
    checkpoint = make_checkpoint()
    due = checkpoint.due_at
    tasks.sweep_clocks(due + timedelta(minutes=1))
    assert [d["level"] for d in fired(checkpoint)] == [1]
    tasks.sweep_clocks(due + timedelta(minutes=14))
    assert len(fired(checkpoint)) == 1
    tasks.sweep_clocks(due + timedelta(minutes=16))
    tasks.sweep_clocks(due + timedelta(minutes=60))
    assert [d["level"] for d in fired(checkpoint)] == [1, 2]
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == adam and checkpoint.escalation_at is None and checkpoint.escalations_fired == 2
    times = list(Event.objects.filter(checkpoint=checkpoint, verb="escalated").values_list("at", flat=True))
    assert times == [due, due + timedelta(minutes=15)]
    kinds = list(Notification.objects.filter(recipient=adam).values_list("kind", flat=True))
    assert sorted(kinds) == ["assigned", "escalated", "escalated"]


def test_a_group_escalation_reassigns_to_its_least_loaded_working_operator(db):
    group = team("olga", "pete", "quinn")
    busy = make_checkpoint()
    busy.claim(by=make_user("olga"))
    away = BusinessCalendar.objects.create(name="never now", weekdays=[0], opens="00:00", closes="00:01")
    OperatorProfile.objects.create(user=make_user("pete"), calendar=away)  # outside his hours (almost always)
    policy_with({"delay_minutes": 0, "notify": False, "reassign": True, "group": group, "stop_once_claimed": False})
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(seconds=1))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee.username == "quinn"
    assert fired(checkpoint)[0]["reassigned_to"] == "quinn"
    assert Notification.objects.get(kind="assigned").recipient.username == "quinn"


def test_a_level_that_stops_once_claimed_is_skipped_when_someone_holds_the_checkpoint(db, alice, adam):
    policy_with({"delay_minutes": 5, "notify": True, "reassign": True, "user": adam, "stop_once_claimed": True})
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=10))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice
    assert fired(checkpoint) == []
    assert Event.objects.filter(checkpoint=checkpoint, verb="escalation_skipped").count() == 1
    assert not Notification.objects.filter(recipient=adam).exists()


def test_repeats_fire_at_their_interval_up_to_the_cap(db, adam):
    policy_with({"delay_minutes": 0, "notify": True, "user": adam, "repeat_every_minutes": 10, "max_repeats": 2})
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(hours=5))
    assert [(d["level"], d["repeat"]) for d in fired(checkpoint)] == [(1, 0), (1, 1), (1, 2)]
    assert Notification.objects.filter(recipient=adam, kind="escalated").count() == 3
    tasks.sweep_clocks(checkpoint.due_at + timedelta(hours=10))
    assert len(fired(checkpoint)) == 3


def test_an_inactive_escalation_user_is_not_given_the_checkpoint(db, adam):
    policy_with({"delay_minutes": 0, "notify": True, "reassign": True, "user": adam})
    adam.is_active = False
    adam.save()
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(seconds=1))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee is None and checkpoint.status == "open"
    assert fired(checkpoint)[0]["not_reassigned"] == "adam is inactive"


def test_escalation_delays_are_business_time(db, adam):
    calendar = BusinessCalendar.objects.create(name="office", time_zone="UTC", weekdays=[0, 1, 2, 3, 4])
    policy_with({"delay_minutes": 60, "notify": True, "user": adam}, calendar=calendar)
    with time_machine.travel(datetime(2026, 12, 4, 16, 0, tzinfo=UTC), tick=False):  # a Friday
        checkpoint = make_checkpoint()
    assert checkpoint.due_at == datetime(2026, 12, 4, 16, 30, tzinfo=UTC)
    tasks.sweep_clocks(datetime(2026, 12, 6, 12, tzinfo=UTC))
    checkpoint.refresh_from_db()
    assert checkpoint.escalation_at == datetime(2026, 12, 7, 9, 30, tzinfo=UTC)  # 30 min Friday, 30 min Monday
    assert fired(checkpoint) == []
