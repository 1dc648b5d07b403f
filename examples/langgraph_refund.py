"""The refund example as a LangGraph graph, connected to Recovery Console.

    make run                                     # terminal 1: the console on :8000
    .venv/bin/python manage.py create_agent langgraph-bot         # prints a token
    RECOVERY_TOKEN=rc_... .venv/bin/python examples/langgraph_refund.py --crash

Deterministic nodes, no language model and no network but the console's:
read_ticket -> decide_refund (asks for approval above 100 EUR with interrupt())
-> issue_refund (effect) -> draft_note (model; --crash makes it time out once)
-> write_ticket_note (effect) -> notify_customer (effect, by node tag).
Each stop becomes a checkpoint in the console's queue; decide it there (claim,
confirm, resume) and the graph carries on from where it stopped, effects not
repeated. Needs ``pip install ./clients/python[langgraph]``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recovery_client import Paused, RecoveryClient, Stopped
from recovery_client.langgraph import RecoveryGraph, effect, effect_key
from refund_systems import Systems, command_line

APPROVAL_LIMIT = 100
ORDER = ["read_ticket", "decide_refund", "issue_refund", "draft_note", "write_ticket_note", "notify_customer"]
KINDS = {
    "read_ticket": "tool",
    "decide_refund": "model",
    "issue_refund": "effect",
    "draft_note": "model",
    "write_ticket_note": "effect",
    "notify_customer": "effect",
}


class Refund(TypedDict, total=False):
    ticket_id: str
    ticket: dict[str, str]
    approval: dict[str, Any]
    decision: dict[str, Any]
    refund_ref: str
    note: str
    notified: bool


def build_graph(systems: Systems, *, crash_draft: int = 0) -> Any:
    """The refund graph; ``crash_draft`` times the model times out while drafting the note."""
    crashes = {"left": crash_draft}

    def read_ticket(state: Refund) -> Refund:
        return {"ticket": systems.read_ticket(state["ticket_id"])}

    def decide_refund(state: Refund) -> Refund:
        amount = float(state["ticket"]["amount"])
        approval = None
        if amount > APPROVAL_LIMIT:
            approval = interrupt({"reason": "manual", "question": f"Approve a refund of {amount:.2f}?"})
        return {
            "decision": {"refund": True, "amount": state["ticket"]["amount"], "promise": "refund within 5 days"},
            "approval": approval or {},
        }

    # Confirmed by an operator after a timeout: the reference is looked up by the same key.
    @effect(confirmed=lambda state, key: {"refund_ref": systems.refunds.get(key, "unknown")})
    def issue_refund(state: Refund) -> Refund:
        ticket = state["ticket"]
        return {"refund_ref": systems.refund(effect_key(), ticket["amount"], ticket["currency"])}

    def draft_note(state: Refund) -> Refund:
        if crashes["left"] > 0:
            crashes["left"] -= 1
            raise TimeoutError("the model did not answer within 30 s")
        instructions = (state.get("approval") or {}).get("instructions") or ""
        return {"note": f"Refunded {state['ticket']['amount']} ({state['refund_ref']}). {instructions}".strip()}

    @effect
    def write_ticket_note(state: Refund) -> Refund:
        systems.write_note(effect_key(), state["note"])
        return {}

    def notify_customer(state: Refund) -> Refund:
        systems.message(f"{state['ticket_id']}:notify_customer", "Your refund arrives within 5 days.")
        return {"notified": True}

    graph = StateGraph(Refund)
    graph.add_node("read_ticket", read_ticket)
    graph.add_node("decide_refund", decide_refund, metadata={"kind": "model"})
    graph.add_node("issue_refund", issue_refund)  # an effect by its decorator
    graph.add_node("draft_note", draft_note, metadata={"kind": "model"})
    graph.add_node("write_ticket_note", write_ticket_note)
    graph.add_node("notify_customer", notify_customer, metadata={"kind": "effect"})  # an effect by its tag
    graph.add_edge(START, ORDER[0])
    for before, after in zip(ORDER, ORDER[1:], strict=False):
        graph.add_edge(before, after)
    graph.add_edge(ORDER[-1], END)
    return graph.compile(checkpointer=InMemorySaver())


def plan(agent_state: dict[str, Any]) -> list[dict[str, Any]]:
    """What a resume will do: the nodes from the one that stopped on, the refund with its money at stake."""
    following = ORDER[ORDER.index(agent_state["next"][0]) :] if agent_state["next"] else []
    ticket = agent_state["graph"].get("ticket") or {}
    return [
        {
            "name": name,
            "kind": KINDS[name],
            **({"amount": ticket["amount"], "currency": ticket["currency"]} if name == "issue_refund" else {}),
        }
        for name in following
    ]


def run(
    client: RecoveryClient,
    ticket_id: str,
    systems: Systems,
    *,
    crash_draft: int = 0,
    poll: float = 2.0,
    timeout: float = 3600.0,
    say: Any = print,
) -> Any:
    """Run the graph to its end, waiting at each checkpoint for the operator's decision."""
    adapter = RecoveryGraph(
        client,
        build_graph(systems, crash_draft=crash_draft),
        kind="refund",
        title=lambda external_id: f"Refund for ticket {external_id}",
        plan=plan,
    )
    try:
        values = adapter.run(ticket_id, {"ticket_id": ticket_id})
    except Paused as paused:
        while True:
            say(f"paused: checkpoint {paused.checkpoint_id} ({paused.reason}): {paused.checkpoint.get('detail')}")
            decision = paused.wait_for_decision(interval=poll, timeout=timeout)
            say(f"decision: {decision.action} {decision.instructions!r}")
            if not decision.resumes:
                return None
            try:
                values = adapter.resume(decision, ticket_id)
                break
            except Paused as again:
                paused = again
    except Stopped as stopped:
        say(str(stopped))
        return None
    say(f"completed: {values.get('refund_ref')}, note {values.get('note')!r}")
    return values


def main() -> None:
    args, client = command_line(
        __doc__, ticket="T-LG-1042", agent="langgraph-bot", crash="the model times out once while drafting the note"
    )
    systems = Systems(amount=args.amount)
    run(client, args.ticket, systems, crash_draft=1 if args.crash else 0)
    print(f"system calls: {systems.calls}")


if __name__ == "__main__":
    main()
