"""On PostgreSQL a delivery's moves are one statement each (``moves_at_once``), and its lease is taken together
with the read of the decision, checkpoint, workflow and agent (``leases.lease``); SQLite, and every other caller,
keep the read, then the ORM's UPDATE, event and re-read. Both must leave the same rows and the same audit trail
and answer the same: each action is delivered once each way, side by side, and everything but ids and instants
compared."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows import tasks
from workflows.models import Checkpoint, Decider, Decision, Event, Workflow, decisions, leases

pytestmark = pytest.mark.postgres  # the one-statement moves are PostgreSQL's (REQUIRE_FULL_STACK fails, never skips)

DECISION = ("status", "attempts", "dispatches", "last_error", "next_attempt_at")
CHECKPOINT = ("status", "assignee_id")
WORKFLOW = ("status", "summary", "handoff_note", "owner_id")


def delivered(receiver, alice, owner, action: str) -> dict[str, Any]:
    """Decide ``action`` on a fresh checkpoint and deliver it; what the rows and the trail say after."""
    agent, _ = make_agent(resume_url=receiver.url, owner=owner)
    checkpoint = make_checkpoint(make_worked_example(agent=agent, owner=owner))
    checkpoint.claim(by=alice)
    extra = {"new_owner": owner} if action == "handoff" else {}
    decision = Decider(checkpoint).decide(by=alice, action=action, instructions="Go on.", money_confirmed=True, **extra)
    stale = Decision.objects.get(pk=decision.pk)  # a second worker's copy, read before the first took the lease
    first = Event.objects.order_by("-pk").values_list("pk", flat=True).first()

    answer = tasks.deliver_decision(decision.pk)
    lost = stale.start_attempt()  # the second message of the same decision, too late
    again = tasks.deliver_decision(decision.pk)

    decision.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=checkpoint.pk)
    workflow = Workflow.objects.get(pk=checkpoint.workflow_id)
    names = {f"decision:{decision.pk}": "decision", f"checkpoint:{checkpoint.pk}": "checkpoint"}
    names[f"workflow:{workflow.pk}"] = "workflow"
    return {
        "answers": (answer, lost, stale.status, again),
        "decision": [getattr(decision, f) for f in DECISION],
        "stamped": (decision.finished_at is not None, decision.lease_expires_at, checkpoint.resolved_at is not None),
        "finished_with_the_record": decision.finished_at == checkpoint.resolved_at == workflow.last_activity_at,
        "checkpoint": [getattr(checkpoint, f) for f in CHECKPOINT],
        "workflow": [*(getattr(workflow, f) for f in WORKFLOW), workflow.agent_id == agent.pk],
        "trail": [
            (
                e.verb,
                e.actor,
                names.get(e.subject, e.subject),
                e.workflow_id == workflow.pk,
                e.checkpoint_id == (checkpoint.pk if e.checkpoint_id else None),
                e.decision_id == (decision.pk if e.decision_id else None),
                e.data,
            )
            for e in Event.objects.filter(pk__gt=first).order_by("pk")
        ],
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("action", ["resume", "retry_step", "abort", "handoff"])
def test_a_delivery_in_one_statement_records_what_the_orm_path_records(receiver, action, monkeypatch):
    alice, owner = make_user("alice"), make_user("olivia")
    at_once = delivered(receiver, alice, owner, action)
    with monkeypatch.context() as orm:
        orm.setattr(decisions, "moves_at_once", contextlib.nullcontext)  # the ORM path, on the same database
        orm.setattr(leases, "take", leases.read_then_lease)  # the read, then the lease
        orm.setattr(leases, "record_delivered", Decision.mark_succeeded)  # three moves, a read, a transaction
        by_orm = delivered(receiver, alice, owner, action)

    assert at_once == by_orm
    assert at_once["answers"] == ("delivered", False, Decision.Status.SUCCEEDED, "skipped")
    assert at_once["stamped"] == (True, None, True) and at_once["finished_with_the_record"]
    assert [verb for verb, *_ in at_once["trail"]][:3] == ["delivery_started", "delivered", "resolved"]
    assert len(receiver.deliveries) == 2  # once per decision: the late message delivered nothing


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_loses_the_lease_race_answers_lost_and_posts_nothing(receiver, monkeypatch):
    """The ORM path: another worker takes the lease between this one's read of the decision and its own attempt."""
    alice = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="Stop.")
    monkeypatch.setattr(decisions, "moves_at_once", contextlib.nullcontext)
    monkeypatch.setattr(leases, "take", leases.read_then_lease)
    take = Decision.start_attempt

    def raced(self: Decision, **kwargs: Any) -> bool:
        assert take(Decision.objects.get(pk=self.pk))
        return take(self, **kwargs)

    monkeypatch.setattr(Decision, "start_attempt", raced)
    assert tasks.deliver_decision(decision.pk) == "lost"

    decision.refresh_from_db()
    assert decision.status == Decision.Status.RUNNING and decision.attempts == 1  # the winner's lease stands
    assert Event.objects.filter(decision=decision, verb="delivery_started").count() == 1
    assert receiver.deliveries == []  # the loser posted nothing


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["one statement", "read then lease"])
def test_a_worker_finding_the_lease_held_answers_lost_and_posts_nothing(receiver, path, monkeypatch):
    """The one-statement lease has no window between a read and the lease: a second worker's statement finds the
    lease held (or waits for the first's commit and then finds it so), takes nothing and stands back, as the
    two-step path does when its read finds the decision running."""
    alice = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="Stop.")
    if path == "read then lease":
        monkeypatch.setattr(leases, "take", leases.read_then_lease)
    first = leases.take(decision.pk)  # the first worker holds the lease
    assert isinstance(first, Decision) and first.status == Decision.Status.RUNNING

    assert tasks.deliver_decision(decision.pk) == "skipped"

    decision.refresh_from_db()
    assert decision.status == Decision.Status.RUNNING and decision.attempts == 1  # the first's lease stands
    assert Event.objects.filter(decision=decision, verb="delivery_started").count() == 1
    assert receiver.deliveries == []  # the second posted nothing
