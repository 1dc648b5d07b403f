"""OpenAI Agents SDK adapter (``pip install recovery-console-client[openai-agents]``).

``RecoveryRunner(client, agent, kind="refund")`` runs an agent with
``Runner.run`` and makes the console its pause surface:

- model calls and tool calls are reported as steps (run hooks), the final
  answer as a ``message`` step;
- tools decorated with ``@effect`` (under ``@function_tool``) are effects:
  reported ``pending`` before they run, under the idempotency key
  ``<external_id>:<tool>:<hash of the arguments>``, and never run again once
  committed: a resumed run gets the recorded result instead;
- a tool call that needs approval (``needs_approval=True``) becomes a
  checkpoint (reason ``manual``) whose agent state carries the SDK's
  ``RunState`` (``to_json()``); the operator's ``resume`` approves it and
  ``retry_step`` rejects it (the instructions become the rejection message the
  model reads), and the run resumes from that saved state;
- a run that fails (a model timeout, a 429, a tool's validation error...) becomes
  a checkpoint with the reason it stands for; the run's conversation is kept in
  an SDK session (``SQLiteSession``; pass ``session=`` a factory for a file or
  any other ``Session``), so the resumed run continues from where it stopped;
- a hold (``instruction.pause`` on a step report's answer) stops the run with ``Paused`` (reason ``held``)
  after the step it came with; the reports go through the client's batching (``RecoveryClient(batching=)``);
- recovery drills happen in the agent's process: a crash or silence after step k, a rate-limit storm (the
  model or tool call is refused with a 429 before it is made), garbage or a provider change in model step k's
  answer (the run stops as ``untrusted_output`` / ``provider_change``: the SDK's model answers are not checked
  here), and a failover (step k runs, the process dies before reporting it). See ``recovery_client.drills``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from agents import Agent, RunConfig, RunContextWrapper, RunHooks, Runner, RunState
from agents.memory import Session, SQLiteSession

from .client import Json, RecoveryClient
from .drills import GarbageAnswer
from .reasons import ReasonMap
from .workflow import Decision, Paused, StepKind, Stopped, Workflow, jsonable

__all__ = ["RecoveryRunner", "effect", "effect_key"]

F = TypeVar("F", bound=Callable[..., Any])
EFFECT_TOOLS: set[str] = set()  # names of the tool functions decorated with @effect
_run: contextvars.ContextVar[_AgentRun | None] = contextvars.ContextVar("recovery_agent_run", default=None)
_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("recovery_tool_effect_key", default=None)


def effect_key() -> str:
    """The idempotency key of the effect tool running now (pass it to the external system)."""
    key = _key.get()
    if key is None:
        raise RuntimeError("effect_key() is only known inside an @effect tool run by RecoveryRunner")
    return key


def effect(tool: F) -> F:
    """Mark a tool function as an effect (put it under ``@function_tool``): keyed, reported, never run twice."""
    name = tool.__name__
    EFFECT_TOOLS.add(name)

    if inspect.iscoroutinefunction(tool):

        @functools.wraps(tool)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            run = _run.get()
            if run is None:
                return await tool(*args, **kwargs)
            key, seq, recorded = await asyncio.to_thread(run.begin_effect, name, _bound(tool, args, kwargs))
            if recorded is not None:
                return recorded
            token = _key.set(key)
            try:
                result = await tool(*args, **kwargs)
            finally:
                _key.reset(token)
            await asyncio.to_thread(run.commit_effect, name, key, seq, _bound(tool, args, kwargs), result)
            return result

        return cast(F, async_wrapper)

    @functools.wraps(tool)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = _run.get()
        if run is None:
            return tool(*args, **kwargs)
        key, seq, recorded = run.begin_effect(name, _bound(tool, args, kwargs))
        if recorded is not None:
            return recorded
        token = _key.set(key)
        try:
            result = tool(*args, **kwargs)
        finally:
            _key.reset(token)
        run.commit_effect(name, key, seq, _bound(tool, args, kwargs), result)
        return result

    return cast(F, wrapper)


class RecoveryRunner:
    """Run one agent as console workflows of one ``kind``."""

    def __init__(
        self,
        client: RecoveryClient,
        agent: Agent[Any],
        *,
        kind: str,
        reasons: ReasonMap | None = None,
        title: Callable[[str], str] | None = None,
        owner: str | None = None,
        session: Callable[[str], Session] | None = None,
        run_config: RunConfig | None = None,
        max_turns: int = 10,
        approve_actions: frozenset[str] = frozenset({"resume"}),
        plan: Callable[[Json], list[Json] | None] | None = None,
    ) -> None:
        """``plan(agent_state)``: what a resume will do, sent with each checkpoint (the state names the
        ``approvals`` waiting, if any); without it the console assumes money may move."""
        self.client, self.agent, self.kind, self.reasons, self.owner = client, agent, kind, reasons, owner
        self.title = title or (lambda external_id: f"{kind} {external_id}")
        self.run_config, self.max_turns, self.approve_actions = run_config, max_turns, approve_actions
        self.plan = plan
        self._sessions: dict[str, Session] = {}
        self.session_factory = session or (lambda external_id: SQLiteSession(external_id))

    def session(self, external_id: str) -> Session:
        """The SDK session that keeps the run's conversation (one per workflow, made once)."""
        if external_id not in self._sessions:
            self._sessions[external_id] = self.session_factory(external_id)
        return self._sessions[external_id]

    async def run(
        self,
        external_id: str,
        input: str | list[Any] | None = None,
        *,
        context: Json | None = None,
        decision: Decision | None = None,
    ) -> Any:
        """Start or resume the agent's run for ``external_id``; returns its final output.

        Raises ``Paused`` at a checkpoint and ``Stopped`` when the console says the workflow is over.
        """
        wf = self.client.workflow(
            external_id,
            self.kind,
            self.title(external_id),
            owner=self.owner,
            context=context,
            reasons=self.reasons,
            finish=False,
            decision=decision,
        )
        await asyncio.to_thread(wf.start)
        return await _AgentRun(self, wf).go(input)

    async def resume(self, decision: Decision, external_id: str) -> Any:
        """Resume after ``decision`` (a delivery's ``.decision``, or ``Paused.wait_for_decision()``)."""
        return await self.run(external_id, None, decision=decision)

    def run_sync(self, external_id: str, input: str | list[Any] | None = None, **kwargs: Any) -> Any:
        return asyncio.run(self.run(external_id, input, **kwargs))


