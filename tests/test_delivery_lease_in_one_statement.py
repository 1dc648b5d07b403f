"""PostgreSQL: a worker takes a decision's lease and reads what the POST needs in one statement
(``workflows/models/leases.py``). What it hands the delivery must be what the two-step path reads: every column of
the decision, checkpoint, workflow and receiving agent as stored, the relations already in place (nothing read
again before the POST), and no lease at all where the two-step path takes none."""

from __future__ import annotations

import threading
from typing import cast

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows.models import Agent, Checkpoint, Decider, Decision, Event, Workflow, leases
from workflows.models.base import IllegalTransition

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def columns(row: Model) -> dict[str, object]:
    return {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}


def as_read_after(decision: Decision) -> dict[str, dict[str, object]]:
    """The rows as a fresh ORM read finds them after the lease, with the agent the decision goes to."""
    fresh = Decision.objects.select_related("checkpoint__workflow__agent", "standby").get(pk=decision.pk)
    receiving = fresh.standby or fresh.checkpoint.workflow.agent
    return {
        "decision": columns(fresh),
        "checkpoint": columns(fresh.checkpoint),
        "workflow": columns(fresh.checkpoint.workflow),
        "agent": columns(receiving),
    }


def handed_over(decision: Decision) -> dict[str, dict[str, object]]:
    return {
        "decision": columns(decision),
        "checkpoint": columns(decision.checkpoint),
        "workflow": columns(decision.checkpoint.workflow),
        "agent": columns(decision.agent),
    }


@pytest.fixture
def alice():
    return make_user("alice")


def test_the_lease_hands_the_delivery_every_column_as_stored_and_reads_nothing_more(receiver, alice):
    agent, _ = make_agent(resume_url=receiver.url, owner=make_user("olivia"))
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    decision = Decider(checkpoint).decide(
        by=alice, action="resume", instructions="Write the note.", money_confirmed=True
    )
    last = Event.objects.order_by("-pk").values_list("pk", flat=True).first()

    leased = leases.take(decision.pk)

    assert isinstance(leased, Decision)
    with CaptureQueriesContext(connection) as after:
        got = handed_over(leased)
        payload = leased.payload()
    assert after.captured_queries == []  # the relations came with the lease: the POST reads nothing
    assert got == as_read_after(leased)
    assert leased.status == Decision.Status.RUNNING and leased.attempts == 1 and leased.lease_expires_at
    assert payload["delivery_id"] == str(decision.delivery_id) and payload["action"] == "resume"
    [event] = Event.objects.filter(pk__gt=last)
    assert (event.verb, event.actor, event.subject, event.data) == (
        "delivery_started",
        "system",
        f"decision:{decision.pk}",
        {"from": "queued", "to": "running", "attempt": 1},
    )
    assert (event.workflow_id, event.checkpoint_id, event.decision_id) == (
        checkpoint.workflow_id,
        checkpoint.pk,
        decision.pk,
    )


def test_a_failover_is_leased_for_its_standby_with_the_standby_s_endpoint(receiver, alice):
    original, _ = make_agent("gone-bot", resume_url="http://127.0.0.1:9/agents/gone-bot/resume")
    standby, _ = make_agent("standby-bot", resume_url=receiver.url)
    Agent.objects.filter(pk=standby.pk).update(capabilities=["failover"], kinds=["refund"])
    checkpoint = make_checkpoint(make_worked_example(agent=original))
    decision = Decider(checkpoint).decide(
        by=alice, action="failover", standby=Agent.objects.get(pk=standby.pk), money_confirmed=True
    )

    leased = leases.take(decision.pk)

    assert isinstance(leased, Decision)
    assert leased.agent.pk == standby.pk and leased.agent.resume_url == receiver.url
    assert handed_over(leased) == as_read_after(leased)


@pytest.mark.parametrize("path", ["one statement", "read then lease"])
def test_nothing_is_leased_for_an_agent_that_polls_or_a_decision_already_finished(alice, path, monkeypatch):
    if path == "read then lease":
        monkeypatch.setattr(leases, "take", leases.read_then_lease)
    polls, _ = make_agent("polling-bot")  # no resume URL: its next fetch of the checkpoint is the delivery
    checkpoint = make_checkpoint(make_worked_example(agent=polls))
    polled = Decider(checkpoint).decide(by=alice, action="abort", instructions="Stop.")
    pushed_to, _ = make_agent("pushed-bot", resume_url="http://127.0.0.1:9/resume", allow_plain_http=True)
    finished = Decider(make_checkpoint(make_worked_example(agent=pushed_to))).decide(
        by=alice, action="abort", instructions="Stop."
    )
    Decision.objects.filter(pk=finished.pk).update(status=Decision.Status.SUCCEEDED)

    assert [leases.take(pk) for pk in (polled.pk, finished.pk, 10**12)] == ["skipped"] * 3
    assert list(Decision.objects.filter(pk__in=[polled.pk, finished.pk]).values_list("status", "attempts")) in (
        [("queued", 0), ("succeeded", 0)],
        [("succeeded", 0), ("queued", 0)],
    )
    assert not Event.objects.filter(verb="delivery_started").exists()
    assert Checkpoint.objects.get(pk=checkpoint.pk).status == Checkpoint.Status.DECIDED


