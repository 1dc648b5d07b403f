"""The queue's live poll answers 204 (no render, no swap) while nothing an operator sees has changed."""

from __future__ import annotations

import json
import re
import time

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.views import queue as queue_views
from tests.helpers import make_agent, make_checkpoint, make_workflow
from workflows.models import Event


@pytest.fixture(autouse=True)
def _held_clock():
    """The version carries the minute: a test that crossed a minute's end between two requests would see two
    versions for one unchanged queue. The clock stands still unless a test moves it."""
    with time_machine.travel(timezone.now(), tick=False):
        yield


POLL = {"HX-Request": "true", "HX-Target": "queue-table", "HX-Trigger": "queue-table"}


def _poll(client, version: str, **params):
    return client.get(reverse("queue"), {**params, "v": version}, headers=POLL)


def _version(client, **params) -> str:
    response = client.get(reverse("queue"), params)
    assert response.status_code == 200
    return response.context["version"]


def test_the_poll_answers_204_while_nothing_changed(client, alice):
    make_checkpoint()
    client.force_login(alice)
    version = _version(client)

    response = _poll(client, version)

    assert response.status_code == 204
    assert response.content == b""


def test_the_page_carries_its_version_into_the_poll_and_keeps_it_out_of_links(client, alice):
    make_checkpoint()
    client.force_login(alice)
    version = _version(client)

    html = client.get(reverse("queue"), {"reason": "model_timeout", "v": "stale"}).content.decode()

    assert f'hx-vals=\'{{"v": "{version}"}}\'' in html
    assert 'hx-get="/?reason=model_timeout"' in html  # the filters stay, the old version does not
    assert not re.search(r'(href|hx-get)="[^"]*v=stale', html)  # tabs, pager and poll drop it


def test_a_new_checkpoint_makes_the_next_poll_render(client, alice):
    make_checkpoint()
    client.force_login(alice)
    version = _version(client)

    newcomer = make_checkpoint()
    response = _poll(client, version)

    assert response.status_code == 200
    assert f'id="checkpoint-{newcomer.pk}"' in response.content.decode()


def test_a_claim_by_another_operator_makes_the_next_poll_render(client, alice, bob):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    version = _version(client, scope="unassigned")

    assert checkpoint.claim(by=bob)
    response = _poll(client, version, scope="unassigned")

    assert response.status_code == 200
    assert f'id="checkpoint-{checkpoint.pk}"' not in response.content.decode()  # no longer unassigned


def test_a_stale_or_missing_version_renders(client, alice):
    make_checkpoint()
    client.force_login(alice)
    version = _version(client)

    assert _poll(client, version + "0").status_code == 200
    assert client.get(reverse("queue"), headers=POLL).status_code == 200


def test_only_the_poll_itself_is_answered_204(client, alice):
    """A form's answer redirected back to the queue must render, even with the current version in its URL."""
    make_checkpoint()
    client.force_login(alice)
    version = _version(client)

    response = client.get(
        reverse("queue"),
        {"v": version},
        headers={"HX-Request": "true", "HX-Target": "queue-table", "HX-Trigger": "bulk-form"},
    )

    assert response.status_code == 200


def test_an_unchanged_queue_still_renders_once_its_minute_is_over(client, alice, monkeypatch):
    """Ages and the undo-claim window move with time alone."""
    make_checkpoint()
    client.force_login(alice)
    now = 1_800_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)  # the module the queue reads its clock from
    version = _version(client)
    assert _poll(client, version).status_code == 204

    now += queue_views.QUEUE_FRESHNESS_SECONDS
    assert _poll(client, version).status_code == 200


def test_the_204_costs_the_same_few_queries_whatever_the_queue_holds(client, alice):
    agent, _ = make_agent()
    client.force_login(alice)
    counts = []
    for more in (1, 30):
        for _ in range(more):
            make_checkpoint(make_workflow(agent))
        version = _version(client, per=100)
        with CaptureQueriesContext(connection) as queries:
            assert _poll(client, version, per=100).status_code == 204
        counts.append(len(queries))

    assert counts[0] == counts[1]
    assert counts[0] <= 4  # the session, the user, the role check, the version


@pytest.mark.postgres
def test_the_version_is_one_index_entry_away_however_many_steps_came_after(db):
    """Agents write step events (no checkpoint) all the time; the latest checkpoint event must not be found by
    walking back over them on every operator's poll."""
    checkpoint = make_checkpoint()
    agent = checkpoint.workflow.agent
    Event.objects.bulk_create(
        [
            Event(
                workflow=checkpoint.workflow,
                actor_type="agent",
                actor_agent=agent,
                verb="step_committed",
                data={"seq": seq},
            )
            for seq in range(5, 3005)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_event")
        latest = Event.objects.filter(checkpoint__isnull=False).order_by("-pk").values_list("pk", flat=True)[:1]
        sql, params = latest.query.sql_with_params()
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = json.dumps(cursor.fetchone()[0])

    assert "event_about_a_checkpoint" in plan
    assert '"Rows Removed by Filter"' not in plan
    assert queue_views._queue_version().startswith(f"{checkpoint.events.order_by('-pk').first().pk}.")
