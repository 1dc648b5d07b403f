"""Four eyes: a money decision under such a runbook waits for a second operator."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Checkpoint, Decision


@pytest.fixture
def proposed(client, alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    client.force_login(alice)
    client.post(
        reverse("decide", args=[checkpoint.pk]),
        {"action": "resume", "confirm_0": "did_not_happen", "money_confirmed": "1", "instructions": "issue it once"},
    )
    return Decision.objects.get()


def test_a_money_decision_is_proposed_not_queued(proposed, client):
    assert proposed.status == Decision.Status.PROPOSED

    html = client.get(reverse("workbench", args=[proposed.checkpoint_id])).content.decode()

    assert 'data-status="proposed"' in html and "waiting for a second operator" in html
    assert 'data-testid="approve"' not in html  # not for the proposer


def test_another_operator_sees_approve_and_reject(proposed, client, bob):
    client.force_login(bob)

    html = client.get(reverse("workbench", args=[proposed.checkpoint_id])).content.decode()

    assert 'data-testid="approve"' in html and 'data-testid="reject"' in html
    # The live poll goes on; console.js carries a half-typed rejection note over each swap
    # (test_browser_live_workbench.py types one through a poll).
    assert 'name="note"' in html and 'id="workbench-live"' in html


def test_the_proposer_cannot_approve_their_own_decision(proposed, client):
    response = client.post(reverse("approve", args=[proposed.pk]), {"reviewed": "1"}, follow=True)

    assert "The second approval must come from another operator." in response.content.decode()
    proposed.refresh_from_db()
    assert proposed.status == Decision.Status.PROPOSED


def test_a_second_operator_approves_and_the_decision_is_queued(proposed, client, bob):
    client.force_login(bob)

    response = client.post(reverse("approve", args=[proposed.pk]), {"reviewed": "1"}, follow=True)

    proposed.refresh_from_db()
    assert proposed.status == Decision.Status.QUEUED and proposed.approved_by == bob
    assert "Approved: the decision is queued for delivery." in response.content.decode()


def test_approving_twice_says_it_no_longer_waits(proposed, client, bob, adam):
    client.force_login(bob)
    client.post(reverse("approve", args=[proposed.pk]), {"reviewed": "1"})
    client.force_login(adam)

    response = client.post(reverse("approve", args=[proposed.pk]), {"reviewed": "1"}, follow=True)

    assert "no longer waits for approval" in response.content.decode()
    proposed.refresh_from_db()
    assert proposed.approved_by == bob


def test_a_rejection_gives_the_checkpoint_back_to_the_proposer(proposed, client, alice, bob):
    client.force_login(bob)

    client.post(reverse("reject", args=[proposed.pk]), {"note": "ledger shows it went out"})

    proposed.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=proposed.checkpoint_id)
    assert proposed.status == Decision.Status.REJECTED
    assert checkpoint.status == Checkpoint.Status.CLAIMED and checkpoint.assignee == alice
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert "Rejected by bob: ledger shows it went out" in html and 'data-testid="decision-form"' in html


def test_an_approval_without_the_tick_naming_what_was_read_approves_nothing(proposed, client, bob):
    """The queue row and the workbench ask the approver to tick that they read the money, the resume state
    and the note; a POST without it (a script, a stale form) approves nothing, whatever the proposal is."""
    client.force_login(bob)

    for data in ({}, {"reviewed": ""}, {"reviewed": "yes"}):
        response = client.post(reverse("approve", args=[proposed.pk]), data, follow=True)
        assert "Nothing approved: tick that you have read what you approve" in response.content.decode()
        proposed.refresh_from_db()
        assert proposed.status == Decision.Status.PROPOSED and proposed.approved_by is None


def test_the_workbench_approve_form_names_the_money_it_moves(proposed, client, bob):
    client.force_login(bob)

    html = client.get(reverse("workbench", args=[proposed.checkpoint_id])).content.decode()

    assert 'name="reviewed" value="1" required' in html and 'data-testid="approve-seen"' in html
    at_stake = proposed.checkpoint.money_at_stake
    assert at_stake  # the worked example's pending refund
    assert f"I have read it: resume moving {', '.join(at_stake)}" in " ".join(html.split())
