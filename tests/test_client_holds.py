"""The Python client honours a hold: the step after which the console paused the workflow raises ``Paused``
(reason ``held``) with the held checkpoint, the run goes no further, and a new workflow under a refusing
hold is an ``ApiError`` 409 ``agent_on_hold``; after the hold and a resume, the same code carries on."""

from typing import Any

import pytest
from recovery_client import ApiError, Paused, RecoveryClient

from tests.helpers import make_agent, make_user
from workflows.models import Checkpoint, Hold, Step, Workflow

pytestmark = pytest.mark.django_db(transaction=True)  # the live server runs in another thread


@pytest.fixture
def agent_and_client(live_server):
    olivia = make_user("olivia")
    agent, token = make_agent("support-bot", owner=olivia)
    return agent, RecoveryClient(live_server.url, token, timeout=10, retries=3, backoff=0.01, max_wait=0.05)


def run(client, ran):
    with client.workflow("T-1042", "refund", "Refund for ticket T-1042") as wf:
        with wf.step("read_ticket") as s:
            ran.append("read_ticket")
            s.record({"ticket": "T-1042"})
        with wf.step("decide_refund", kind="model") as s:
            ran.append("decide_refund")
            s.record({"decision": "refund"})


def test_a_held_agent_stops_after_the_step_it_reported_and_waits_at_a_held_checkpoint(agent_and_client):
    agent, client = agent_and_client
    hold = Hold.place(agent, by=make_user("alice"), new_workflows=Hold.NewWorkflows.PAUSE)
    ran: list[Any] = []
    with pytest.raises(Paused) as paused:
        run(client, ran)
    assert ran == ["read_ticket"], "nothing after the held step runs"
    assert paused.value.reason == "held"
    checkpoint = Checkpoint.objects.get(pk=paused.value.checkpoint_id)
    assert checkpoint.reason == "held" and checkpoint.status == "open"
    assert list(Step.objects.values_list("name", "status")) == [("read_ticket", "committed")]
    assert Workflow.objects.get().status == Workflow.Status.PAUSED
    assert hold.lift(by=make_user("alice"))
    # Running the code again while the checkpoint waits: paused, still nothing runs twice.
    with pytest.raises(Paused):
        run(client, ran)
    assert ran == ["read_ticket"]


def test_a_refusing_hold_makes_starting_a_new_workflow_an_api_error(agent_and_client):
    agent, client = agent_and_client
    Hold.place(agent, by=make_user("alice"))
    with pytest.raises(ApiError) as refused:
        run(client, [])
    assert refused.value.status == 409 and refused.value.code == "agent_on_hold"
    assert not Workflow.objects.exists()