def test_two_workers_racing_for_the_same_decisions_lease_each_exactly_once(alice):
    """Two workers handed the same 20 decisions at once (a redelivered message, a sweep's re-dispatch): each
    decision is leased by exactly one of them, attempted once, with one delivery_started event."""
    agent, _ = make_agent("raced-bot", resume_url="http://127.0.0.1:9/resume", allow_plain_http=True)
    pks = [
        Decider(make_checkpoint(make_worked_example(agent=agent)))
        .decide(by=alice, action="abort", instructions="Stop.")
        .pk
        for _ in range(20)
    ]
    start = threading.Barrier(2)
    taken: dict[str, list[object]] = {"one": [], "two": []}

    def worker(name: str) -> None:
        try:
            start.wait(timeout=30)
            taken[name] = [leases.take(pk) for pk in pks]
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=worker, args=(name,)) for name in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)

    for index, pk in enumerate(pks):
        won = [name for name in taken if isinstance(taken[name][index], Decision)]
        lost = [taken[name][index] for name in taken if not isinstance(taken[name][index], Decision)]
        assert len(won) == 1 and lost == ["skipped"], (pk, won, lost)
    assert set(Decision.objects.filter(pk__in=pks).values_list("status", "attempts")) == {("running", 1)}
    started = Event.objects.filter(verb="delivery_started", decision_id__in=pks)
    assert sorted(started.values_list("decision_id", flat=True)) == sorted(pks)


def _recorded(alice, record, meanwhile: str) -> tuple[object, ...]:
    """Lease a resume, change its rows as ``meanwhile`` says, record the success with ``record``: what it
    answered (or raised) and what the rows and the trail say after."""
    agent, _ = make_agent(resume_url="http://127.0.0.1:9/resume", allow_plain_http=True)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    decision = Decider(checkpoint).decide(by=alice, action="resume", instructions="Go on.", money_confirmed=True)
    leased = leases.take(decision.pk)
    assert isinstance(leased, Decision) and leased.status == Decision.Status.RUNNING
    if meanwhile == "the sweep reclaimed the lease":
        Decision.objects.filter(pk=decision.pk).update(status=Decision.Status.QUEUED, lease_expires_at=None)
    elif meanwhile == "the checkpoint was resolved":
        Checkpoint.objects.filter(pk=checkpoint.pk).update(status=Checkpoint.Status.RESOLVED)
    elif meanwhile == "the workflow paused again":
        Workflow.objects.filter(pk=checkpoint.workflow_id).update(status=Workflow.Status.PAUSED)
    last = Event.objects.order_by("-pk").values_list("pk", flat=True).first()
    try:
        answer: object = record(leased)
    except IllegalTransition as refused:
        answer = type(refused).__name__
    workflow = Workflow.objects.get(pk=checkpoint.workflow_id)
    return (
        answer,
        Decision.objects.get(pk=decision.pk).status,
        Checkpoint.objects.get(pk=checkpoint.pk).status,
        workflow.status,
        [(e.verb, e.data) for e in Event.objects.filter(pk__gt=last).order_by("pk")],
    )


@pytest.mark.parametrize(
    "meanwhile",
    ["nothing", "the sweep reclaimed the lease", "the checkpoint was resolved", "the workflow paused again"],
)
def test_the_success_in_one_statement_answers_as_the_orm_when_the_rows_moved_meanwhile(alice, meanwhile):
    """``record_delivered`` records what ``mark_succeeded`` records, whatever happened between the lease and
    the agent's answer: a lost lease records nothing, a checkpoint the ORM must refuse is refused the same way
    (nothing recorded), a workflow no longer resuming stays where it is."""
    at_once = _recorded(alice, leases.record_delivered, meanwhile)
    by_orm = _recorded(alice, Decision.mark_succeeded, meanwhile)
    assert at_once == by_orm
    expected = {
        "nothing": (True, "succeeded", "resolved", "running", ["delivered", "resolved", "resumed"]),
        "the sweep reclaimed the lease": (False, "queued", "decided", "resuming", []),
        "the checkpoint was resolved": ("IllegalTransition", "running", "resolved", "resuming", []),
        "the workflow paused again": (True, "succeeded", "resolved", "paused", ["delivered", "resolved"]),
    }[meanwhile]
    trail = cast(list[tuple[str, object]], at_once[4])
    assert (*at_once[:4], [verb for verb, _ in trail]) == expected
