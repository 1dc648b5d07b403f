"""What one step report costs the database: one transaction, one commit, no lookup before the insert."""

import re
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from django.db import connection

from tests.apitools import AgentApi
from tests.helpers import make_agent
from workflows.models import Event, Step

pytestmark = pytest.mark.django_db(transaction=True)  # real commits, to count them


@contextmanager
def recorded():
    """The SQL statements and the commits of the block."""
    seen: dict[str, Any] = {"sql": [], "commits": 0, "raw": []}

    def statement(execute, sql, params, many, context):
        words = sql.replace('"', "").split()
        if words[0].upper() == "BEGIN":
            return execute(sql, params, many, context)  # SQLite opens the transaction with a statement
        if words[0].upper() == "SELECT":  # the table it reads, not one a subquery in its columns names
            flat = sql.replace('"', "")
            while re.search(r"\([^()]*\)", flat):
                flat = re.sub(r"\([^()]*\)", "", flat)
            words = flat.split()
        table = next((w for w in words[1:] if w.startswith("workflows_") and "." not in w), "")
        seen["sql"].append(f"{words[0].upper()} {table}".strip())
        seen["raw"].append(sql.replace('"', ""))
        return execute(sql, params, many, context)

    original = connection._commit  # type: ignore[attr-defined]  # the backend's own commit, counted

    def commit():
        seen["commits"] += 1
        return original()

    with connection.execute_wrapper(statement), mock.patch.object(connection, "_commit", commit):
        yield seen


@pytest.fixture
def bot(settings):
    settings.AGENT_TOKEN_CACHE_SECONDS = 30
    api = AgentApi(*make_agent())
    api.workflow_id = api.create_workflow("T-1")["id"]
    api.report(api.workflow_id, 1, "read_ticket")  # the token is cached from here on
    return api


def test_a_new_step_is_one_transaction_one_commit_and_four_statements(bot):
    with recorded() as seen:
        bot.report(
            bot.workflow_id,
            2,
            "issue_refund",
            "effect",
            "pending",
            idempotency_key="T-1:refund",
            input={"amount": "42.00"},
        )
    if connection.vendor == "postgresql":
        # Fewer still: the sign of life, the step (ON CONFLICT DO NOTHING) and its audit event are one
        # statement (data-modifying CTEs), atomic and committed on its own: no BEGIN, no COMMIT round trip.
        assert seen["commits"] == 0
        assert seen["sql"] == ["SELECT workflows_workflow", "WITH workflows_workflow"]
        one = seen["raw"][1]
        for part in (
            "UPDATE workflows_workflow",
            "INSERT INTO workflows_step",
            "ON CONFLICT DO NOTHING",
            "INSERT INTO workflows_event",
        ):
            assert part in one
    else:
        assert seen["commits"] == 1
        assert seen["sql"] == [
            "SELECT workflows_workflow",  # the agent's own workflow (404 otherwise)
            "UPDATE workflows_workflow",  # the sign of life, in the step's transaction
            "INSERT workflows_step",  # ON CONFLICT DO NOTHING: no lookup first
            "INSERT workflows_event",
        ]  # the audit trail, same commit
    assert Step.objects.get(workflow_id=bot.workflow_id, seq=2).status == "pending"
    assert Event.objects.filter(workflow_id=bot.workflow_id, verb="step_pending").count() == 1


def test_a_resend_and_a_commit_report_are_one_commit_each(bot):
    bot.report(bot.workflow_id, 2, "issue_refund", "effect", "pending", idempotency_key="T-1:refund")
    with recorded() as resend:
        bot.report(
            bot.workflow_id, 2, "issue_refund", "effect", "pending", idempotency_key="T-1:refund", expect_status=200
        )
    with recorded() as commit:
        bot.report(
            bot.workflow_id,
            2,
            "issue_refund",
            "effect",
            "committed",
            idempotency_key="T-1:refund",
            external_ref="R-1",
            expect_status=200,
        )
    assert resend["commits"] == 1 and commit["commits"] == 1
    assert Event.objects.filter(workflow_id=bot.workflow_id, verb="step_committed").count() == 2  # seq 1 and 2
