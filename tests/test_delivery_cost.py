"""What one delivery costs the database, counted on the worker's way from the broker message to the recorded
result, against a real loopback resume endpoint: the lease before the POST, the success record after it.

Every statement before the POST is latency between an operator's approval and the agent hearing it; every
one after it is worker time the next decision waits behind. Each statement is a round trip; Django lists a
transaction's BEGIN and COMMIT among them (psycopg sends each on its own)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows import runtime, tasks
from workflows.models import Checkpoint, Decider, Decision, Event, Workflow

pytestmark = pytest.mark.django_db(transaction=True)  # real transactions and commits, to count them


@contextmanager
def counted():
    """The statements of the block, split at the POST to the agent, and the transactions it committed."""
    seen: dict[str, Any] = {"before_post": [], "after_post": [], "commits": [0, 0]}  # before, after the POST
    real_deliver = runtime.deliver
    original_commit = connection._commit  # type: ignore[attr-defined]  # the backend's own commit

    def deliver(decision: Decision) -> int:
        seen["before_post"] = [q["sql"] for q in queries.captured_queries]
        seen["commits"][0] = seen["commits"][1]
        return real_deliver(decision)

    def commit() -> None:
        seen["commits"][1] += 1
        return original_commit()

    with (
        CaptureQueriesContext(connection) as queries,
        mock.patch.object(runtime, "deliver", deliver),
        mock.patch.object(connection, "_commit", commit),
    ):
        yield seen
    seen["after_post"] = [q["sql"] for q in queries.captured_queries][len(seen["before_post"]) :]
    seen["commits"] = [seen["commits"][0], seen["commits"][1] - seen["commits"][0]]


@pytest.fixture
def paused(receiver):
    alice = make_user("alice")
    agent, _ = make_agent("support-bot", resume_url=receiver.url, owner=make_user("olivia"))
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    return checkpoint, alice


@pytest.mark.postgres  # the one-statement lease is PostgreSQL's (REQUIRE_FULL_STACK fails, never skips)
def test_a_resume_is_delivered_in_few_round_trips(paused, receiver):
    checkpoint, alice = paused
    decision = Decider(checkpoint).decide(
        by=alice, action="resume", instructions="Write the note.", money_confirmed=True
    )

    last_event = Event.objects.order_by("-pk").values_list("pk", flat=True).first()
    with counted() as seen:
        assert tasks.deliver_decision(decision.pk) == "delivered"

    before, after = seen["before_post"], seen["after_post"]
    lease_trips, record_trips = len(before), len(after)
    print(f"before the POST: {lease_trips} round trips", *(sql[:90] for sql in before), sep="\n  ")
    print(f"after the POST: {record_trips} round trips", *(sql[:90] for sql in after), sep="\n  ")
    assert len(receiver.deliveries) == 1
    decision.refresh_from_db()
    checkpoint.refresh_from_db()
    workflow = Workflow.objects.get(pk=checkpoint.workflow_id)
    assert decision.status == Decision.Status.SUCCEEDED and decision.attempts == 1
    assert checkpoint.status == Checkpoint.Status.RESOLVED and workflow.status == Workflow.Status.RUNNING
    trail = Event.objects.filter(pk__gt=last_event).order_by("pk")
    assert [(e.verb, e.actor, e.subject, e.workflow_id, e.checkpoint_id, e.decision_id, e.data) for e in trail] == [
        (
            "delivery_started",
            "system",
            f"decision:{decision.pk}",
            workflow.pk,
            checkpoint.pk,
            decision.pk,
            {"from": "queued", "to": "running", "attempt": 1},
        ),
        (
            "delivered",
            "system",
            f"decision:{decision.pk}",
            workflow.pk,
            checkpoint.pk,
            decision.pk,
            {"from": "running", "to": "succeeded"},
        ),
        (
            "resolved",
            "system",
            f"checkpoint:{checkpoint.pk}",
            workflow.pk,
            checkpoint.pk,
            None,
            {"from": "decided", "to": "resolved"},
        ),
        (
            "resumed",
            "system",
            f"workflow:{workflow.pk}",
            workflow.pk,
            None,
            None,
            {"from": "resuming", "to": "running", "owner": None},
        ),
    ]
    # Before: 7 round trips to the POST (the read, BEGIN, the compare-and-set UPDATE, its event, the Slack
    # outbox's bump, COMMIT, the re-read) and 24 after it (the clock, a savepoint, UPDATE, event and re-read
    # per move, the checkpoint and its workflow read three times). Then 2 to the POST: the read, and the lease
    # with its event and the row as it left it. Now one: the lease, its event and the decision with its
    # checkpoint, workflow and agent as one statement (workflows/models/leases.py). After the POST, it was one
    # transaction with one statement per move, the Slack outbox's bump of each checkpoint event, and one read
    # of the checkpoint with its workflow (8); now the three moves and their events are one statement
    # (leases.record_delivered), the bump of the checkpoint's Slack messages too, one statement atomic on its
    # own: no BEGIN and COMMIT, each a round trip that waits for the database's process on a busy machine.
    # The lease changes nothing a Slack message shows: no bump for it.
    assert (lease_trips, record_trips) == (1, 1)
    assert before[0].startswith("WITH moved AS (UPDATE") and "INSERT INTO" in before[0]
    assert after[0].startswith("WITH dm AS (UPDATE") and after[0].count("INSERT INTO") == 1
    assert 'UPDATE "workflows_slackmessage"' in after[0]
    assert not any(sql.lower().startswith("select") for sql in after)  # stamped by the UPDATE's own clock: no read


def forget_prepared() -> None:
    """Whatever an earlier test prepared on this connection is deallocated (psycopg's cache forgets it too)."""
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


def prepared_statements() -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return cursor.fetchall()


def three_resumes_delivered(receiver) -> None:
    alice = make_user("alice")
    agent, _ = make_agent("support-bot", resume_url=receiver.url, owner=make_user("olivia"))
    decisions = []
    for _ in range(3):
        checkpoint = make_checkpoint(make_worked_example(agent=agent))
        checkpoint.claim(by=alice)
        decisions.append(
            Decider(checkpoint).decide(by=alice, action="resume", instructions="Go on.", money_confirmed=True)
        )
    assert [tasks.deliver_decision(d.pk) for d in decisions] == ["delivered"] * 3
    assert len(receiver.deliveries) == 3
    assert Decision.objects.filter(status=Decision.Status.SUCCEEDED).count() == 3


@pytest.mark.postgres
def test_the_lease_and_the_success_record_are_parsed_and_planned_once_per_connection(receiver):
    """Each is a statement of about 4 kB: parsed and planned on every delivery it cost PostgreSQL more than
    running it. Sent with their parameters apart and prepared at their first run (``statement_cursor``), the
    worker's connection keeps one prepared statement each, run for every delivery after it."""
    forget_prepared()
    three_resumes_delivered(receiver)

    prepared = prepared_statements()
    print(*(f"{runs} runs: {statement[:80]}" for statement, runs in prepared), sep="\n")
    lease = [runs for statement, runs in prepared if statement.startswith('WITH moved AS (UPDATE "workflows_decision"')]
    record = [runs for statement, runs in prepared if statement.startswith('WITH dm AS (UPDATE "workflows_decision"')]
    assert lease == [3] and record == [3], "one prepared statement each, run for all three deliveries"


@pytest.mark.postgres
def test_behind_a_pooler_that_cannot_keep_them_nothing_is_prepared(receiver, settings):
    settings.PREPARED_STATEMENTS = False  # PgBouncer before 1.21 in transaction pooling
    forget_prepared()
    three_resumes_delivered(receiver)
    assert prepared_statements() == []
