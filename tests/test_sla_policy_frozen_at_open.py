"""A checkpoint's clocks come from the SLA policy in force when it opened, in business time, and stay put."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core.exceptions import ValidationError

from tests.helpers import make_checkpoint, make_policy, make_runbook
from workflows import tasks
from workflows.models import BusinessCalendar, Decider, Event, Holiday, SLAPolicy

BERLIN = ZoneInfo("Europe/Berlin")


def office_calendar() -> BusinessCalendar:
    calendar = BusinessCalendar.objects.create(
        name="Berlin office", time_zone="Europe/Berlin", weekdays=[0, 1, 2, 3, 4], opens="09:00", closes="17:00"
    )
    Holiday.objects.create(calendar=calendar, day=date(2026, 12, 24), name="Heiligabend")
    Holiday.objects.create(calendar=calendar, day=date(2026, 12, 25), name="Weihnachten")
    return calendar


def test_the_clocks_are_computed_from_the_runbooks_policy_with_both_targets(db):
    policy = make_policy(target=60, warning=25, claim_target_minutes=10, claim_warning=20, claim_warning_unit="percent")
    make_runbook(workflow_kind="refund", policy=policy)
    with time_machine.travel(datetime(2026, 12, 1, 10, tzinfo=UTC), tick=False):
        checkpoint = make_checkpoint()
    opened = checkpoint.opened_at
    assert checkpoint.policy == policy and checkpoint.sla["policy"] == policy.name
    assert checkpoint.due_at - opened == timedelta(minutes=60)
    assert checkpoint.warn_at - opened == timedelta(minutes=35)
    assert checkpoint.claim_due_at - opened == timedelta(minutes=10)
    assert checkpoint.claim_warn_at - opened == timedelta(minutes=8)  # 20 % of 10 minutes before


def test_a_checkpoint_opened_on_friday_afternoon_is_due_on_monday_in_business_time(db):
    policy = make_policy(target=120, warning=30, calendar=office_calendar())
    make_runbook(workflow_kind="refund", policy=policy)
    with time_machine.travel(datetime(2026, 12, 4, 16, 0, tzinfo=BERLIN), tick=False):
        checkpoint = make_checkpoint()
    assert checkpoint.due_at == datetime(2026, 12, 7, 10, 0, tzinfo=BERLIN)
    assert checkpoint.warn_at == datetime(2026, 12, 7, 9, 30, tzinfo=BERLIN)
    # The weekend passes without a warning; Monday morning the sweep records both at their times.
    assert tasks.record_sla(datetime(2026, 12, 6, 23, tzinfo=BERLIN)) == (0, 0)
    assert tasks.record_sla(datetime(2026, 12, 7, 11, tzinfo=BERLIN)) == (1, 1)
    checkpoint.refresh_from_db()
    assert checkpoint.breached_at == datetime(2026, 12, 7, 10, 0, tzinfo=BERLIN)
    assert checkpoint.terms.left(datetime(2026, 12, 7, 11, tzinfo=BERLIN), checkpoint.due_at) == timedelta(hours=-1)


def test_editing_a_policy_after_a_checkpoint_opened_does_not_move_its_clock(db):
    policy = make_policy(target=30, warning=10)
    make_runbook(workflow_kind="refund", policy=policy)
    checkpoint = make_checkpoint()
    due, warn = checkpoint.due_at, checkpoint.warn_at
    policy.decision_target_minutes, policy.calendar = 5, office_calendar()
    policy.save()
    tasks.record_sla(checkpoint.opened_at + timedelta(minutes=10))
    checkpoint.refresh_from_db()
    assert (checkpoint.due_at, checkpoint.warn_at, checkpoint.breached_at) == (due, warn, None)
    assert checkpoint.sla["decision_target"] == 30 * 60 and checkpoint.sla["hours"] is None
    assert make_checkpoint().sla["decision_target"] == 5 * 60  # a new checkpoint gets the new terms


def test_a_checkpoint_without_a_runbook_gets_the_default_terms(db):
    checkpoint = make_checkpoint()
    assert checkpoint.runbook is None and checkpoint.policy is None
    assert checkpoint.due_at - checkpoint.opened_at == timedelta(minutes=30)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"decision_target_minutes": 10, "decision_warning": 10},
            "decision_warning",
            "must be shorter than the target",
        ),
        (
            {"decision_target_minutes": 10, "decision_warning": 100, "decision_warning_unit": "percent"},
            "decision_warning",
            "between 1 and 99",
        ),
        ({"decision_target_minutes": 10, "claim_target_minutes": 20}, "claim_target_minutes", "cannot be longer"),
        ({"decision_target_minutes": 0}, "decision_target_minutes", "greater than or equal to 1"),
        ({"claim_reminder_minutes": 10, "claim_release_minutes": 5}, "claim_release_minutes", "after the reminder"),
    ],
)
def test_a_policy_that_could_not_work_is_refused_with_a_message(db, fields, field, message):
    policy = SLAPolicy(name="bad", **fields)
    with pytest.raises(ValidationError) as error:
        policy.full_clean()
    assert message in " ".join(error.value.message_dict[field])


def test_a_calendar_must_have_a_working_day_and_close_after_it_opens(db):
    with pytest.raises(ValidationError, match="working day"):
        BusinessCalendar(name="never", weekdays=[]).full_clean()
    with pytest.raises(ValidationError, match="close after they open"):
        BusinessCalendar(name="inverted", opens="17:00", closes="09:00").full_clean()
    with pytest.raises(ValidationError, match="time zone"):
        BusinessCalendar(name="mars", time_zone="Mars/Base").full_clean()
    BusinessCalendar(name="night desk", opens="00:00", closes="00:00").full_clean()  # 00:00 closes at midnight


def test_the_breach_is_stamped_with_the_due_time_not_the_moment_a_sweep_noticed(db):
    checkpoint = make_checkpoint()
    much_later = checkpoint.due_at + timedelta(hours=3)
    tasks.record_sla(much_later)
    checkpoint.refresh_from_db()
    assert checkpoint.breached_at == checkpoint.due_at
    breach = Event.objects.get(checkpoint=checkpoint, verb="sla_breached")
    warning = Event.objects.get(checkpoint=checkpoint, verb="sla_warning")
    assert (breach.at, warning.at) == (checkpoint.due_at, checkpoint.warn_at)


def test_a_decision_after_the_due_time_records_the_breach_even_before_a_sweep(db, alice):
    checkpoint = make_checkpoint()
    with time_machine.travel(checkpoint.due_at + timedelta(minutes=4), tick=False):
        Decider(checkpoint).decide(by=alice, action="abort", instructions="late")
    checkpoint.refresh_from_db()
    assert checkpoint.breached_at == checkpoint.due_at
    assert Event.objects.filter(checkpoint=checkpoint, verb="sla_breached").count() == 1
    assert tasks.record_sla(checkpoint.due_at + timedelta(hours=1)) == (0, 0)
