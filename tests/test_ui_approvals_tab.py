"""Four-eyes proposals stay visible: the Awaiting approval tab, My workflows, a clock that keeps running
(issue 8, defect 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_checkpoint, make_runbook, make_worked_example, squeezed
from workflows.models import Checkpoint, Decider, Decision
from workflows.tasks import sweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def proposal(alice):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    return Decider(checkpoint).decide(
        by=alice,
        action="resume",
        confirmations={checkpoint.unknown_effects[0]["idempotency_key"]: "did_not_happen"},
        money_confirmed=True,
        instructions="issue it once",
    )


def _approval_tab(client, user):
    client.force_login(user)
    return client.get(reverse("queue") + "?scope=approval").content.decode()


def test_the_tab_lists_the_proposal_for_another_operator_with_its_count(proposal, client, bob):
    html = _approval_tab(client, bob)

    assert 'data-testid="count-approval">1<' in html
    assert 'data-testid="proposer">alice<' in html and 'data-testid="row-approve"' in html
    assert proposal.checkpoint.workflow.title in html


def test_the_proposer_never_counts_or_sees_their_own_proposal_there(proposal, client, alice):
    html = _approval_tab(client, alice)

    assert 'data-testid="count-approval">0<' in html
    assert 'data-testid="row-approve"' not in html
    assert "No proposal waits for your approval." in html


def test_a_tpm_sees_the_proposal_but_no_buttons(proposal, client, tess):
    html = _approval_tab(client, tess)

    assert 'data-testid="proposer">alice<' in html and 'data-testid="row-approve"' not in html


def test_approving_from_the_row_queues_it_and_returns_to_the_tab(proposal, client, bob):
    client.force_login(bob)
    tab = reverse("queue") + "?scope=approval"

    response = client.post(reverse("approve", args=[proposal.pk]), {"next": tab, "reviewed": "1"})

    assert response.status_code == 302 and response["Location"] == tab
    proposal.refresh_from_db()
    assert proposal.status == Decision.Status.QUEUED and proposal.approved_by == bob
    assert 'data-testid="count-approval">0<' in client.get(tab).content.decode()


def test_rejecting_from_the_row_needs_a_note(proposal, client, bob):
    client.force_login(bob)
    tab = reverse("queue") + "?scope=approval"

    response = client.post(reverse("reject", args=[proposal.pk]), {"next": tab, "note": "  "}, follow=True)

    assert "Say why you reject it" in response.content.decode()
    proposal.refresh_from_db()
    assert proposal.status == Decision.Status.PROPOSED

    client.post(reverse("reject", args=[proposal.pk]), {"next": tab, "note": "the ledger shows it went out"})
    proposal.refresh_from_db()
    assert proposal.status == Decision.Status.REJECTED
    assert Checkpoint.objects.get(pk=proposal.checkpoint_id).assignee.username == "alice"


def test_my_workflows_shows_my_proposal_and_what_waits_for_me(proposal, client, alice, bob):
    client.force_login(alice)
    html = client.get(reverse("mine")).content.decode()
    assert 'data-testid="my-proposal"' in html and proposal.checkpoint.workflow.title in html

    client.force_login(bob)
    html = squeezed(client.get(reverse("mine")).content.decode())
    assert 'data-testid="to-approve">1 waits for your approval' in html


def test_the_decision_clock_keeps_running_while_a_proposal_waits(proposal, client, alice):
    checkpoint = proposal.checkpoint
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        due_at=timezone.now() - timedelta(minutes=1), warn_at=timezone.now() - timedelta(minutes=5)
    )

    sweep()

    checkpoint.refresh_from_db()
    assert checkpoint.breached_at is not None and checkpoint.warned_at is not None
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'class="countdown countdown-big"' in html and "over" in html


def test_the_clock_stops_once_a_second_operator_approves(proposal, bob):
    assert proposal.approve(by=bob)

    assert not Checkpoint.objects.on_clock().filter(pk=proposal.checkpoint_id).exists()
