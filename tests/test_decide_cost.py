"""What recording one decision costs the database: a decision on its workbench, or a wave's member that goes on
its own (``wave_decisions``: a four-eyes proposal, a failover, a batch another decision got into), pays each
statement here once (docs/BENCHMARKS.md, "Deciding a wave").

The decision row is the outbox entry, due for the relay from its INSERT on; the checkpoint's and the workflow's
moves are one statement each with their audit events (``moves_at_once``, as a rollout records them); the
workflow is read again once, with its agent, after the checkpoint's move dropped it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows.models import Checkpoint, Decider, Decision, Workflow
from workflows.models.base import moves_at_once

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]  # one statement a move is PostgreSQL's


def open_member(*, resume_url: str) -> tuple[Checkpoint, Any]:
    """An open checkpoint as a wave reads its members (with the workflow and its agent), and who decides it."""
    alice = make_user("alice")
    agent, _ = make_agent("support-bot", resume_url=resume_url, owner=make_user("olivia"))
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    return Checkpoint.objects.select_related("workflow__agent").get(pk=checkpoint.pk), alice


def recorded(checkpoint: Checkpoint, alice: Any, django_capture_on_commit_callbacks) -> tuple[Decision, list[str]]:
    decider = Decider(checkpoint)
    draft = decider.draft(action="resume", instructions="Write the note.", money_confirmed=True)
    with (
        moves_at_once(),
        CaptureQueriesContext(connection) as queries,
        django_capture_on_commit_callbacks() as handed,
    ):
        decision = decider.record(draft, by=alice)
    statements = [q["sql"] for q in queries.captured_queries]
    print(f"{len(statements)} statements", *(sql[:100] for sql in statements), sep="\n  ")
    recorded.handed = handed  # type: ignore[attr-defined]
    return decision, statements


def test_a_pushed_resume_is_recorded_in_seven_statements_and_is_due_from_its_insert(
    django_capture_on_commit_callbacks,
):
    checkpoint, alice = open_member(resume_url="https://agent.example/resume")
    decision, statements = recorded(checkpoint, alice, django_capture_on_commit_callbacks)

    kinds = [" ".join(sql.split()[:3]) for sql in statements]
    assert len(statements) == 7, kinds
    assert statements[0].startswith("SAVEPOINT") and statements[-1].startswith("RELEASE SAVEPOINT")
    assert statements[1].startswith('INSERT INTO "workflows_decision"')
    assert [s for s in statements if s.startswith('UPDATE "workflows_decision"')] == []  # stamped due in the INSERT
    rereads = [s for s in statements if s.startswith('SELECT "workflows_workflow"')]
    assert len(rereads) == 1 and 'JOIN "workflows_agent"' in rereads[0]  # the workflow with its agent, once
    assert sum(s.startswith("WITH moved AS") for s in statements) == 2  # the checkpoint's move, the workflow's

    assert Decision.objects.dispatchable().filter(pk=decision.pk).exists()  # the relay would send it
    assert len(recorded.handed) == 1  # type: ignore[attr-defined]  # and the commit hands it to the broker
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.DECIDED
    assert Workflow.objects.get(pk=checkpoint.workflow_id).status == Workflow.Status.RESUMING


def test_a_polled_agents_decision_is_never_due_for_the_relay(django_capture_on_commit_callbacks):
    checkpoint, alice = open_member(resume_url="")  # the agent fetches its decision from the API
    decision, _ = recorded(checkpoint, alice, django_capture_on_commit_callbacks)

    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED and decision.next_attempt_at is None
    assert not Decision.objects.dispatchable().filter(pk=decision.pk).exists()
    assert recorded.handed == []  # type: ignore[attr-defined]
    assert Workflow.objects.get(pk=checkpoint.workflow_id).status == Workflow.Status.RESUMING
