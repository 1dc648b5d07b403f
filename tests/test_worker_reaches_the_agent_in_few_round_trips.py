"""A worker's way from the broker to the agent's endpoint: read the decision with its checkpoint, workflow and
agent once, take the lease (the lease's end computed by the UPDATE on the database's clock), then POST.
Every statement on that path is latency between an operator's approval and the agent hearing it."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.helpers import make_checkpoint
from workflows import runtime, tasks
from workflows.models import Decider, Decision


def test_the_worker_reads_nothing_again_between_the_lease_and_the_post(alice, monkeypatch):
    checkpoint = make_checkpoint()
    agent = checkpoint.workflow.agent
    agent.resume_url, agent.allow_plain_http = "http://127.0.0.1:9/resume", True
    agent.save()
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="stop")
    before_post: list[str] = []

    def deliver(d: Decision) -> int:
        d.payload()  # what the real delivery sends: built from what the worker already read
        before_post.extend(q["sql"] for q in queries.captured_queries)
        return 200

    monkeypatch.setattr(runtime, "deliver", deliver)
    with CaptureQueriesContext(connection) as queries:
        assert tasks.deliver_decision(decision.pk) == "delivered"

    selects = [sql for sql in before_post if sql.lstrip().upper().startswith("SELECT")]
    clock_reads = [sql for sql in selects if "statement_timestamp" in sql or "strftime" in sql]
    # The decision with its joins; PostgreSQL takes the lease in one statement that returns the row as it
    # left it (no refresh after it) and computes the lease's end in it, SQLite (embedded, one host) reads its
    # millisecond clock first and the row again after the lease.
    assert len(selects) - len(clock_reads) == (1 if connection.vendor == "postgresql" else 2), selects
    assert len(clock_reads) == (0 if connection.vendor == "postgresql" else 1), selects
    decision.refresh_from_db()
    assert decision.status == Decision.Status.SUCCEEDED and decision.attempts == 1


def test_the_lease_ends_one_lease_after_the_database_s_now(alice, settings):
    checkpoint = make_checkpoint()
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="stop")
    decision = Decision.objects.get(pk=decision.pk)
    started = timezone.now()

    assert decision.start_attempt(lease_seconds=90)

    decision.refresh_from_db()
    assert decision.status == Decision.Status.RUNNING
    lease = (decision.lease_expires_at - started).total_seconds()
    assert 89 <= lease <= 91 + 5  # the database's clock is this machine's in the tests
