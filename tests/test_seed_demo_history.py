"""Issue 28 item 16: a fresh demo shows every feature: a four-eyes runbook, breach reasons, and three weeks
of history recorded through the domain's own methods, so every TPM page has something true to show."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from workflows.models import BreachReason, Checkpoint, Decision, Event, Notification, Runbook, Step, Workflow


@pytest.fixture
def seeded(settings, tmp_path, db):
    settings.VAR_DIR = tmp_path
    for name in ("Staffing gap", "Runbook unclear", "Other"):  # the migration's (a test flush may have emptied it)
        BreachReason.objects.get_or_create(name=name)
    out = StringIO()
    started = time.perf_counter()
    call_command("seed_demo", stdout=out)
    print(f"seed_demo with history: {time.perf_counter() - started:.1f}s")
    return out.getvalue()


def test_the_demo_has_a_four_eyes_runbook(seeded):
    runbook = Runbook.objects.get(slug="billing-model-timeout-four-eyes")
    assert runbook.requires_four_eyes and runbook.workflow_kind == "billing_dispute"


def test_three_weeks_of_history_recorded_the_way_it_happens(seeded):
    history = Workflow.objects.filter(external_id__startswith="HIST-")
    assert "workflows of demo history" in seeded
    assert history.count() >= 30
    days = {w.created_at.date() for w in history}
    assert len(days) >= 12  # spread over the weeks, not one afternoon
    assert not history.exclude(status__in=Workflow.TERMINAL).exists()  # nothing left for the live queue
    assert not Checkpoint.objects.filter(workflow__in=history).exclude(status=Checkpoint.Status.RESOLVED).exists()
    # Made by the domain: each workflow has its creation event, each step its own, each decision its trail.
    assert Event.objects.filter(workflow__in=history, verb=Event.Verb.CREATED).count() == history.count()
    assert (
        Event.objects.filter(workflow__in=history, verb=Event.Verb.STEP_COMMITTED).count()
        == Step.objects.filter(workflow__in=history, status=Step.Status.COMMITTED).count()
    )
    decisions = Decision.objects.filter(checkpoint__workflow__in=history)
    assert decisions.count() >= 15 and set(decisions.values_list("status", flat=True)) == {"succeeded"}
    for decision in decisions:
        assert decision.decided_at <= decision.finished_at
        assert decision.checkpoint.opened_at <= decision.decided_at
    breached = Checkpoint.objects.filter(workflow__in=history, breached_at__isnull=False)
    assert breached.exists() and breached.exclude(breach_reason=None).exists()
    for checkpoint in breached:  # stamped at its deadline by the sweep, never at "now"
        assert checkpoint.breached_at == checkpoint.due_at
        assert Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.SLA_BREACHED).count() == 1
    assert not Notification.objects.filter(read_at__isnull=True).exists()  # history does not fill today's bell


def test_seeding_again_records_nothing_more_and_is_quick(seeded):
    count = Workflow.objects.count()
    started = time.perf_counter()
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert time.perf_counter() - started < 5
    assert Workflow.objects.count() == count and "demo history" not in out.getvalue()


def test_every_tpm_page_has_something_true_to_show(seeded, client, tess):
    client.force_login(tess)
    breaches = client.get(reverse("breach_review")).content.decode()
    assert 'data-testid="breach-row"' in breaches and "HIST-" in breaches
    explained = Checkpoint.objects.exclude(breach_reason=None).first()
    assert explained.breach_reason.name in breaches
    dashboard = client.get(reverse("resumes")).content.decode()
    assert "No decision on checkpoints opened in this period" not in dashboard
    readiness = client.get(reverse("readiness")).content.decode()
    assert "refund" in readiness and "billing_dispute" in readiness
    staffing = client.get(reverse("staffing")).content.decode()
    assert "no decision recorded yet" not in staffing and "No checkpoint in this period." not in staffing


def test_history_can_be_left_out(settings, tmp_path, db):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--history-days", "0", stdout=StringIO())
    assert not Workflow.objects.exists()
