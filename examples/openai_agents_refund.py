"""The refund example as an OpenAI Agents SDK agent, connected to Recovery Console.

    make run                                     # terminal 1: the console on :8000
    .venv/bin/python manage.py create_agent agents-bot            # prints a token
    RECOVERY_TOKEN=rc_... .venv/bin/python examples/openai_agents_refund.py --amount 420.00 --crash

No language model and no network but the console's: ``ScriptedModel`` is a
``Model`` the SDK runs like any other, answering from the conversation so far
(read the ticket, refund, note, notify, then the final answer). Refunds above
100 EUR need approval (``needs_approval``); ``--crash`` makes the model time out
once after the refund. Each stop becomes a checkpoint in the console; decide it
there and the run resumes from its saved state, the refund issued once.
Needs ``pip install ./clients/python[openai-agents]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from agents import Agent, ModelResponse, RunConfig, RunContextWrapper, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recovery_client import Paused, RecoveryClient, Stopped
from recovery_client.openai_agents import RecoveryRunner, effect, effect_key
from refund_systems import Systems, command_line

APPROVAL_LIMIT = 100


class ScriptedModel(Model):
    """A deterministic stand-in for a language model: the next tool call follows from what is done."""

    def __init__(self, ticket_id: str, *, crash_after_refund: int = 0) -> None:
        self.ticket_id, self.crashes = ticket_id, crash_after_refund

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        outputs = {i["call_id"]: i.get("output") for i in items if _type(i) == "function_call_output"}
        done = {
            i["name"]: outputs[i["call_id"]] for i in items if _type(i) == "function_call" and i["call_id"] in outputs
        }
        ticket = json.loads(done["read_ticket"]) if "read_ticket" in done else None
        plan = [
            ("read_ticket", {"ticket_id": self.ticket_id}),
            ("issue_refund", {"ticket_id": self.ticket_id, "amount": ticket and ticket["amount"]}),
            ("write_ticket_note", {"ticket_id": self.ticket_id, "text": f"Refunded ({done.get('issue_refund')})."}),
            ("notify_customer", {"ticket_id": self.ticket_id, "text": "Your refund arrives within 5 days."}),
        ]
        for name, arguments in plan:
            if name == "write_ticket_note" and self.crashes > 0:
                self.crashes -= 1
                raise TimeoutError("the model did not answer within 30 s")
            if name not in done:
                call = ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"call_{name}",
                    name=name,
                    arguments=json.dumps(arguments),
                    id=f"fc_{name}",
                    status="completed",
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = f"Refunded {ticket['amount'] if ticket else '?'} EUR ({done['issue_refund']}); the customer is told."
        message = ResponseOutputMessage(
            type="message",
            id="msg_final",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the example runs without streaming")


def _type(item: Any) -> str | None:
    return item.get("type") if isinstance(item, dict) else None


def build_agent(systems: Systems, ticket_id: str, *, crash_after_refund: int = 0) -> Agent[Any]:
    @function_tool
    def read_ticket(ticket_id: str) -> str:
        """Read a support ticket."""
        return json.dumps(systems.read_ticket(ticket_id))

    async def above_limit(context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        return float(arguments.get("amount") or 0) > APPROVAL_LIMIT

    @function_tool(needs_approval=above_limit)
    @effect
    def issue_refund(ticket_id: str, amount: str) -> str:
        """Refund the customer."""
        return systems.refund(effect_key(), amount, "EUR")

    @function_tool
    @effect
    def write_ticket_note(ticket_id: str, text: str) -> str:
        """Write a note on the ticket."""
        systems.write_note(effect_key(), text)
        return "noted"

    @function_tool
    @effect
    def notify_customer(ticket_id: str, text: str) -> str:
        """Message the customer."""
        systems.message(effect_key(), text)
        return "sent"

    model = ScriptedModel(ticket_id, crash_after_refund=crash_after_refund)
    return Agent(
        name="support-agent",
        instructions="Handle refund tickets.",
        model=model,
        tools=[read_ticket, issue_refund, write_ticket_note, notify_customer],
    )


def plan(agent_state: dict[str, Any]) -> list[dict[str, Any]] | None:
    """What a resume will do after an approval: the approved calls (money for the refund), then the rest."""
    if not agent_state.get("approvals"):
        return None  # a crash: the model decides what is left, so say nothing rather than too little
    calls = [
        {"name": a["tool"], "kind": "effect", "amount": a["arguments"]["amount"], "currency": "EUR"}
        if a["tool"] == "issue_refund"
        else {"name": a["tool"], "kind": "tool"}
        for a in agent_state["approvals"]
    ]
    return calls + [{"name": "write_ticket_note", "kind": "effect"}, {"name": "notify_customer", "kind": "effect"}]


def runner_for(
    client: RecoveryClient, systems: Systems, ticket_id: str, *, crash_after_refund: int = 0
) -> RecoveryRunner:
    return RecoveryRunner(
        client,
        build_agent(systems, ticket_id, crash_after_refund=crash_after_refund),
        kind="refund",
        title=lambda external_id: f"Refund for ticket {external_id}",
        run_config=RunConfig(tracing_disabled=True),
        plan=plan,
    )


async def run(
    client: RecoveryClient,
    ticket_id: str,
    systems: Systems,
    *,
    crash_after_refund: int = 0,
    poll: float = 2.0,
    timeout: float = 3600.0,
    say: Any = print,
) -> Any:
    """Run the agent to its end, waiting at each checkpoint for the operator's decision."""
    runner = runner_for(client, systems, ticket_id, crash_after_refund=crash_after_refund)
    try:
        output = await runner.run(ticket_id, f"Please refund ticket {ticket_id}.")
    except Stopped as stopped:
        say(str(stopped))
        return None
    except Paused as first:
        paused = first
        while True:
            say(f"paused: checkpoint {paused.checkpoint_id} ({paused.reason}): {paused.checkpoint.get('detail')}")
            decision = await asyncio.to_thread(paused.wait_for_decision, interval=poll, timeout=timeout)
            say(f"decision: {decision.action} {decision.instructions!r}")
            if decision.action in ("abort", "handoff"):
                return None
            try:
                output = await runner.resume(decision, ticket_id)
                break
            except Paused as again:
                paused = again
    say(f"completed: {output}")
    return output


def main() -> None:
    args, client = command_line(
        __doc__, ticket="T-OA-1042", agent="agents-bot", crash="the model times out once after the refund"
    )
    systems = Systems(amount=args.amount)
    asyncio.run(run(client, args.ticket, systems, crash_after_refund=1 if args.crash else 0))
    print(f"system calls: {systems.calls}")


if __name__ == "__main__":
    main()
