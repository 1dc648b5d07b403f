"""A Celery worker keeps its PostgreSQL connection from one task to the next (CONN_MAX_AGE, as a web process
does), and a connection that died meanwhile is replaced before the next task uses it.

Celery's Django fix-up closes the connection around every task unless told to reuse it; each delivery paid for
a new connection (a backend forked and authenticated). Real PostgreSQL, a Redis of the test's own, a real
worker process delivering decisions to a recording endpoint.
"""

import pytest
from django.db import connection

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from tests.stack import Stack, private_redis, wait_until
from workflows.models import Decider, Decision

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack():
    with private_redis() as server:
        # The suite's stacks close connections after each task (CONN_MAX_AGE=0); production keeps them.
        s = Stack(server.url, CONN_MAX_AGE="60", DELIVERY_TIMEOUT_SECONDS="5")
        yield s
        s.stop()


WORKER = "rc-test-worker"  # the application name the worker's connections carry (libpq's PGAPPNAME)


def worker_backends() -> set[int]:
    """The worker's backends on the test database (not the relay's, not this process's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [WORKER],
        )
        return {pid for (pid,) in cursor.fetchall()}


def deliver_one(receiver, operator, agent) -> Decision:
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    decision = Decider(checkpoint).decide(by=operator, action="resume", instructions="go on", money_confirmed=True)
    wait_until(
        lambda: Decision.objects.filter(pk=decision.pk, status=Decision.Status.SUCCEEDED).exists(),
        timeout=60,
        what=f"decision {decision.pk} to be delivered",
    )
    return decision


def test_a_worker_delivers_decision_after_decision_on_one_connection_and_replaces_a_dead_one(stack, receiver):
    operator = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    stack.relay()  # the decisions reach the stack's broker through it (this process sends to its own)
    stack.overrides["PGAPPNAME"] = WORKER
    stack.worker(concurrency=1)
    deliver_one(receiver, operator, agent)
    first = worker_backends()
    deliver_one(receiver, operator, agent)
    second = worker_backends()
    assert first & second, f"the worker connected anew for the second delivery: {first} then {second}"

    # The database ends the worker's connection between two tasks (a restart, an idle timeout, a failover).
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [sorted(second)])
    wait_until(lambda: not (worker_backends() & second), timeout=30, what="the worker's backend to end")
    decision = deliver_one(receiver, operator, agent)  # health-checked at the task's first query: reconnected
    assert receiver.delivery_ids()[-1] == str(decision.delivery_id)
    assert len(receiver.delivery_ids()) == 3
