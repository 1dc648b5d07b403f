"""Notification emails carry signed, single-use, expiring links to the decision they are about.

The link opens a confirmation page (signed in; a GET never changes anything); its POST acts for
its recipient only, once, through the workbench's own methods, and the trail says "via Email link".
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.test import Client
from django.utils import timezone

from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows import tasks
from workflows.models import Channel, Checkpoint, Decider, Decision, Delivery, Event, Notification


@pytest.fixture(autouse=True)
def _emails(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def email_links(user, checkpoint) -> dict[str, str]:
    """Tell ``user`` about ``checkpoint`` by email; the action links in it, by label, as paths."""
    Channel.objects.get_or_create(kind="email", user=user, address=f"{user.username}@example.invalid")
    Notification.send(
        kind=Notification.Kind.ASSIGNED,
        title="A checkpoint waits",
        checkpoint=checkpoint,
        users=[user],
        key=f"test:{checkpoint.pk}:{user.pk}:{len(mail.outbox)}",
    )
    for pk in Delivery.objects.dispatchable().values_list("pk", flat=True):
        tasks.deliver_notification(pk)
    body = str(mail.outbox[-1].body)
    return {label: path for label, path in re.findall(r"^([A-Z][^:\n]*): https?://[^/\s]+(/act/\S+/)$", body, re.M)}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_claim_link_shows_a_confirmation_on_get_and_claims_once_on_post(db, alice):
    checkpoint = make_checkpoint()
    path = email_links(alice, checkpoint)["Claim it"]
    browser = signed_in(alice)
    events = Event.objects.count()

    page = browser.get(path)
    browser.get(path)

    assert page.status_code == 200 and 'data-testid="confirm-action-link"' in page.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN and Event.objects.count() == events  # GET never acts
    done = browser.post(path)
    assert done.status_code == 200 and "Claimed" in done.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice
    assert Event.objects.get(checkpoint=checkpoint, verb=Event.Verb.CLAIMED).data["via"] == "email"
    again = browser.post(path)
    assert again.status_code == 410 and "used already" in again.content.decode()
    assert browser.get(path).status_code == 410


def test_a_link_acts_only_for_the_person_it_was_sent_to(db, alice, bob):
    checkpoint = make_checkpoint()
    path = email_links(alice, checkpoint)["Claim it"]

    assert signed_in(bob).get(path).status_code == 403
    assert signed_in(bob).post(path).status_code == 403
    assert Client().post(path).status_code == 302  # signed in first

    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN
    assert signed_in(alice).post(path).status_code == 200  # bob's tries did not use it up


def test_a_link_expires(db, alice, settings):
    checkpoint = make_checkpoint()
    path = email_links(alice, checkpoint)["Claim it"]

    with time_machine.travel(timezone.now() + timedelta(seconds=settings.ACTION_LINK_MAX_AGE_SECONDS + 5)):
        response = signed_in(alice).post(path)

    assert response.status_code == 410 and "expired" in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN


def test_a_forged_link_is_refused(db, alice):
    checkpoint = make_checkpoint()
    path = email_links(alice, checkpoint)["Claim it"]
    forged = path[:-6] + ("A" if path[-6] != "A" else "B") + path[-5:]

    assert signed_in(alice).post(forged).status_code == 400
    assert signed_in(alice).post("/act/not-a-token/").status_code == 400


def test_a_four_eyes_proposal_is_approved_from_the_email_of_another_operator_never_the_proposers(db, alice, bob):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = Decider(checkpoint).decide(
        by=alice, action="resume", confirmations={key: "did_not_happen"}, money_confirmed=True
    )
    assert decision.status == Decision.Status.PROPOSED

    assert email_links(alice, checkpoint) == {}  # the proposer gets no approve link
    links = email_links(bob, checkpoint)
    assert set(links) == {"Approve the proposal", "Reject the proposal"}
    signed_in(bob).post(links["Approve the proposal"])

    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED and decision.approved_by == bob
    assert Event.objects.get(decision=decision, verb=Event.Verb.APPROVED).data["via"] == "email"
    assert signed_in(bob).post(links["Reject the proposal"]).content.decode().count("no longer waits") == 1


def test_a_tpm_gets_no_links_and_cannot_use_one(db, alice, tess):
    checkpoint = make_checkpoint()
    assert email_links(tess, checkpoint) == {}
    path = email_links(alice, checkpoint)["Claim it"]
    assert signed_in(tess).post(path).status_code == 403
