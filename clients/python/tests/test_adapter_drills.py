"""Both adapters carry out drill faults told on a step report's answer (the in-memory console tells them;
the console's suite runs the same against the live API): a LangGraph node's check meets a drill's answer,
and the SDK's model call is refused by a rate-limit storm before it is made."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import need
from fakeconsole import FakeConsole
from recovery_client import GARBAGE, Paused, RecoveryClient


def graph_run(client: RecoveryClient, check: Any) -> None:
    need("langgraph")
    from langgraph_refund import build_graph, plan
    from recovery_client.langgraph import RecoveryGraph
    from refund_systems import Systems

    adapter = RecoveryGraph(client, build_graph(Systems()), kind="refund", plan=plan, checks={"decide_refund": check})
    adapter.run("T-G", {"ticket_id": "T-G"})


def refund_below_100(update: Any) -> bool:
    return isinstance(update, dict) and float(update["decision"]["amount"]) < 100


@pytest.mark.parametrize(
    ("fault", "reason", "seen"),
    [("provider_change", "provider_change", "4200"), ("garbage_at_step", "tool_error", GARBAGE)],
)
def test_a_langgraph_nodes_check_meets_the_drills_answer(
    client: RecoveryClient, console: FakeConsole, fault: str, reason: str, seen: str
) -> None:
    console.drill = {"id": "1", "fault": fault, "at_seq": 2}
    checked: list[Any] = []

    def check(update: Any) -> bool:
        checked.append(update)
        return refund_below_100(update)

    with pytest.raises(Paused) as paused:
        graph_run(client, check)
    assert paused.value.reason == reason
    assert seen in str(checked[0])
    steps = console.steps(console.workflow_by_external_id("T-G")["id"])
    assert [(s["seq"], s["status"]) for s in steps] == [(1, "committed"), (2, "failed")]
    assert paused.value.checkpoint["at_seq"] == 2


def test_a_checked_langgraph_node_is_committed_verified(client: RecoveryClient, console: FakeConsole) -> None:
    graph_run(client, refund_below_100)
    steps = console.steps(console.workflow_by_external_id("T-G")["id"])
    assert [(s["name"], s["verified"]) for s in steps][:2] == [("read_ticket", False), ("decide_refund", True)]


def test_a_rate_limit_storm_refuses_the_sdks_model_call(client: RecoveryClient, console: FakeConsole) -> None:
    need("agents")
    from openai_agents_refund import runner_for
    from refund_systems import Systems

    console.drill = {"id": "1", "fault": "rate_limit_storm", "at_seq": 1}
    systems = Systems()
    with pytest.raises(Paused) as paused:
        runner_for(client, systems, "T-O").run_sync("T-O", "Please refund T-O.")
    assert paused.value.reason == "rate_limit"
    steps = console.steps(console.workflow_by_external_id("T-O")["id"])
    assert [(s["kind"], s["status"]) for s in steps] == [("model", "failed")]
    assert steps[0]["output"]["error"] == "DrillRateLimitError"
    assert systems.calls == {}