class _Hooks(RunHooks[Any]):
    """Model and tool calls as steps: pending when they start, committed when they end."""

    def __init__(self, run: _AgentRun) -> None:
        self.run = run

    async def on_llm_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], system_prompt: str | None, input_items: list[Any]
    ) -> None:
        await asyncio.to_thread(
            self.run.start_step, ("model", agent.name), "model", f"{agent.name}: model", {"items": len(input_items)}
        )

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: Any) -> None:
        output = [jsonable(item.model_dump() if hasattr(item, "model_dump") else item) for item in response.output]
        await asyncio.to_thread(self.run.end_step, ("model", agent.name), output)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Any) -> None:
        if tool.name in EFFECT_TOOLS:
            return  # an effect reports itself, before it runs
        call = getattr(context, "tool_call", None)
        await asyncio.to_thread(
            self.run.start_step,
            ("tool", getattr(call, "call_id", tool.name)),
            "tool",
            tool.name,
            _arguments(getattr(call, "arguments", None)),
        )

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Any, tool: Any, result: object) -> None:
        if tool.name in EFFECT_TOOLS:
            return
        call = getattr(context, "tool_call", None)
        await asyncio.to_thread(self.run.end_step, ("tool", getattr(call, "call_id", tool.name)), result)


class _AgentRun:
    def __init__(self, runner: RecoveryRunner, wf: Workflow) -> None:
        self.runner, self.wf = runner, wf
        self.lock = threading.RLock()
        self.open: dict[tuple[str, str], tuple[int, str, StepKind, Any]] = {}  # what started and did not end

    async def go(self, input: str | list[Any] | None) -> Any:
        runner, session = self.runner, self.runner.session(self.wf.external_id)
        start: Any = input
        if self.wf.recorded:  # a resumed run: the saved state, or the session's conversation
            start = await self.resume_state(session) or []
        token = _run.set(self)
        try:
            result = await Runner.run(
                runner.agent,
                start,
                session=session,
                hooks=_Hooks(self),
                run_config=runner.run_config,
                max_turns=runner.max_turns,
            )
        except (Paused, Stopped):
            raise  # a hold's pause (or a silence the console caught): the workflow already waits at it
        except Exception as exc:
            failed = next(iter(self.open.values()), None)
            await asyncio.to_thread(self.fail_open_steps, exc)
            await asyncio.to_thread(
                self.wf.pause_for,
                exc,
                at_seq=failed[0] if failed else None,
                step=failed[1] if failed else None,
                state=self.agent_state(),
            )
            raise AssertionError("pause_for raises") from exc  # pragma: no cover
        finally:
            _run.reset(token)
        if result.interruptions:
            raise await asyncio.to_thread(self.pause_for_approval, result)
        await asyncio.to_thread(self.finish, result.final_output)
        return result.final_output

    async def resume_state(self, session: Session) -> RunState[Any, Agent[Any]] | None:
        """The saved RunState with the operator's approvals or rejections applied, if the run waited on one."""
        decision = self.wf.decision
        resume_state = decision.resume_state if decision else {}
        if decision and not resume_state:  # a decision read without its checkpoint: fetch the saved state
            resume_state = (await asyncio.to_thread(self.wf.client.get_checkpoint, decision.checkpoint_id)).get(
                "resume_state"
            ) or {}
        saved = resume_state.get("state") or {}
        if not decision or not isinstance(saved.get("run_state"), dict):
            return None
        state = await RunState.from_json(self.runner.agent, saved["run_state"])
        approve = decision.action in self.runner.approve_actions
        seqs = {a["call_id"]: a["seq"] for a in saved.get("approvals") or []}
        for item in state.get_interruptions():
            if approve:
                state.approve(item)
            else:
                state.reject(item, rejection_message=decision.instructions or "The operator rejected this call.")
            seq = seqs.get(item.call_id)
            if seq is not None:
                await asyncio.to_thread(
                    self.wf.report,
                    int(seq),
                    f"approve {item.name}",
                    "tool",
                    "committed",
                    input=_arguments(item.arguments),
                    output={"approved": approve, "instructions": decision.instructions},
                    verified=True,
                )
        return state

    # --- steps --------------------------------------------------------------------------------
    def start_step(self, handle: tuple[str, str], kind: StepKind, name: str, input: Any) -> None:
        with self.lock:
            seq = self.wf.next_seq()
            self.open[handle] = (seq, name, kind, input)
            self.wf.report(seq, name, kind, "pending", input=input)
        self.wf.drill_call(seq, kind, name)  # a rate-limit storm: the provider refuses the call before it is made

    def end_step(self, handle: tuple[str, str], output: Any) -> None:
        with self.lock:
            seq, name, kind, input = self.open[handle]
            output, stops = self.wf.drill_answer(seq, kind, output)
            if stops is not None:  # the step stays open: the failure reports it failed, the run pauses
                what = (
                    "garbage answer"
                    if stops is GarbageAnswer
                    else "provider change (the model answered differently from the recorded one)"
                )
                raise stops(f"{name}: a drill's {what} at step {seq}; the adapter does not check model answers")
            self.wf.die_if_failing_over(seq)  # a failover drill: the process dies before reporting the step
            del self.open[handle]
            self.wf.report(seq, name, kind, "committed", input=input, output=output)
        self.wf.crash_if_drilled(seq)  # a drill's crash or silence after this step

    def fail_open_steps(self, exc: Exception) -> None:
        with self.lock:
            for seq, name, kind, input in self.open.values():
                if kind != "effect":  # an effect that raised stays pending: its outcome is unknown
                    self.wf.report(
                        seq,
                        name,
                        kind,
                        "failed",
                        input=input,
                        output={"error": type(exc).__name__, "message": str(exc)},
                    )

    def begin_effect(self, name: str, arguments: Json) -> tuple[str, int, Any]:
        """Key the effect; its recorded result when an earlier run committed it, else report it pending."""
        digest = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()[:12]
        key = f"{self.wf.external_id}:{name}:{digest}"
        with self.lock:
            recorded = next((s for s in self.wf.recorded if s.get("idempotency_key") == key), None)
            if recorded is not None and recorded["status"] == "committed":
                return key, int(recorded["seq"]), recorded.get("output")
            seq = int(recorded["seq"]) if recorded else self.wf.next_seq()
            self.open[("effect", key)] = (seq, name, "effect", arguments)
            if recorded is None:
                self.wf.report(seq, name, "effect", "pending", input=arguments, idempotency_key=key)
        return key, seq, None

    def commit_effect(self, name: str, key: str, seq: int, arguments: Json, result: Any) -> None:
        with self.lock:
            self.wf.die_if_failing_over(seq)  # a failover drill: the effect ran, the process dies unreported
            self.open.pop(("effect", key), None)
            self.wf.report(
                seq,
                name,
                "effect",
                "committed",
                input=arguments,
                output=result,
                idempotency_key=key,
                external_ref=result if isinstance(result, str) else None,
            )
        self.wf.crash_if_drilled(seq)

    # --- pausing and finishing ------------------------------------------------------------------
    def agent_state(self, **more: Any) -> Json:
        state = {**self.wf.state, "agent": self.runner.agent.name, "session_id": self.wf.external_id, **more}
        if self.runner.plan is not None:
            self.wf.plan = self.runner.plan(state)
        return state

    def pause_for_approval(self, result: Any) -> Paused:
        approvals = []
        for item in result.interruptions:
            with self.lock:
                seq = self.wf.next_seq()
                self.wf.report(seq, f"approve {item.name}", "tool", "pending", input=_arguments(item.arguments))
            approvals.append(
                {"call_id": item.call_id, "tool": item.name, "arguments": _arguments(item.arguments), "seq": seq}
            )
        asks = "; ".join(f"{a['tool']}({json.dumps(a['arguments'])})" for a in approvals)
        state = self.agent_state(approvals=approvals, run_state=result.to_state().to_json())
        return self.wf.pause("manual", f"Approve {asks}?", at_seq=approvals[0]["seq"], state=state)

    def finish(self, final_output: Any) -> None:
        with self.lock:
            self.wf.report(self.wf.next_seq(), "final answer", "message", "committed", output=final_output)
        self.wf.finish("completed", str(final_output)[:2000])


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return jsonable(raw)


def _bound(tool: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Json:
    """A tool call's arguments by parameter name, JSON-ready (the SDK's context argument left out)."""
    bound = inspect.signature(tool).bind_partial(*args, **kwargs).arguments
    return cast(Json, jsonable({k: v for k, v in bound.items() if not isinstance(v, RunContextWrapper)}))
