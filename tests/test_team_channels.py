"""A team's channels: its checkpoints post to the team's Slack channel (runbook > team > SLA policy >
the workspace's default), and their SLA notifications reach the team's notification channels."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from tests.helpers import make_checkpoint, make_policy, make_runbook
from tests.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM, catch_up
from workflows import tasks
from workflows.models import (
    Channel,
    Delivery,
    Notification,
    RoutingRule,
    SlackMessage,
    SlackRoute,
    SlackWorkspace,
    Team,
)


@pytest.fixture
def workspace(db):
    workspace = SlackWorkspace(team_id=TEAM, name="Acme", default_channel=CHANNEL)
    workspace.bot_token, workspace.signing_secret = BOT_TOKEN, SIGNING_SECRET
    workspace.save()
    return workspace


def billing(**fields) -> Team:
    team = Team.objects.create(name="Billing", slug="billing", **fields)
    RoutingRule.objects.create(team=team, workflow_kind="refund")
    return team


def posted_to(checkpoint) -> str:
    return SlackMessage.objects.get(checkpoint=checkpoint, decision__isnull=True).channel_id


def test_a_checkpoint_posts_to_its_runbooks_route_then_its_teams_channel_then_its_policys_then_the_default(
    slack, workspace
):
    policy = make_policy(name="refund terms")
    runbook = make_runbook(workflow_kind="refund", policy=policy)
    team = billing(slack_channel="C0BILLING")
    by_policy = SlackRoute.objects.create(workspace=workspace, policy=policy, channel_id="C0POLICY")
    by_runbook = SlackRoute.objects.create(workspace=workspace, runbook=runbook, channel_id="C0RUNBOOK")

    first = make_checkpoint()
    assert (first.runbook, first.team, first.policy) == (runbook, team, policy)
    assert posted_to(first) == "C0RUNBOOK"
    by_runbook.delete()
    assert posted_to(make_checkpoint()) == "C0BILLING"
    team.slack_channel = ""
    team.save()
    assert posted_to(make_checkpoint()) == "C0POLICY"
    by_policy.delete()
    assert posted_to(make_checkpoint()) == CHANNEL

    catch_up()
    assert [c["channel"] for c in slack.called("chat.postMessage")] == ["C0RUNBOOK", "C0BILLING", "C0POLICY", CHANNEL]


def test_a_team_without_a_slack_channel_changes_nothing(slack, workspace):
    billing()
    assert posted_to(make_checkpoint()) == CHANNEL


def group_with_email(name: str) -> tuple[Group, Channel]:
    group = Group.objects.create(name=name)
    return group, Channel.objects.create(kind=Channel.Kind.EMAIL, group=group, address=f"{name}@example.com")


def test_the_sla_notifications_of_a_teams_checkpoint_reach_the_teams_channels_as_well_as_the_policys(db, alice):
    night_desk, desk_email = group_with_email("night-desk")
    billing_watchers, team_email = group_with_email("billing-watchers")
    billing(watchers=billing_watchers)
    make_runbook(workflow_kind="refund", policy=make_policy(name="night", target=30, warning=10, watchers=night_desk))
    checkpoint = make_checkpoint()

    tasks.sweep_clocks(checkpoint.due_at + timedelta(seconds=1))  # warned, then breached

    for kind in (Notification.Kind.SLA_WARNING, Notification.Kind.SLA_BREACHED):
        told = Notification.objects.filter(checkpoint=checkpoint, kind=kind)
        assert set(told.values_list("group__name", flat=True)) == {"night-desk", "billing-watchers"}
    assert Delivery.objects.filter(channel=team_email).count() == 2
    assert Delivery.objects.filter(channel=desk_email).count() == 2


def test_the_team_hears_once_when_its_watchers_are_the_policys_and_never_a_holders_reminder(db, alice):
    watchers, team_email = group_with_email("billing-watchers")
    billing(watchers=watchers, policy=make_policy(name="team terms", target=600, warning=10, claim_reminder_minutes=5))
    checkpoint = make_checkpoint()
    assert checkpoint.claim(by=alice)

    tasks.sweep_clocks(checkpoint.claimed_at + timedelta(minutes=6))  # the holder is reminded
    assert Notification.objects.filter(
        checkpoint=checkpoint, kind=Notification.Kind.CLAIM_REMINDER, recipient=alice
    ).exists()
    assert not Delivery.objects.filter(channel=team_email).exists()  # a reminder is the holder's own

    tasks.sweep_clocks(checkpoint.due_at + timedelta(seconds=1))
    assert (
        Notification.objects.filter(checkpoint=checkpoint, kind=Notification.Kind.SLA_BREACHED, group=watchers).count()
        == 1
    )
    assert Delivery.objects.filter(channel=team_email).count() == 2  # the warning and the breach, once each
