"""The incident page refreshes itself like the workbench: its poll answers 204 while nothing it shows changed,
and the live region again when a member arrives, a note lands on the timeline or a rollout wave goes out."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint, make_worked_example, squeezed
from workflows.models import Incident, Rollout

pytestmark = pytest.mark.django_db

POLL = {"HX-Request": "true", "HX-Target": "incident-live", "HX-Trigger": "incident-live"}


def _incident(n=5):
    agent = make_agent()[0]
    agent.incident_threshold = 5
    agent.save()
    for i in range(n):
        make_checkpoint(
            make_worked_example(agent=agent), reason="tool_error", detail=f"provider answered 502 for T-{i}"
        )
    return Incident.objects.get(), agent


def _version(html: str) -> str:
    match = re.search(r'data-version="([^"]+)"', html)
    assert match, "the live region carries its version"
    return match.group(1)


def _poll(client, incident, version):
    return client.get(reverse("incident", args=[incident.pk]), {"v": version}, headers=POLL)


def test_the_page_polls_itself_and_the_poll_answers_204_while_nothing_changed(client, alice):
    incident, _agent = _incident()
    client.force_login(alice)
    page = client.get(reverse("incident", args=[incident.pk])).content.decode()
    assert 'id="incident-live"' in page and 'hx-trigger="every 3s"' in page and "<script>" not in page
    version = _version(page)
    unchanged = _poll(client, incident, version)
    assert unchanged.status_code == 204 and unchanged.content == b""
    stale = _poll(client, incident, "0.0")
    assert stale.status_code == 200 and "<html" not in stale.content.decode()
    assert 'id="incident-live"' in stale.content.decode()


def test_a_member_arriving_and_a_note_change_the_version_and_show_up(client, alice):
    incident, agent = _incident()
    client.force_login(alice)
    version = _version(client.get(reverse("incident", args=[incident.pk])).content.decode())

    make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail="provider answered 502 for T-99")
    arrived = _poll(client, incident, version)
    assert arrived.status_code == 200
    html = squeezed(arrived.content.decode())
    assert 'data-testid="radius-workflows">6 (6 waiting for a decision)' in html
    assert html.count('data-testid="member-row"') == 6
    version = _version(arrived.content.decode())
    assert _poll(client, incident, version).status_code == 204

    incident.add_note("Provider confirmed the outage", by=alice)
    noted = _poll(client, incident, version)
    assert noted.status_code == 200 and "Provider confirmed the outage" in noted.content.decode()


def test_a_rollout_wave_changes_the_version_and_the_waves_show(client, alice):
    incident, _agent = _incident()
    client.force_login(alice)
    rollout = Rollout.start(incident, action="abort", by=alice, canary_percent=20)
    version = _version(client.get(reverse("incident", args=[incident.pk])).content.decode())
    assert rollout.advance()
    polled = _poll(client, incident, version)
    assert polled.status_code == 200
    assert "wave 1: 1 decisions" in squeezed(polled.content.decode())


def test_a_resolved_incident_stops_polling(client, alice):
    incident, _agent = _incident()
    assert incident.set_status(Incident.Status.RESOLVED, by=alice)
    client.force_login(alice)
    page = client.get(reverse("incident", args=[incident.pk])).content.decode()
    assert 'id="incident-live"' in page and "hx-trigger" not in page.split('id="incident-live"')[1].split(">")[0]
