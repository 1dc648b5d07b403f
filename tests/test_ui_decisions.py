"""Deciding on the workbench: confirmations first, money confirmed, one decision, nothing typed lost."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_worked_example, squeezed
from workflows.models import Checkpoint, Decider, Decision, Workflow


@pytest.fixture
def unknown_refund(alice):
    """The worked example with the refund's outcome unknown, claimed by alice."""
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    checkpoint.claim(by=alice)
    return checkpoint


def _decide(client, checkpoint, **data):
    return client.post(reverse("decide", args=[checkpoint.pk]), data)


def _button(html: str, action: str) -> str:
    return re.search(rf'<button[^>]*data-testid="decide-{action}"[^>]*>', html).group(0)


def test_resume_is_disabled_until_every_unknown_effect_is_confirmed(client, alice, unknown_refund):
    client.force_login(alice)

    html = client.get(reverse("workbench", args=[unknown_refund.pk])).content.decode()

    assert "disabled" in _button(html, "resume") and "disabled" in _button(html, "retry_step")
    assert "disabled" not in _button(html, "abort")
    assert 'data-testid="unknown-effect"' in html and 'data-key="T-' in html


def test_a_resume_without_confirmations_is_refused_and_nothing_is_lost(client, alice, unknown_refund):
    client.force_login(alice)

    response = _decide(
        client, unknown_refund, action="resume", instructions="carry on with the note", money_confirmed="1"
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert "Confirm what happened to every unknown effect before resuming" in html
    assert "carry on with the note</textarea>" in html
    assert not Decision.objects.exists()


def test_happened_needs_the_external_reference(client, alice, unknown_refund):
    client.force_login(alice)

    response = _decide(client, unknown_refund, action="resume", confirm_0="happened", money_confirmed="1")

    assert response.status_code == 422
    assert "Give the external reference you saw for issue_refund." in response.content.decode()


def test_the_no_javascript_check_re_renders_with_resume_enabled(client, alice, unknown_refund):
    client.force_login(alice)

    response = _decide(client, unknown_refund, action="check", confirm_0="did_not_happen", instructions="typed")

    html = response.content.decode()
    assert response.status_code == 200 and not Decision.objects.exists()
    assert "disabled" not in _button(html, "resume")
    assert 'value="did_not_happen" data-testid="confirm-did-not-happen" checked' in squeezed(html)
    assert "typed</textarea>" in html


def test_a_decision_touching_money_needs_the_explicit_confirmation(client, alice, unknown_refund):
    client.force_login(alice)

    response = _decide(client, unknown_refund, action="resume", confirm_0="happened", ref_0="R-91")

    assert response.status_code == 422
    assert "This decision touches money: tick the explicit confirmation." in response.content.decode()
    assert 'value="R-91"' in response.content.decode()
    assert not Decision.objects.exists()


def test_resume_with_confirmations_queues_the_decision_and_shows_its_status(client, alice, unknown_refund):
    client.force_login(alice)

    response = _decide(
        client,
        unknown_refund,
        action="resume",
        confirm_0="happened",
        ref_0="R-91",
        instructions="write the note, then notify",
        money_confirmed="1",
    )

    assert response.status_code == 302
    decision = Decision.objects.get()
    key = unknown_refund.unknown_effects[0]["idempotency_key"]
    assert decision.confirmations == {key: "happened"} and decision.confirmation_refs == {key: "R-91"}
    assert decision.instructions == "write the note, then notify"
    assert decision.status == Decision.Status.QUEUED

    html = client.get(response["Location"]).content.decode()
    assert 'data-testid="decision-status" data-status="queued"' in html
    assert 'hx-trigger="every 2s"' in html


def test_the_live_workbench_follows_delivery_in_one_poll(client, alice, unknown_refund):
    client.force_login(alice)
    _decide(client, unknown_refund, action="resume", confirm_0="did_not_happen", money_confirmed="1")
    decision = Decision.objects.get()
    url = reverse("workbench", args=[unknown_refund.pk])
    poll = {"HX-Request": "true", "HX-Target": "workbench-live"}
    version = client.get(url).context["version"]

    assert client.get(url, {"v": version}, headers=poll).status_code == 204  # nothing changed: no swap

    decision.start_attempt()
    running = client.get(url, {"v": version}, headers=poll).content.decode()
    assert running.lstrip().startswith('<div id="workbench-live"') and 'data-status="running"' in running
    assert "checkpoint decided" in running and 'hx-trigger="every 2s"' in running

    decision.mark_succeeded()
    done = client.get(url, {"v": version}, headers=poll).content.decode()
    assert 'data-status="succeeded"' in done and "checkpoint resolved" in done and "workflow running" in done
    assert 'class="countdown countdown-big"' not in done  # the clock stopped with the decision
    # The old partial still renders alone, for anything that asks for it.
    status = client.get(url, headers={"HX-Request": "true", "HX-Target": "decision-status"}).content.decode()
    assert status.lstrip().startswith('<div id="decision-status"') and 'data-status="succeeded"' in status


def test_a_failed_delivery_shows_the_error_and_the_checkpoint_is_back_on_the_queue(
    client, alice, unknown_refund, settings
):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    client.force_login(alice)
    _decide(client, unknown_refund, action="resume", confirm_0="did_not_happen", money_confirmed="1")
    decision = Decision.objects.get()
    decision.start_attempt()
    decision.mark_attempt_failed("resume endpoint answered 500")

    html = client.get(reverse("workbench", args=[unknown_refund.pk])).content.decode()

    assert 'data-status="failed"' in html and "resume endpoint answered 500" in html
    assert 'data-testid="decision-form"' in html  # decide again
    queue = client.get(reverse("queue"))
    assert unknown_refund.pk in [c.pk for c in queue.context["checkpoints"]]


def test_a_double_submit_produces_one_decision_and_names_the_winner(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    first = _decide(client, checkpoint, action="abort", instructions="customer withdrew")
    second = _decide(client, checkpoint, action="abort", instructions="customer withdrew")

    assert first.status_code == 302 and second.status_code == 409
    assert Decision.objects.count() == 1
    assert re.search(r"Already decided: abort by alice at [\d-]+ [\d:]+ UTC", second.content.decode())


def test_a_concurrent_decision_by_another_operator_is_told_who_won(client, alice, bob):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    form_seen_by_alice = client.get(reverse("workbench", args=[checkpoint.pk]))
    assert 'data-testid="decision-form"' in form_seen_by_alice.content.decode()
    Decider(checkpoint).decide(by=bob, action="abort", instructions="duplicate ticket")

    response = _decide(client, checkpoint, action="abort", instructions="mine")

    assert response.status_code == 409
    assert "Already decided: abort by bob" in response.content.decode()
    assert Decision.objects.count() == 1


def test_someone_elses_claim_blocks_the_decision(client, alice, bob):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=bob)
    client.force_login(alice)

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    response = _decide(client, checkpoint, action="abort", instructions="x")

    assert 'data-testid="decision-form"' not in html and "bob holds this checkpoint" in squeezed(html)
    assert response.status_code == 409 and "bob has claimed this checkpoint." in response.content.decode()


def test_abort_needs_a_reason(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = _decide(client, checkpoint, action="abort")

    assert response.status_code == 422 and "Say why the workflow is aborted." in response.content.decode()


def test_abort_with_a_reason(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    _decide(client, checkpoint, action="abort", instructions="customer withdrew the request")

    decision = Decision.objects.get()
    assert decision.action == "abort" and decision.instructions == "customer withdrew the request"
    decision.start_attempt()
    decision.mark_succeeded()
    assert Workflow.objects.get(pk=checkpoint.workflow_id).status == Workflow.Status.ABORTED


def test_a_handoff_to_another_operator(client, alice, bob):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    _decide(client, checkpoint, action="handoff", new_owner="bob", instructions="call the customer first")

    decision = Decision.objects.get()
    assert decision.new_owner == bob and decision.handoff_packet() == {"to": "bob", "note": "call the customer first"}


def test_a_handoff_to_a_human_process(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    _decide(client, checkpoint, action="handoff", handoff_to="finance desk")

    assert Decision.objects.get().handoff_to == "finance desk"


def test_a_handoff_needs_someone_to_take_it(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = _decide(client, checkpoint, action="handoff", instructions="please")

    assert response.status_code == 422
    assert "A handoff needs a new owner or the human process" in response.content.decode()


def test_retry_step(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    _decide(client, checkpoint, action="retry_step", instructions="retry the ticket note", money_confirmed="1")

    assert Decision.objects.get().action == "retry_step"


def test_only_the_runbooks_decisions_are_offered_and_accepted(client, alice):
    make_runbook(workflow_kind="refund", allowed_actions=["handoff", "abort"])
    checkpoint = make_checkpoint()
    client.force_login(alice)

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    response = _decide(client, checkpoint, action="resume", money_confirmed="1")

    assert 'data-testid="decide-resume"' not in html and 'data-testid="decide-abort"' in html
    assert response.status_code == 422 and "does not allow resume" in response.content.decode()


def test_an_htmx_decision_error_swaps_the_actions_panel_with_a_swappable_status(client, alice, unknown_refund):
    client.force_login(alice)

    response = client.post(
        reverse("decide", args=[unknown_refund.pk]),
        {"action": "resume"},
        headers={"HX-Request": "true", "HX-Target": "workbench-actions"},
    )

    assert response.status_code == 422
    assert response.content.decode().lstrip().startswith('<aside id="workbench-actions"')
    assert unknown_refund.status == Checkpoint.Status.CLAIMED
