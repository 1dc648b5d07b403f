"""An unlinked Slack user is linked by the email address Slack says they verified, when exactly one active
console user has it; otherwise the one-time link flow stays. Against the loopback fake's ``users.info``."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from console.event_text import event_text
from tests.helpers import make_checkpoint, make_user
from tests.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM, button, catch_up, profile, signed
from workflows.models import Checkpoint, Event, SlackLink, SlackWorkspace


@pytest.fixture
def workspace(db):
    workspace = SlackWorkspace(team_id=TEAM, name="Acme", default_channel=CHANNEL)
    workspace.bot_token, workspace.signing_secret = BOT_TOKEN, SIGNING_SECRET
    workspace.save()
    return workspace


def press_claim(slack, *, user: str) -> Checkpoint:
    """A fresh checkpoint's message, and ``user`` pressing its Claim button in Slack."""
    checkpoint = make_checkpoint()
    catch_up()
    message = slack.called("chat.postMessage")[-1]
    claim = next(
        e["value"]
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == "claim"
    )
    assert Client().post("/slack/interactivity/", **signed(button("claim", claim, user=user))).status_code == 200
    checkpoint.refresh_from_db()
    return checkpoint


def with_email(user, email: str):
    user.email = email
    user.save()
    return user


def told_to_link(slack) -> bool:
    return bool(
        re.search(r"<https?://[^|>]+/slack/link/[^|>]+/\|Link it>", slack.called("chat.postEphemeral")[-1]["text"])
    )


def test_a_verified_email_of_one_console_user_links_them_and_the_press_acts(slack, workspace, alice):
    with_email(alice, "Alice@Example.com")
    slack.users["UALICE"] = profile("UALICE", "alice@example.com")

    checkpoint = press_claim(slack, user="UALICE")

    assert checkpoint.status == Checkpoint.Status.CLAIMED and checkpoint.assignee == alice
    link = SlackLink.objects.get(slack_user_id="UALICE")
    assert (link.user, link.how, link.email) == (alice, SlackLink.How.VERIFIED_EMAIL, "alice@example.com")
    assert slack.called("users.info") == [{"user": "UALICE"}] and f"Bearer {BOT_TOKEN}" in slack.tokens
    linked = Event.objects.get(verb=Event.Verb.SLACK_LINKED)
    assert linked.actor == "alice" and event_text(linked).endswith(
        "by the email address Slack verified (alice@example.com)"
    )

    press_claim(slack, user="UALICE")  # linked now: Slack is not asked again
    assert len(slack.called("users.info")) == 1


def test_an_unverified_email_links_nobody_and_the_one_time_link_flow_stays(slack, workspace, alice):
    with_email(alice, "alice@example.com")
    slack.users["UALICE"] = profile("UALICE", "alice@example.com", confirmed=False)

    checkpoint = press_claim(slack, user="UALICE")

    assert checkpoint.status == Checkpoint.Status.OPEN
    assert not SlackLink.objects.exists() and not Event.objects.filter(verb=Event.Verb.SLACK_LINKED).exists()
    assert told_to_link(slack)


def test_an_address_two_console_users_share_links_neither(slack, workspace, alice, bob):
    with_email(alice, "desk@example.com")
    with_email(bob, "DESK@example.com")
    slack.users["UDESK"] = profile("UDESK", "desk@example.com")

    checkpoint = press_claim(slack, user="UDESK")

    assert checkpoint.status == Checkpoint.Status.OPEN and not SlackLink.objects.exists() and told_to_link(slack)


def test_an_address_no_console_user_has_links_nobody(slack, workspace, alice):
    with_email(alice, "alice@example.com")
    slack.users["USTRANGER"] = profile("USTRANGER", "stranger@example.com")

    checkpoint = press_claim(slack, user="USTRANGER")

    assert checkpoint.status == Checkpoint.Status.OPEN and not SlackLink.objects.exists() and told_to_link(slack)


def test_a_deactivated_account_with_the_address_does_not_count(slack, workspace, alice):
    with_email(alice, "alice@example.com")
    former = with_email(make_user("former"), "alice@example.com")
    former.is_active = False
    former.save()
    slack.users["UALICE"] = profile("UALICE", "alice@example.com")

    assert press_claim(slack, user="UALICE").assignee == alice


@pytest.mark.parametrize("fields", [{"is_bot": True}, {"deleted": True}], ids=["a bot", "a deleted account"])
def test_a_bot_or_a_deleted_slack_account_is_never_linked(slack, workspace, alice, fields):
    with_email(alice, "alice@example.com")
    slack.users["UALICE"] = profile("UALICE", "alice@example.com", **fields)

    assert press_claim(slack, user="UALICE").status == Checkpoint.Status.OPEN and not SlackLink.objects.exists()


def test_slack_unreachable_for_the_lookup_leaves_the_link_flow(slack, workspace, alice):
    with_email(alice, "alice@example.com")
    slack.users["UALICE"] = profile("UALICE", "alice@example.com")
    checkpoint = make_checkpoint()
    catch_up()
    claim = next(
        e["value"]
        for b in slack.called("chat.postMessage")[-1]["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == "claim"
    )
    slack.failing.append((503, {}))  # users.info fails; the ephemeral reply after it goes through

    Client().post("/slack/interactivity/", **signed(button("claim", claim, user="UALICE")))

    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN and not SlackLink.objects.exists() and told_to_link(slack)
