"""The SLA clock: due and warning times from the runbook, a breach recorded once, escalation named."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.helpers import (
    make_checkpoint,
    make_runbook,
    make_user,
    make_worked_example,
    make_workflow,
    run_together,
)
from workflows import tasks
from workflows.models import Checkpoint, Decider, Event


def test_due_and_warning_times_come_from_the_matching_runbook(db):
    make_runbook(slug="default", is_default=True, sla_target_minutes=60, sla_warning_minutes=15)
    make_runbook(
        slug="refund-timeouts",
        workflow_kind="refund",
        reason="model_timeout",
        sla_target_minutes=20,
        sla_warning_minutes=5,
    )
    checkpoint = make_checkpoint(reason="model_timeout")
    assert checkpoint.runbook.slug == "refund-timeouts"
    assert checkpoint.due_at - checkpoint.opened_at == timedelta(minutes=20)
    assert checkpoint.due_at - checkpoint.warn_at == timedelta(minutes=5)

    other = make_checkpoint(make_workflow(kind="ticket_triage"), reason="rate_limit")
    assert other.runbook.slug == "default"


def test_a_kind_specific_runbook_beats_a_reason_specific_one(db):
    make_runbook(slug="any-timeout", reason="model_timeout")
    make_runbook(slug="refunds", workflow_kind="refund")
    assert make_checkpoint(reason="model_timeout").runbook.slug == "refunds"


def test_a_breach_is_recorded_once_and_escalates_to_the_escalation_target(db):
    adam = make_user("adam", role="admin")
    make_runbook(slug="refunds", workflow_kind="refund", escalation_target=adam)
    checkpoint = make_checkpoint()
    later = checkpoint.due_at + timedelta(seconds=1)
    assert tasks.record_sla(later) == (1, 1)
    assert tasks.record_sla(later + timedelta(minutes=5)) == (0, 0)
    [breach] = Event.objects.filter(checkpoint=checkpoint, verb="sla_breached")
    assert breach.data["escalates_to"] == "adam"
    [escalation] = Event.objects.filter(checkpoint=checkpoint, verb="escalated")
    assert escalation.data["reassigned_to"] == "adam"
    checkpoint.refresh_from_db()
    assert checkpoint.is_breached and checkpoint.assignee == adam


def test_the_clock_does_not_breach_a_decided_checkpoint(db, alice):
    checkpoint = make_checkpoint(make_worked_example())
    Decider(checkpoint).decide(by=alice, action="abort", instructions="customer withdrew")
    assert tasks.record_sla(checkpoint.due_at + timedelta(hours=1)) == (0, 0)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_schedulers_record_each_breach_once():
    checkpoints = [make_checkpoint() for _ in range(10)]
    later = max(c.due_at for c in checkpoints) + timedelta(seconds=1)
    barrier = threading.Barrier(8)
    errors = []

    def scheduler():
        try:
            barrier.wait()
            tasks.record_sla(later)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    run_together([scheduler] * 8)
    assert errors == []
    assert Event.objects.filter(verb="sla_breached").count() == 10
    assert Event.objects.filter(verb="sla_warning").count() == 10
    assert Checkpoint.objects.breached().count() == 10


def test_a_silent_agent_gets_a_checkpoint_opened_by_the_console(db, settings):
    settings.AGENT_SILENCE_SECONDS = 600
    workflow = make_worked_example()
    workflow.__class__.objects.filter(pk=workflow.pk).update(last_activity_at=timezone.now() - timedelta(seconds=601))
    assert tasks.pause_silent_workflows() == 1
    checkpoint = workflow.checkpoints.get()
    assert checkpoint.reason == "other" and checkpoint.opened_by_console
    assert checkpoint.detail == "agent went silent after step 3"
    workflow.refresh_from_db()
    assert workflow.status == "paused"
    assert tasks.pause_silent_workflows() == 0  # paused now: not opened twice


def test_an_agent_can_be_given_a_longer_silence_limit(db, settings):
    settings.AGENT_SILENCE_SECONDS = 60
    patient = make_workflow()
    patient.agent.silence_seconds = 3600
    patient.agent.save()
    hasty = make_workflow()
    ago = timezone.now() - timedelta(seconds=120)
    patient.__class__.objects.update(last_activity_at=ago)
    assert tasks.pause_silent_workflows() == 1
    assert hasty.checkpoints.exists() and not patient.checkpoints.exists()
