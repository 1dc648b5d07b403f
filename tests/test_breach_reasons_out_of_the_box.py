"""Issue 28 item 9: the first TPM can record a breach reason without waiting for an admin (a data migration
seeds a desk's usual reasons), and the breach review says how more are added: a link for admins, a
sentence for TPMs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.helpers import make_overdue_checkpoint
from workflows import tasks
from workflows.models import BreachReason

SEEDED = {"Staffing gap", "Runbook unclear", "Agent bug", "Provider outage", "Tooling", "Other"}


def _breached():
    checkpoint = make_overdue_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=20))
    checkpoint.refresh_from_db()
    return checkpoint


@pytest.mark.django_db(transaction=True)
def test_migrating_seeds_the_usual_reasons_and_the_first_tpm_records_one(client, tess):
    # A test flush empties the tables the migrations filled: replay the migration as a fresh install does.
    BreachReason.objects.all().delete()
    call_command("migrate", "workflows", "0027", verbosity=0)
    call_command("migrate", "workflows", verbosity=0)
    assert set(BreachReason.objects.filter(is_active=True).values_list("name", flat=True)) == SEEDED
    checkpoint = _breached()
    client.force_login(tess)
    page = client.get(reverse("breach_review")).content.decode()
    staffing = BreachReason.objects.get(name="Staffing gap")
    assert f'<option value="{staffing.pk}"' in page

    client.post(reverse("explain_breach", args=[checkpoint.pk]), {"reason": staffing.pk, "note": "two off sick"})

    checkpoint.refresh_from_db()
    assert checkpoint.breach_reason == staffing


@pytest.mark.django_db(transaction=True)
def test_migrating_again_keeps_what_admins_changed(db):
    call_command("migrate", "workflows", "0027", verbosity=0)  # removes only seeded reasons no breach uses
    BreachReason.objects.create(name="Tooling", description="ours", is_active=False)
    call_command("migrate", "workflows", verbosity=0)
    tooling = BreachReason.objects.get(name="Tooling")
    assert (tooling.description, tooling.is_active) == ("ours", False)


@pytest.mark.django_db
def test_the_review_says_how_to_add_reasons_a_link_for_admins_a_sentence_for_tpms(client, tess, adam):
    _breached()
    client.force_login(adam)
    html = client.get(reverse("breach_review")).content.decode()
    assert f'href="{reverse("admin:workflows_breachreason_changelist")}" data-testid="breach-reasons-admin"' in html
    client.force_login(tess)
    html = client.get(reverse("breach_review")).content.decode()
    assert 'data-testid="breach-reasons-admin"' not in html
    assert "An admin adds it (Admin → Breach reasons)" in html
    assert client.get(reverse("admin:workflows_breachreason_changelist")).status_code in (302, 403)
