"""A worker's way from the broker to the agent's endpoint: take the lease and read the decision with its
checkpoint, workflow and agent (on PostgreSQL one statement, the lease's end computed by the UPDATE on the
database's clock), then POST. Every statement on that path is latency between an operator's approval and the
agent hearing it."""

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

    # PostgreSQL: one statement takes the lease, writes its event and returns the decision with its checkpoint,
    # workflow and agent (a data-modifying WITH), and nothing is read after it. SQLite (embedded, one host)
    # reads the decision with its joins, then its millisecond clock, takes the lease and reads the row again.
    if connection.vendor == "postgresql":
        assert len(before_post) == 1 and before_post[0].startswith("WITH moved AS (UPDATE"), before_post
        assert "STATEMENT_TIMESTAMP()" in before_post[0] and "INSERT INTO" in before_post[0]
    else:
        selects = [sql for sql in before_post if sql.lstrip().upper().startswith("SELECT")]
        clock_reads = [sql for sql in selects if "strftime" in sql]
        assert (len(selects) - len(clock_reads), len(clock_reads)) == (2, 1), selects
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
