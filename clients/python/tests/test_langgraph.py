"""The LangGraph adapter with a real graph of deterministic nodes (the refund example; no model, no network)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import need

need("langgraph")

from fakeconsole import FakeConsole  # noqa: E402
from langgraph_refund import build_graph, plan, run  # noqa: E402
from recovery_client import Paused, RecoveryClient, Stopped  # noqa: E402
from recovery_client.langgraph import RecoveryGraph  # noqa: E402
from refund_systems import Systems  # noqa: E402

ORDER = ["read_ticket", "decide_refund", "issue_refund", "draft_note", "write_ticket_note", "notify_customer"]


def adapter(client: RecoveryClient, systems: Systems, **kwargs: int) -> RecoveryGraph:
    return RecoveryGraph(client, build_graph(systems, **kwargs), kind="refund", plan=plan)


def test_a_clean_graph_run_reports_each_node_as_a_step(client: RecoveryClient, console: FakeConsole) -> None:
    systems = Systems()
    values = adapter(client, systems).run("T-1042", {"ticket_id": "T-1042"})
    assert values["refund_ref"] == "R-88" and values["notified"]
    workflow = console.workflow_by_external_id("T-1042")
    steps = console.steps(workflow["id"])
    assert [(s["name"], s["kind"], s["status"]) for s in steps] == [
        ("read_ticket", "tool", "committed"),
        ("decide_refund", "model", "committed"),
        ("issue_refund", "effect", "committed"),
        ("draft_note", "model", "committed"),
        ("write_ticket_note", "effect", "committed"),
        ("notify_customer", "effect", "committed"),
    ]
    assert [s["idempotency_key"] for s in steps if s["kind"] == "effect"] == [
        "T-1042:issue_refund:3",
        "T-1042:write_ticket_note:5",
        "T-1042:notify_customer:6",
    ]
    assert steps[2]["external_ref"] == "R-88"
    assert steps[0]["output"] == {"ticket": systems.read_ticket("T-1042")}
    assert workflow["status"] == "completed"


def test_an_interrupt_becomes_a_checkpoint_with_the_graph_state_and_the_decision_resumes_it(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems(amount="420.00")
    graph = adapter(client, systems)
    with pytest.raises(Paused) as paused:
        graph.run("T-1043", {"ticket_id": "T-1043"})
    checkpoint = paused.value.checkpoint
    assert checkpoint["reason"] == "manual"
    assert checkpoint["detail"] == "Approve a refund of 420.00?"
    state = checkpoint["resume_state"]
    assert state["state"]["graph"]["ticket"]["amount"] == "420.00"
    assert state["state"]["next"] == ["decide_refund"]
    assert state["state"]["thread_id"] == "T-1043"
    assert state["pending"]["name"] == "decide_refund"
    assert checkpoint["at_seq"] == state["pending"]["seq"]
    assert [(step["name"], step.get("amount")) for step in checkpoint["resume_state"]["plan"]] == [
        ("decide_refund", None),
        ("issue_refund", "420.00"),
        ("draft_note", None),
        ("write_ticket_note", None),
        ("notify_customer", None),
    ]  # the example's plan(): money still ahead
    assert systems.refunds == {}

    console.decide(paused.value.checkpoint_id, "resume", instructions="Approved by the team lead.")
    values = graph.resume(paused.value.wait_for_decision(interval=0.01, timeout=5), "T-1043")
    assert values["approval"] == {
        "action": "resume",
        "instructions": "Approved by the team lead.",
        "confirmations": {},
    }  # what interrupt() returned: Command(resume=...)
    assert values["note"].endswith("Approved by the team lead.")
    workflow = console.workflow_by_external_id("T-1043")
    assert [(s["name"], s["status"]) for s in console.steps(workflow["id"])] == [
        (name, "committed") for name in ORDER
    ]  # the interrupted step carried on under its seq


def test_a_node_failure_becomes_a_checkpoint_and_the_resumed_graph_does_not_repeat_effects(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    graph = adapter(client, systems, crash_draft=1)
    with pytest.raises(Paused) as paused:
        graph.run("T-1044", {"ticket_id": "T-1044"})
    checkpoint = paused.value.checkpoint
    assert checkpoint["reason"] == "model_timeout"
    assert "draft_note" in checkpoint["detail"]
    assert checkpoint["resume_state"]["state"]["graph"]["refund_ref"] == "R-88"
    assert [s["name"] for s in checkpoint["resume_state"]["committed"]] == ["issue_refund"]
    assert [step["name"] for step in checkpoint["resume_state"]["plan"]] == [
        "draft_note",
        "write_ticket_note",
        "notify_customer",
    ]

    console.decide(paused.value.checkpoint_id, "resume")
    values = graph.resume(paused.value.wait_for_decision(interval=0.01, timeout=5), "T-1044")
    assert values["refund_ref"] == "R-88"
    assert systems.calls == {"read_ticket": 1, "refund": 1, "write_note": 1, "message": 1}
    steps = console.steps(console.workflow_by_external_id("T-1044")["id"])
    assert [(s["name"], s["status"]) for s in steps] == [
        *[(name, "committed") for name in ORDER[:3]],
        ("draft_note", "failed"),
        *[(name, "committed") for name in ORDER[3:]],
    ]


def test_an_effect_whose_outcome_is_unknown_is_skipped_when_the_operator_confirms_it_happened(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    real_refund, attempts = systems.refund, []

    def refund_that_times_out(key: str, amount: str, currency: str) -> str:
        attempts.append(key)
        real_refund(key, amount, currency)  # the money moved, but the answer never came
        raise TimeoutError("the payment API did not answer")

    systems.refund = refund_that_times_out  # type: ignore[method-assign]
    graph = adapter(client, systems)
    with pytest.raises(Paused) as paused:
        graph.run("T-1045", {"ticket_id": "T-1045"})
    unknown = paused.value.checkpoint["resume_state"]["unknown_effects"]
    assert [(s["name"], s["idempotency_key"]) for s in unknown] == [("issue_refund", "T-1045:issue_refund:3")]

    console.decide(paused.value.checkpoint_id, "resume", confirmations={"T-1045:issue_refund:3": "happened"})
    values = graph.resume(paused.value.wait_for_decision(interval=0.01, timeout=5), "T-1045")
    assert values["refund_ref"] == "R-88"  # looked up by its key: @effect(confirmed=...)
    assert attempts == ["T-1045:issue_refund:3"]  # not executed again
    steps = console.steps(console.workflow_by_external_id("T-1045")["id"])
    refund = next(s for s in steps if s["name"] == "issue_refund")
    assert (refund["status"], refund["external_ref"]) == ("committed", "R-88")
    assert refund["output"]["confirmed_by_operator"] == "happened"
    assert steps[-1]["name"] == "notify_customer"


def test_a_decorated_effect_is_not_repeated_even_when_the_graphs_own_state_is_lost(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    with pytest.raises(Paused) as paused:
        adapter(client, systems, crash_draft=1).run("T-1046", {"ticket_id": "T-1046"})
    console.decide(paused.value.checkpoint_id, "resume")
    # A new process: a fresh in-memory checkpointer, so the graph starts over from its first node.
    values = adapter(client, systems).run("T-1046", {"ticket_id": "T-1046"})
    assert values["refund_ref"] == "R-88"
    assert systems.calls["refund"] == 1


def test_an_aborted_workflow_does_not_resume_the_graph(client: RecoveryClient, console: FakeConsole) -> None:
    systems = Systems(amount="420.00")
    graph = adapter(client, systems)
    with pytest.raises(Paused) as paused:
        graph.run("T-1047", {"ticket_id": "T-1047"})
    console.decide(paused.value.checkpoint_id, "abort")
    with pytest.raises(Stopped):
        graph.resume(paused.value.wait_for_decision(interval=0.01, timeout=5), "T-1047")
    assert systems.refunds == {}


def test_the_example_script_runs_to_the_end_through_a_crash(client: RecoveryClient, console: FakeConsole) -> None:
    systems, said = Systems(), []

    def operator(line: str) -> None:
        said.append(line)
        if line.startswith("paused: checkpoint "):
            console.decide(line.split()[2], "resume", instructions="Go ahead.")

    values = run(client, "T-1048", systems, crash_draft=1, poll=0.01, timeout=5, say=operator)
    assert values["refund_ref"] == "R-88"
    assert said[0].startswith("paused: checkpoint") and "(model_timeout)" in said[0]
    assert said[-1] == "completed: R-88, note 'Refunded 42.00 (R-88).'"
    assert systems.calls["refund"] == 1


def test_the_graph_runs_from_asyncio_code_too(client: RecoveryClient, console: FakeConsole) -> None:
    systems = Systems()
    graph = adapter(client, systems, crash_draft=1)

    async def agent() -> str:
        try:
            await graph.arun("T-1049", {"ticket_id": "T-1049"})
        except Paused as paused:
            console.decide(paused.checkpoint_id, "resume")
            decision = await asyncio.to_thread(paused.wait_for_decision, interval=0.01, timeout=5)
            values = await graph.aresume(decision, "T-1049")
            return str(values["refund_ref"])
        raise AssertionError("the crash did not pause the graph")

    assert asyncio.run(agent()) == "R-88"
    assert systems.calls["refund"] == 1
