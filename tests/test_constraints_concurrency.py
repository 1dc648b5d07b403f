"""Concurrent agents through the HTTP API on PostgreSQL: exactly one writer wins, the others get the
contract's answer (200 with the winner, or 409), never a 500 and never a duplicate row.

Each writer is a thread with its own Django test client and so its own database connection,
released at the end; a barrier starts them together.
"""

import functools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import connection

from tests.apitools import AgentApi, api_agent, issue_refund
from tests.helpers import run_together
from workflows.models import Checkpoint, Decider, Decision, Event, Step, Workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 8


def race(calls: Sequence[Callable[..., Any]]) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as exc:  # surfaced below: a thread must not fail silently
            errors.append(exc)
        finally:
            connection.close()

    threads = run_together([functools.partial(run, i, call) for i, call in enumerate(calls)], timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not errors, errors
    return results


def statuses(responses: list[Any]) -> Counter:
    return Counter(r.status_code for r in responses)


def codes(responses: list[Any]) -> set[str]:
    return {r.json()["error"]["code"] for r in responses if r.status_code >= 400}


def clients(bot: AgentApi) -> list[AgentApi]:
    # One test client per thread: Client is not thread-safe.
    return [AgentApi(bot.agent, bot.token) for _ in range(WRITERS)]


@pytest.fixture
def bot():
    return api_agent("racer")


@pytest.fixture
def workflow_id(bot):
    return bot.create_workflow("T-1042")["id"]


def test_the_same_external_id_creates_one_workflow_and_everyone_gets_it(bot):
    body = {"external_id": "T-1042", "kind": "refund", "title": "Refund", "context": {}}
    responses = race([lambda c=c: c.post("/workflows", body) for c in clients(bot)])
    assert statuses(responses) == {201: 1, 200: WRITERS - 1}
    assert len({r.json()["id"] for r in responses}) == 1
    assert Workflow.objects.filter(agent=bot.agent, external_id="T-1042").count() == 1
    assert Event.objects.filter(verb="created").count() == 1


def test_the_same_step_resent_concurrently_is_recorded_once(bot, workflow_id):
    step = issue_refund()
    responses = race([lambda c=c: c.post(f"/workflows/{workflow_id}/steps", step) for c in clients(bot)])
    assert statuses(responses) == {201: 1, 200: WRITERS - 1}
    assert Step.objects.filter(workflow_id=workflow_id).count() == 1
    assert Event.objects.filter(verb="step_committed").count() == 1


def test_different_steps_racing_for_one_seq_leave_the_winner_and_409s(bot, workflow_id):
    calls = [
        lambda c=c, n=n: c.post(
            f"/workflows/{workflow_id}/steps", {"seq": 4, "name": f"writer-{n}", "kind": "tool", "status": "committed"}
        )
        for n, c in enumerate(clients(bot))
    ]
    responses = race(calls)
    assert statuses(responses) == {201: 1, 409: WRITERS - 1}
    assert codes(responses) == {"step_conflict"}
    winner = next(r.json() for r in responses if r.status_code == 201)
    assert list(Step.objects.filter(workflow_id=workflow_id).values_list("name", flat=True)) == [winner["name"]]


def test_one_idempotency_key_under_different_seqs_is_recorded_once(bot, workflow_id):
    calls = [
        lambda c=c, seq=seq: c.post(f"/workflows/{workflow_id}/steps", issue_refund(seq=seq))
        for seq, c in enumerate(clients(bot), start=3)
    ]
    responses = race(calls)
    assert statuses(responses) == {201: 1, 409: WRITERS - 1}
    assert codes(responses) == {"idempotency_key_taken"}
    assert Step.objects.filter(workflow_id=workflow_id, idempotency_key="T-1042:refund").count() == 1


def test_concurrent_checkpoints_open_exactly_one(bot, workflow_id):
    calls = [
        lambda c=c, n=n: c.post(
            f"/workflows/{workflow_id}/checkpoints", {"reason": "model_timeout", "detail": f"writer {n}", "state": {}}
        )
        for n, c in enumerate(clients(bot))
    ]
    responses = race(calls)
    assert statuses(responses) == {201: 1, 409: WRITERS - 1}
    assert codes(responses) == {"checkpoint_open"}
    assert Checkpoint.objects.filter(workflow_id=workflow_id).count() == 1
    assert Workflow.objects.get(pk=workflow_id).status == "paused"
    assert Event.objects.filter(verb="paused").count() == 1


def test_concurrent_resends_of_one_checkpoint_all_get_it(bot, workflow_id):
    body = {"reason": "model_timeout", "detail": "timed out", "at_seq": 4, "state": {"n": 1}}
    responses = race([lambda c=c: c.post(f"/workflows/{workflow_id}/checkpoints", body) for c in clients(bot)])
    assert statuses(responses) == {201: 1, 200: WRITERS - 1}
    assert len({r.json()["id"] for r in responses}) == 1
    assert Checkpoint.objects.filter(workflow_id=workflow_id).count() == 1
    assert Event.objects.filter(verb="opened").count() == 1


def test_racing_outcomes_of_a_pending_step_settle_on_one(bot, workflow_id):
    bot.report(workflow_id, **issue_refund("pending"))
    outcomes = ["committed", "failed"] * (WRITERS // 2)
    calls = [
        lambda c=c, o=o: c.post(f"/workflows/{workflow_id}/steps", issue_refund(o, external_ref=None))
        for o, c in zip(outcomes, clients(bot), strict=True)
    ]
    responses = race(calls)
    final = Step.objects.get(workflow_id=workflow_id, seq=3).status
    assert final in ("committed", "failed")
    # The winner and every identical report answer 200; the other outcome is refused.
    assert statuses(responses) == {200: WRITERS // 2, 409: WRITERS // 2}
    assert all(r.json()["status"] == final for r in responses if r.status_code == 200)
    assert Event.objects.filter(verb__in=["step_committed", "step_failed"]).count() == 1


def test_a_finish_racing_a_checkpoint_never_both_win(bot, workflow_id):
    finish, pause = AgentApi(bot.agent, bot.token), AgentApi(bot.agent, bot.token)
    responses = race(
        [
            lambda: finish.post(f"/workflows/{workflow_id}/finish", {"status": "completed", "summary": ""}),
            lambda: pause.post(f"/workflows/{workflow_id}/checkpoints", {"reason": "manual"}),
        ]
    )
    assert sorted(r.status_code for r in responses) in ([200, 409], [201, 409])
    workflow = Workflow.objects.get(pk=workflow_id)
    assert (workflow.status, Checkpoint.objects.count()) in (("completed", 0), ("paused", 1))


def test_concurrent_polls_deliver_a_decision_once(bot, workflow_id, alice):
    checkpoint_id = bot.open_checkpoint(workflow_id)["id"]
    Decider(Checkpoint.objects.get(pk=checkpoint_id)).decide(by=alice, action="resume")
    responses = race([lambda c=c: c.get(f"/checkpoints/{checkpoint_id}") for c in clients(bot)])
    assert statuses(responses) == {200: WRITERS}
    assert {r.json()["decision"]["state"] for r in responses} == {"succeeded"}
    assert Decision.objects.get().status == "succeeded"
    assert Event.objects.filter(verb="fetched_by_agent").count() == 1
    assert Event.objects.filter(verb="resumed").count() == 1
    assert Workflow.objects.get(pk=workflow_id).status == "running"
