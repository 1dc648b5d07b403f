"""Admins preview which runbook and SLA policy a checkpoint of a kind and reason would get, and its clocks."""

from datetime import UTC, datetime

import time_machine
from django.urls import reverse

from tests.helpers import make_checkpoint, make_policy, make_runbook, squeezed
from workflows.models import BusinessCalendar, EscalationLevel


def test_the_preview_names_the_most_specific_runbook_its_policy_and_when_it_would_be_due(client, adam):
    calendar = BusinessCalendar.objects.create(name="office", time_zone="UTC")
    policy = make_policy(name="Refunds in office hours", target=60, warning=15, calendar=calendar)
    EscalationLevel.objects.create(policy=policy, delay_minutes=30, notify=True, reassign=True, user=adam)
    make_runbook(
        slug="refund-timeouts",
        title="Refund: the model timed out",
        workflow_kind="refund",
        reason="model_timeout",
        policy=policy,
    )
    make_runbook(slug="default", title="General", is_default=True)
    with time_machine.travel(datetime(2026, 12, 4, 16, 30, tzinfo=UTC), tick=False):  # Friday
        client.force_login(adam)
        page = squeezed(
            client.get(reverse("runbook_preview"), {"kind": "refund", "reason": "model_timeout"}).content.decode()
        )
        # Still at the travelled-to time: the session signed in then ends after 8 idle hours, and a request at
        # the real clock, once that is more than 8 hours past Friday 16:30, would be sent to sign in again.
        other = client.get(
            reverse("runbook_preview"), {"kind": "ticket_triage", "reason": "rate_limit"}
        ).content.decode()
    assert "Refund: the model timed out" in page and "Refunds in office hours" in page
    assert "Mon 7 Dec 09:30 UTC" in page  # 30 minutes on Friday, 30 on Monday
    assert "Mon 7 Dec 10:00 UTC" in page and "adam, reassigns" in page  # the escalation 30 min after

    assert "General" in other and "the default" in other


def test_the_preview_is_for_admins(client, alice, tess):
    for user in (alice, tess):
        client.force_login(user)
        assert client.get(reverse("runbook_preview")).status_code == 403


def test_a_runbook_body_is_rendered_as_markdown_without_raw_html(client, alice):
    make_runbook(workflow_kind="refund", body="1. **Check** the ledger\n\n<script>alert(1)</script>")
    checkpoint = make_checkpoint()
    client.force_login(alice)
    page = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert "<strong>Check</strong>" in page and "<script>alert(1)</script>" not in page


def test_a_warning_lead_under_a_minute_reads_in_seconds(client, adam):
    make_runbook(
        workflow_kind="refund",
        policy=make_policy(name="One minute", target=1, warning=50, decision_warning_unit="percent"),
    )
    client.force_login(adam)
    page = client.get(reverse("runbook_preview"), {"kind": "refund", "reason": "model_timeout"}).content.decode()
    assert "One minute: decision in 1 min (warns 30 s before)" in page
