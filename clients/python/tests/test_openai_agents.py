"""The OpenAI Agents SDK adapter with a scripted model the SDK runs like any other (no network)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import need

need("agents")

from fakeconsole import FakeConsole  # noqa: E402
from openai_agents_refund import run, runner_for  # noqa: E402
from recovery_client import Paused, RecoveryClient, Stopped  # noqa: E402
from refund_systems import Systems  # noqa: E402


def steps(console: FakeConsole, external_id: str) -> list[tuple[str, str, str]]:
    return [
        (s["name"], s["kind"], s["status"]) for s in console.steps(console.workflow_by_external_id(external_id)["id"])
    ]


def test_a_clean_run_reports_model_calls_tools_effects_and_the_answer(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    output = runner_for(client, systems, "T-2001").run_sync("T-2001", "Please refund T-2001.")
    assert output == "Refunded 42.00 EUR (R-88); the customer is told."
    assert steps(console, "T-2001") == [
        ("support-agent: model", "model", "committed"),
        ("read_ticket", "tool", "committed"),
        ("support-agent: model", "model", "committed"),
        ("issue_refund", "effect", "committed"),
        ("support-agent: model", "model", "committed"),
        ("write_ticket_note", "effect", "committed"),
        ("support-agent: model", "model", "committed"),
        ("notify_customer", "effect", "committed"),
        ("support-agent: model", "model", "committed"),
        ("final answer", "message", "committed"),
    ]
    workflow = console.workflow_by_external_id("T-2001")
    refund = next(s for s in console.steps(workflow["id"]) if s["name"] == "issue_refund")
    assert refund["idempotency_key"].startswith("T-2001:issue_refund:")
    assert (refund["external_ref"], refund["input"]) == ("R-88", {"ticket_id": "T-2001", "amount": "42.00"})
    assert systems.refunds == {refund["idempotency_key"]: "R-88"}  # the tool passed the key on: effect_key()
    assert (workflow["status"], workflow["summary"]) == ("completed", output)


def test_a_tool_call_needing_approval_is_a_checkpoint_and_resume_approves_it(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems(amount="420.00")
    runner = runner_for(client, systems, "T-2002")
    with pytest.raises(Paused) as paused:
        runner.run_sync("T-2002", "Please refund T-2002.")
    checkpoint = paused.value.checkpoint
    assert checkpoint["reason"] == "manual"
    assert checkpoint["detail"] == 'Approve issue_refund({"ticket_id": "T-2002", "amount": "420.00"})?'
    state = checkpoint["resume_state"]
    assert state["pending"]["name"] == "approve issue_refund"
    assert state["state"]["run_state"]["current_turn"] >= 1  # the SDK's own RunState, as JSON
    assert state["plan"][0] == {"name": "issue_refund", "kind": "effect", "amount": "420.00", "currency": "EUR"}
    assert systems.refunds == {}

    console.decide(paused.value.checkpoint_id, "resume", instructions="Approved.")
    decision = paused.value.wait_for_decision(interval=0.01, timeout=5)
    assert runner.run_sync("T-2002", decision=decision) == "Refunded 420.00 EUR (R-88); the customer is told."
    assert systems.calls["refund"] == 1 and systems.calls["read_ticket"] == 1
    assert ("approve issue_refund", "tool", "committed") in steps(console, "T-2002")


def test_retry_step_rejects_the_call_and_the_model_reads_the_instructions(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems(amount="420.00")
    runner = runner_for(client, systems, "T-2003")
    with pytest.raises(Paused) as paused:
        runner.run_sync("T-2003", "Please refund T-2003.")
    console.decide(paused.value.checkpoint_id, "retry_step", instructions="Refund 42.00 at most.")
    decision = paused.value.wait_for_decision(interval=0.01, timeout=5)
    output = runner.run_sync("T-2003", decision=decision)
    assert systems.refunds == {}  # rejected: the refund never ran
    assert "Refund 42.00 at most." in output  # the rejection message reached the model as the tool's output
    approval = next(
        s for s in console.steps(console.workflow_by_external_id("T-2003")["id"]) if s["name"] == "approve issue_refund"
    )
    assert approval["output"] == {"approved": False, "instructions": "Refund 42.00 at most."}


def test_a_failed_run_is_a_checkpoint_and_resumes_from_its_session_without_repeating_effects(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    runner = runner_for(client, systems, "T-2004", crash_after_refund=1)
    with pytest.raises(Paused) as paused:
        runner.run_sync("T-2004", "Please refund T-2004.")
    checkpoint = paused.value.checkpoint
    assert checkpoint["reason"] == "model_timeout"
    assert checkpoint["resume_state"]["state"]["session_id"] == "T-2004"
    assert [s["name"] for s in checkpoint["resume_state"]["committed"] if s["kind"] == "effect"] == ["issue_refund"]
    assert steps(console, "T-2004")[-1] == ("support-agent: model", "model", "failed")

    console.decide(paused.value.checkpoint_id, "resume")
    output = runner.run_sync("T-2004", decision=paused.value.wait_for_decision(interval=0.01, timeout=5))
    assert output == "Refunded 42.00 EUR (R-88); the customer is told."
    assert systems.calls == {"read_ticket": 1, "refund": 1, "write_note": 1, "message": 1}


def test_an_effect_tool_is_not_repeated_when_the_conversation_is_lost(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems = Systems()
    with pytest.raises(Paused) as paused:
        runner_for(client, systems, "T-2005", crash_after_refund=1).run_sync("T-2005", "Please refund T-2005.")
    console.decide(paused.value.checkpoint_id, "resume")
    # A new process with a new in-memory session: the model starts over and asks for the refund again.
    fresh = runner_for(client, systems, "T-2005")
    output = fresh.run_sync("T-2005", "Please refund T-2005.")
    assert output == "Refunded 42.00 EUR (R-88); the customer is told."
    assert systems.calls["refund"] == 1  # the recorded result was returned instead


def test_an_aborted_workflow_is_not_resumed(client: RecoveryClient, console: FakeConsole) -> None:
    systems = Systems(amount="420.00")
    runner = runner_for(client, systems, "T-2006")
    with pytest.raises(Paused) as paused:
        runner.run_sync("T-2006", "Please refund T-2006.")
    console.decide(paused.value.checkpoint_id, "abort")
    with pytest.raises(Stopped):
        runner.run_sync("T-2006", decision=paused.value.wait_for_decision(interval=0.01, timeout=5))
    assert systems.refunds == {}


def test_the_example_script_runs_to_the_end_through_an_approval_and_a_crash(
    client: RecoveryClient, console: FakeConsole
) -> None:
    systems, said = Systems(amount="420.00"), []

    def operator(line: str) -> None:
        said.append(line)
        if line.startswith("paused: checkpoint "):
            console.decide(line.split()[2], "resume")

    output = asyncio.run(run(client, "T-2007", systems, crash_after_refund=1, poll=0.01, timeout=5, say=operator))
    assert output == "Refunded 420.00 EUR (R-88); the customer is told."
    assert [line.split(":")[0] for line in said] == ["paused", "decision", "paused", "decision", "completed"]
    assert "(manual)" in said[0] and "(model_timeout)" in said[2]
    assert systems.calls["refund"] == 1
