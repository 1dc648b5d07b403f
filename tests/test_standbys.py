"""The standbys a workbench offers for a failover: active, advertising failover, running the kind, and not
already running a workflow under the same external id (it would collide with the one taken over). The
last rule is asked per agent through the (agent, external_id) unique index: a ``NOT IN`` over every workflow
with that external id read the whole workflow table on each workbench render (12 ms at 100,000 workflows)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import make_agent, make_checkpoint, make_workflow
from workflows.models import Agent, Decider, Workflow

pytestmark = pytest.mark.django_db


def _standby(name: str, *, kinds: tuple[str, ...] = ("refund",)) -> Agent:
    agent, _ = make_agent(name)
    Agent.objects.filter(pk=agent.pk).update(capabilities=["failover"], kinds=list(kinds))
    agent.refresh_from_db()
    return agent


@pytest.fixture
def checkpoint():
    return make_checkpoint(make_workflow(external_id="T-4242", kind="refund"))


def test_a_standby_already_running_the_same_external_id_is_not_offered(checkpoint):
    free, busy, retired = _standby("free-bot"), _standby("busy-bot"), _standby("retired-bot")
    _standby("triage-bot", kinds=("ticket_triage",))
    make_workflow(busy, external_id="T-4242", kind="refund")
    make_workflow(free, external_id="T-9999", kind="refund")  # another ticket does not make it busy
    Agent.objects.filter(pk=retired.pk).update(is_active=False)
    assert [a.name for a in Decider(checkpoint).standbys()] == ["free-bot"]
    with pytest.raises(ValueError, match="cannot take this workflow over"):
        Decider(checkpoint).check_standby(busy)


@pytest.mark.postgres
def test_the_standby_query_looks_each_agent_up_by_the_unique_index(checkpoint):
    """With a workflow table of some size and its statistics, the plan asks the index per agent (its condition
    names the agent): it never walks every entry of an external id, nor scans the table."""
    agents = [_standby(f"standby-{n}") for n in range(3)]
    Workflow.objects.bulk_create(
        Workflow(agent=agents[n % 3], external_id=f"X-{n}", kind="refund", title="t") for n in range(6_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_workflow")
        cursor.execute("ANALYZE workflows_agent")
        with CaptureQueriesContext(connection) as ctx:
            Decider(checkpoint).standbys()
        (sql,) = [q["sql"] for q in ctx.captured_queries if 'FROM "workflows_agent"' in q["sql"]]
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan on workflows_workflow" not in plan, plan
    assert "Index Cond: ((agent_id = workflows_agent.id) AND" in plan, plan
