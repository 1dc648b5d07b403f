"""The LangGraph adapter against a live console: a graph crashes mid-run, the checkpoint is visible through
the API, an operator resumes it and the graph completes from where it stopped, no effect repeated."""

from __future__ import annotations

import pytest
from langgraph_refund import run
from recovery_client import RecoveryClient
from refund_systems import Systems

from tests.adapter_live import AgentThread, open_checkpoint, workflow
from tests.helpers import make_agent, make_user
from workflows.models import Decider

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_graph_that_crashes_mid_run_resumes_from_the_console_without_repeating_effects(live_server, alice):
    _, token = make_agent("langgraph-bot", owner=make_user("olivia"))
    client = RecoveryClient(live_server.url, token, retries=3, backoff=0.05)
    systems = Systems()
    agent = AgentThread(
        lambda: run(client, "T-LG-1", systems, crash_draft=1, poll=0.05, timeout=60, say=lambda line: None)
    )
    agent.start()

    checkpoint = open_checkpoint("T-LG-1", agent=agent)
    seen = client.get_checkpoint(str(checkpoint.pk))  # what the console shows, through the API
    assert (seen["status"], seen["reason"]) == ("open", "model_timeout")
    assert "draft_note" in seen["detail"]
    resume_state = seen["resume_state"]
    assert [s["name"] for s in resume_state["committed"]] == ["issue_refund"]  # the committed effects
    assert resume_state["pending"]["name"] == "draft_note"
    assert resume_state["unknown_effects"] == []
    assert resume_state["state"]["graph"]["refund_ref"] == "R-88"  # the graph's state, as the agent state
    assert [step["name"] for step in seen["resume_state"]["plan"]] == [
        "draft_note",
        "write_ticket_note",
        "notify_customer",
    ]
    assert workflow("T-LG-1").status == "paused"

    Decider(checkpoint).decide(by=alice, action="resume", instructions="Carry on.", money_confirmed=True)
    values = agent.outcome()

    assert values["refund_ref"] == "R-88" and values["notified"]
    assert systems.calls == {"read_ticket": 1, "refund": 1, "write_note": 1, "message": 1}
    finished = workflow("T-LG-1")
    assert (finished.status, finished.owner.username) == ("completed", "olivia")
    steps = list(finished.steps.order_by("seq").values_list("name", "status"))
    assert steps == [
        ("read_ticket", "committed"),
        ("decide_refund", "committed"),
        ("issue_refund", "committed"),
        ("draft_note", "failed"),
        ("draft_note", "committed"),
        ("write_ticket_note", "committed"),
        ("notify_customer", "committed"),
    ]
