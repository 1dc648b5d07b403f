"""The queue pages by (due time, id): bounded queries whose number does not grow with the page."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_workflow
from workflows.models import Checkpoint, Decider, Decision


def _open_many(n: int, *, assign_to=None, by=None) -> list[Checkpoint]:
    agent, _ = make_agent()
    now = timezone.now()
    checkpoints = []
    for i in range(n):
        checkpoint = make_checkpoint(make_workflow(agent))
        Checkpoint.objects.filter(pk=checkpoint.pk).update(due_at=now + timedelta(minutes=i))
        if assign_to and i % 2:
            checkpoint.assign(to=assign_to, by=by, note=f"note {i}")
        checkpoints.append(checkpoint)
    return checkpoints


def test_the_number_of_queries_does_not_grow_with_the_page_size(client, alice, bob):
    _open_many(60, assign_to=bob, by=alice)
    client.force_login(alice)
    client.get(reverse("queue"))  # warm the session and the content types

    sizes = {}
    for per in (25, 50):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse("queue"), {"per": per})
        assert len(response.context["checkpoints"]) == per
        sizes[per] = len(queries)
    assert sizes[25] == sizes[50]


def test_the_polled_partial_stays_within_a_fixed_query_budget(client, alice, bob, django_assert_max_num_queries):
    _open_many(120, assign_to=bob, by=alice)
    client.force_login(alice)
    client.get(reverse("queue"))

    # 13: the session, the user, their roles, the poll's version stamp, the teams (one query: every team,
    # marked mine and led by me), the rows with their assignments and proposals, and the five capped tab
    # counts. None of them grows with the rows shown.
    with django_assert_max_num_queries(13):
        response = client.get(
            reverse("queue"), {"per": 100}, headers={"HX-Request": "true", "HX-Target": "queue-table"}
        )
    assert response.content.decode().count('data-testid="queue-row"') == 100


def test_next_and_previous_walk_the_queue_without_gaps_or_repeats(client, alice):
    checkpoints = _open_many(60)
    client.force_login(alice)

    seen, url = [], reverse("queue") + "?per=25"
    pages = []
    while url:
        response = client.get(url)
        rows = [c.pk for c in response.context["checkpoints"]]
        seen += rows
        pages.append((url, rows))
        url = response.context["next_url"] and reverse("queue") + response.context["next_url"]
    assert seen == [c.pk for c in checkpoints]
    assert [len(rows) for _url, rows in pages] == [25, 25, 10]

    last = client.get(pages[-1][0])
    back = client.get(reverse("queue") + last.context["prev_url"])
    assert [c.pk for c in back.context["checkpoints"]] == pages[1][1]
    assert 'data-testid="page-first"' in back.content.decode()


def test_a_broken_cursor_shows_the_first_page(client, alice):
    checkpoints = _open_many(3)
    client.force_login(alice)

    response = client.get(reverse("queue"), {"after": "nonsense", "before": "1.x"})

    assert [c.pk for c in response.context["checkpoints"]] == [c.pk for c in checkpoints]


def test_a_page_never_reads_what_no_row_shows(client, alice, bob):
    """An agent's raw state can be a whole conversation: fifty of them fetched and decoded per render cost a
    large page more than its rows (47-60 vs 32-35 ms for 27 KB states at 100,000 open). The rows read the
    resume state, never the raw state, the workflow's context or the agent's secrets; no row loads them
    afterwards one by one either (the page's queries do not grow with proposals and assignments)."""
    conversation = {"messages": [{"role": "user", "content": "lorem ipsum " * 40} for _ in range(50)]}
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    checkpoints = [make_checkpoint(make_workflow()) for _ in range(6)]  # an agent each: no incident forms
    for checkpoint in checkpoints[1::2]:
        checkpoint.assign(to=bob, by=alice, note="yours")
    Checkpoint.objects.filter(pk__in=[c.pk for c in checkpoints]).update(state=conversation)
    client.force_login(alice)
    client.get(reverse("queue"))

    def approval_page() -> tuple[str, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse("queue"), {"scope": "approval"})
        assert response.status_code == 200
        return response.content.decode(), [q["sql"] for q in queries.captured_queries]

    def propose(checkpoint: Checkpoint) -> None:
        proposal = Decider(checkpoint).decide(by=bob, action="resume", money_confirmed=True, instructions="go")
        assert proposal.status == Decision.Status.PROPOSED

    propose(checkpoints[1])
    page, one = approval_page()
    propose(checkpoints[3])
    propose(checkpoints[5])
    page, three = approval_page()
    assert page.count('data-testid="badge-approval"') == 3 and "lorem ipsum" not in page
    # The review reads the resume state (what is not done yet), not the raw one.
    assert page.count("Ticket note not written") == 3
    for column in ('"workflows_checkpoint"."state"', '"workflows_workflow"."context"', '"sealed_signing_secret"'):
        assert not [sql for sql in one + three if column in sql], column
    assert len(three) == len(one)  # nothing deferred is loaded afterwards, row by row
