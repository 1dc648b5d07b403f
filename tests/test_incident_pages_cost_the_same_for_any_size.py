"""A large incident costs the queue and the incident page no more queries than a small one: every figure is
read over all members at once, never one query per member (make bench measures the time at 10,000)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import REMAINING_PLAN, make_agent, make_workflow
from workflows.models import Checkpoint, Incident

pytestmark = pytest.mark.django_db


def grow(agent, incident_size: int) -> Incident:
    """Open checkpoints of one signature until the agent's incident has ``incident_size`` members."""
    while (
        not Incident.objects.filter(agent=agent).exists()
        or Incident.objects.get(agent=agent).members.count() < incident_size
    ):
        n = Checkpoint.objects.count()
        Checkpoint.open_for(
            make_workflow(agent, context={"customer": f"C-{n}"}),
            reason="tool_error",
            at_seq=4,
            plan=REMAINING_PLAN,
            detail=f"payments provider answered 502 for T-{n}",
        )
    return Incident.objects.get(agent=agent)


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_queue_and_the_incident_page_read_a_30_member_incident_in_as_many_queries_as_a_5_member_one(client, alice):
    agent, _ = make_agent()
    agent.incident_threshold = 5
    agent.save()
    client.force_login(alice)
    incident = grow(agent, 5)
    url = incident.get_absolute_url()
    small = {"queue": queries(client, "/"), "incident": queries(client, url)}
    grow(agent, 30)
    large = {"queue": queries(client, "/"), "incident": queries(client, url)}
    assert large == small
