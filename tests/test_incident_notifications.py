"""Noise: an incident opening notifies its SLA policy's watchers (and their channels, through the outbox) once,
not once per member; members joining later notify nobody; the members' own watcher news (claim and decision
warnings and breaches) folds into one notification per incident and kind, while an operator holding a member
still hears about it. A rollout that halts by itself tells the incident commander once, saying why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from tests.helpers import (
    make_agent,
    make_checkpoint,
    make_policy,
    make_runbook,
    make_user,
    make_worked_example,
)
from workflows import tasks
from workflows.models import (
    Channel,
    Checkpoint,
    Decision,
    Delivery,
    Incident,
    Notification,
    Rollout,
    Workflow,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def watchers():
    group = Group.objects.create(name="refund-watchers")
    wanda = make_user("wanda")
    wanda.groups.add(group)
    Channel.objects.create(kind=Channel.Kind.EMAIL, user=wanda, address="wanda@example.test")
    Channel.objects.create(kind=Channel.Kind.WEBHOOK, group=group, url="https://hooks.example.test/refunds")
    make_runbook(
        workflow_kind="refund",
        policy=make_policy(target=30, warning=10, claim_target_minutes=5, claim_warning=2, watchers=group),
    )
    return group


def _members(agent, n, *, start=0):
    return [
        make_checkpoint(
            make_worked_example(agent=agent), reason="tool_error", detail=f"provider answered 502 for T-{start + i}"
        )
        for i in range(n)
    ]


def _agent(threshold=5):
    agent, _ = make_agent()
    agent.incident_threshold = threshold
    agent.save()
    return agent


def test_an_incident_opening_notifies_its_watchers_once_and_later_members_notify_nobody(watchers):
    agent = _agent(5)
    _members(agent, 4)
    assert not Notification.objects.filter(kind=Notification.Kind.INCIDENT_OPENED).exists()
    _members(agent, 1, start=4)
    incident = Incident.objects.get()
    opened = Notification.objects.filter(kind=Notification.Kind.INCIDENT_OPENED)
    assert sorted((n.recipient.username if n.recipient else n.group.name) for n in opened) == [
        "refund-watchers",
        "wanda",
    ]
    assert all(n.path == reverse("incident", args=[incident.pk]) and n.checkpoint is None for n in opened)
    assert f"Incident #{incident.pk} opened" in opened.first().title
    # Through the outbox: one delivery per channel (wanda's email, the group's webhook).
    assert Delivery.objects.filter(notification__in=opened).count() == 2

    _members(agent, 3, start=5)
    assert incident.members.count() == 8
    assert opened.count() == 2 and Notification.objects.count() == 2, "joining members notify nobody"


def test_the_members_watcher_news_folds_into_one_per_incident_while_a_holder_hears_of_their_own(watchers, alice):
    agent = _agent(5)
    members = _members(agent, 6)
    incident = Incident.objects.get()
    members[0].claim(by=alice)
    loner = make_checkpoint(make_worked_example(), reason="model_timeout", detail="a different failure")
    assert loner.incident_id is None
    tasks.sweep_clocks(timezone.now() + timedelta(hours=2))  # every claim and decision clock passes

    wanda_news = Notification.objects.filter(recipient__username="wanda").exclude(kind="incident_opened")
    about_incident = wanda_news.filter(path=reverse("incident", args=[incident.pk]))
    assert sorted(about_incident.values_list("kind", flat=True)) == [
        "claim_breached",
        "claim_warning",
        "sla_breached",
        "sla_warning",
    ], "once per kind, not once per member"
    assert not wanda_news.filter(checkpoint__incident=incident).exists()
    # A checkpoint outside any incident keeps its own news.
    assert set(wanda_news.filter(checkpoint=loner).values_list("kind", flat=True)) >= {"sla_breached"}
    # The operator holding a member hears about their own checkpoint.
    assert Notification.objects.filter(recipient=alice, checkpoint=members[0], kind="sla_warning").exists()


def _halting_rollout(alice, *, commander=None):
    agent = _agent(4)
    _members(agent, 4)
    incident = Incident.objects.get()
    if commander is not None:
        incident.take_command(commander, by=alice)
    rollout = Rollout.start(incident, action="abort", by=alice)
    now = timezone.now()
    Rollout.advance_due(now)
    rollout.refresh_from_db()
    [canary] = rollout.waves[0]["checkpoints"]
    checkpoint = Checkpoint.objects.get(pk=canary)
    Decision.objects.filter(checkpoint=checkpoint).update(status=Decision.Status.SUCCEEDED)
    Workflow.objects.filter(pk=checkpoint.workflow_id).update(status=Workflow.Status.FAILED)
    Rollout.advance_due(now + timedelta(minutes=1))
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.HALTED
    return incident, rollout, now


def test_a_rollout_that_halts_by_itself_tells_the_commander_once_why(alice, bob):
    incident, rollout, now = _halting_rollout(alice, commander=bob)
    [told] = Notification.objects.filter(kind=Notification.Kind.ROLLOUT_HALTED)
    assert told.recipient == bob and told.path == reverse("incident", args=[incident.pk])
    assert "1 of 1 failed" in told.body and f"incident #{incident.pk}" in told.title
    Rollout.advance_due(now + timedelta(hours=1))
    assert Notification.objects.filter(kind=Notification.Kind.ROLLOUT_HALTED).count() == 1
    assert not Notification.objects.filter(kind=Notification.Kind.ROLLOUT_HALTED, recipient=alice).exists()


def test_without_a_commander_whoever_started_the_rollout_is_told(alice):
    _halting_rollout(alice)
    assert Notification.objects.get(kind=Notification.Kind.ROLLOUT_HALTED).recipient == alice
