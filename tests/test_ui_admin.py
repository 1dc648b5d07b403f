"""The Django admin: agents get a token shown once, can rotate it; the audit trail is read-only."""

from __future__ import annotations

import re

from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint
from workflows.models import Agent, Event


def test_creating_an_agent_shows_its_token_once(client, adam):
    client.force_login(adam)

    response = client.post(
        reverse("admin:workflows_agent_add"),
        {
            "name": "support-bot",
            "description": "",
            "resume_url": "http://127.0.0.1:9/resume",
            "owner": adam.pk,
            "silence_seconds": "",
            "is_active": "on",
        },
        follow=True,
    )

    token = re.search(r'data-testid="token">(rc_[\w-]+)<', response.content.decode()).group(1)
    agent = Agent.objects.get(name="support-bot")
    assert Agent.authenticate(token) == agent and agent.signing_secret
    listing = client.get(reverse("admin:workflows_agent_changelist")).content.decode()
    assert agent.token_prefix in listing and token not in listing


def test_rotating_a_token_invalidates_the_old_one(client, adam):
    agent, old = make_agent("billing-bot")
    client.force_login(adam)

    response = client.post(
        reverse("admin:workflows_agent_changelist"),
        {"action": "rotate_token", "_selected_action": [agent.pk]},
        follow=True,
    )

    new = re.search(r'data-testid="token">(rc_[\w-]+)<', response.content.decode()).group(1)
    assert Agent.authenticate(old) is None and Agent.authenticate(new) == agent


def test_events_are_read_only_in_the_admin(client, adam):
    make_checkpoint()
    event = Event.objects.first()
    client.force_login(adam)

    assert client.get(reverse("admin:workflows_event_changelist")).status_code == 200
    assert client.get(reverse("admin:workflows_event_add")).status_code == 403
    assert client.post(reverse("admin:workflows_event_delete", args=[event.pk]), {"post": "yes"}).status_code == 403


def test_workflow_pages_show_the_steps_inline(client, adam):
    checkpoint = make_checkpoint()
    client.force_login(adam)

    html = client.get(reverse("admin:workflows_workflow_change", args=[checkpoint.workflow_id])).content.decode()

    assert "issue_refund" in html and "decide_refund" in html


def test_an_operator_is_not_staff(client, alice):
    client.force_login(alice)
    assert client.get(reverse("admin:index")).status_code == 302
