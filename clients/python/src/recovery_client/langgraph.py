"""LangGraph adapter (``pip install recovery-console-client[langgraph]``).

``RecoveryGraph(client, graph, kind="refund")`` runs a compiled graph (it must
have a checkpointer: the graph keeps its own state there, keyed by
``thread_id`` = the workflow's ``external_id``) and makes the console its
pause surface:

- every node execution is reported as a step: ``pending`` when it starts,
  ``committed`` with its state update or ``failed`` with the error. Its kind
  comes from the node's metadata (``{"kind": "model"}``; default ``tool``);
- effect nodes are recognised by the ``@effect`` decorator or by the node tag
  ``metadata={"kind": "effect"}``. They report under a stable idempotency key,
  ``<external_id>:<node>:<superstep>`` (the same when the graph reruns the node
  after a failure or from scratch), that a decorated node reads with
  ``effect_key()``. A decorated node reports ``pending`` before its body runs
  and never runs again once committed, even when the graph's own state was
  lost; a tagged node is reported from the graph's event stream;
- ``interrupt(...)`` in a node, and a node that raises, open a checkpoint with
  the graph's state as the agent state (the reason comes from the interrupt's
  ``{"reason": ...}`` or ``manual``, and from the exception as in
  ``reasons.reason_for``); ``run`` then raises ``Paused``;
- the operator's decision resumes the graph with
  ``Command(resume={"action", "instructions", "confirmations"})`` (``None``
  after a node failure, which reruns the failed node). An effect whose outcome
  was unknown and that the operator confirmed as ``happened`` is recorded as
  committed and skipped with ``graph.update_state(..., as_node=...)``, with the
  state update that ``@effect(confirmed=...)`` derives (a refund's reference
  looked up by its key, say).
- ``checks={"decide_refund": check}``: a node's state update must pass ``check(update)`` to be committed
  (``verified``); a refusal is a ``tool_error`` checkpoint (``InvalidOutput``);
- a hold (``instruction.pause`` on a step report's answer) stops the run with ``Paused`` (reason ``held``)
  after the step it came with, and the reports go through the client's batching (``RecoveryClient(batching=)``);
- recovery drills happen in the graph's process: a crash after node k, silence after node k, a rate-limit
  storm (a model or tool node is refused with a 429 before it runs), garbage or a provider change in node k's
  update (its check runs on it, or the run stops as ``untrusted_output`` / ``provider_change``), and a
  failover (node k runs, the process dies before reporting it). See ``recovery_client.drills``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast, overload

from langgraph.config import get_config
from langgraph.types import Command

from .client import Json, RecoveryClient
from .drills import GarbageAnswer, ProviderChanged
from .reasons import REASONS, InvalidOutput, Reason, ReasonMap
from .workflow import Decision, Paused, StepKind, Stopped, Workflow, jsonable

__all__ = ["RecoveryGraph", "effect", "effect_key", "resume_value"]

F = TypeVar("F", bound=Callable[..., Any])
KINDS: frozenset[str] = frozenset({"model", "tool", "effect", "message"})
_run: contextvars.ContextVar[_GraphRun | None] = contextvars.ContextVar("recovery_graph_run", default=None)
_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("recovery_effect_key", default=None)


Confirmed = Callable[[Any, str], Any]


@overload
def effect(node: F, /) -> F: ...
@overload
def effect(*, confirmed: Confirmed | None = None) -> Callable[[F], F]: ...
def effect(node: F | None = None, /, *, confirmed: Confirmed | None = None) -> F | Callable[[F], F]:
    """Mark a node function as an effect: reported and keyed before it runs, never run twice.

    ``confirmed(state, key)`` returns the node's state update when an operator confirmed that
    an execution whose outcome was unknown did happen (the graph then skips the node).
    """

    def mark(node: F) -> F:
        name = getattr(node, "__name__", "effect")

        @functools.wraps(node)
        def wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
            run = _run.get()
            if run is None:  # not under a RecoveryGraph: just the node
                return node(state, *args, **kwargs)
            return run.effect_call(run.node_names.get(name, name), node, state, args, kwargs)

        wrapper.__recovery_effect__ = True  # type: ignore[attr-defined]
        wrapper.__recovery_confirmed__ = confirmed  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return mark(node) if node is not None else mark


def effect_key() -> str:
    """The idempotency key of the effect node running now (pass it to the external system)."""
    key = _key.get()
    if key is None:
        raise RuntimeError("effect_key() is only known inside an effect node run by RecoveryGraph")
    return key


def resume_value(decision: Decision | None) -> Json | None:
    """What ``interrupt()`` returns when an operator's decision resumes the graph."""
    if decision is None:
        return None
    return {
        "action": decision.action,
        "instructions": decision.instructions,
        "confirmations": dict(decision.confirmations),
    }


class RecoveryGraph:
    """Run a compiled LangGraph graph as console workflows of one ``kind``."""

    def __init__(
        self,
        client: RecoveryClient,
        graph: Any,
        *,
        kind: str,
        reasons: ReasonMap | None = None,
        title: Callable[[str], str] | None = None,
        owner: str | None = None,
        plan: Callable[[Json], list[Json] | None] | None = None,
        checks: Mapping[str, Callable[[Any], object]] | None = None,
    ) -> None:
        """``plan(agent_state)``: what a resume will do, sent with each checkpoint (the state has the
        graph's ``graph`` values and its ``next`` nodes); without it the console assumes money may move.
        ``checks``: per node name, a check its state update must pass (truthy, not raising)."""
        if getattr(graph, "checkpointer", None) is None:
            raise ValueError("the graph needs a checkpointer: it keeps the graph's state between pause and resume")
        self.client, self.graph, self.kind, self.reasons, self.owner = client, graph, kind, reasons, owner
        self.plan = plan
        self.checks = dict(checks or {})
        self.title = title or (lambda external_id: f"{kind} {external_id}")
        self.node_kinds: dict[str, StepKind] = {}
        self.decorated: set[str] = set()
        self.node_names: dict[str, str] = {}  # a decorated function's name -> its node's name
        self.confirmed: dict[str, Confirmed] = {}
        for name, spec in graph.builder.nodes.items():
            func = getattr(spec.runnable, "func", None)
            declared = (spec.metadata or {}).get("kind")
            if getattr(func, "__recovery_effect__", False):
                self.decorated.add(name)
                self.node_names[getattr(func, "__name__", name)] = name
                if getattr(func, "__recovery_confirmed__", None):
                    self.confirmed[name] = func.__recovery_confirmed__  # type: ignore[union-attr]
                declared = "effect"
            self.node_kinds[name] = cast(StepKind, declared if declared in KINDS else "tool")

    def config(self, external_id: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        configurable = {"thread_id": external_id, **dict((config or {}).get("configurable") or {})}
        return {**dict(config or {}), "configurable": configurable}

    def run(
        self,
        external_id: str,
        input: Any = None,
        *,
        config: Mapping[str, Any] | None = None,
        context: Json | None = None,
        decision: Decision | None = None,
    ) -> Any:
        """Start or resume the graph for ``external_id``; returns its final state values.

        Raises ``Paused`` when the graph stops at a checkpoint and ``Stopped`` when the console
        says the workflow is over (handed off, aborted, finished).
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
        ).start()
        run = _GraphRun(self, wf, self.config(external_id, config))
        return run.go(input)

    def resume(self, decision: Decision, external_id: str, *, config: Mapping[str, Any] | None = None) -> Any:
        """Resume after ``decision`` (a delivery's ``.decision``, or ``Paused.wait_for_decision()``)."""
        return self.run(external_id, None, config=config, decision=decision)

    async def arun(self, external_id: str, input: Any = None, **options: Any) -> Any:
        """``run`` from asyncio code: the graph and the reporting run in a worker thread, the loop stays free.
        (The graph's nodes are called as ``graph.stream`` calls them: synchronous nodes.)"""
        return await asyncio.to_thread(self.run, external_id, input, **options)

    async def aresume(self, decision: Decision, external_id: str, **options: Any) -> Any:
        return await asyncio.to_thread(self.resume, decision, external_id, **options)


class _GraphRun:
    """One pass of the graph for one workflow: the stream's tasks become steps."""

    def __init__(self, adapter: RecoveryGraph, wf: Workflow, config: dict[str, Any]) -> None:
        self.adapter, self.wf, self.config, self.graph = adapter, wf, config, adapter.graph
        self.node_names = adapter.node_names
        self.lock = threading.RLock()  # decorated effects report from the graph's worker threads
        self.tasks: dict[str, tuple[str, int]] = {}  # task id -> (node, seq)
        self.refused: Any = None  # an update a check or a drill refused, kept with the failed step

    # --- the pass ---------------------------------------------------------------------------
    def go(self, input: Any) -> Any:
        snapshot = self.graph.get_state(self.config)
        if snapshot.next or snapshot.values:
            input = self.resume_input(snapshot)
        token = _run.set(self)
        try:
            for event in self.graph.stream(input, self.config, stream_mode="debug"):
                self.on_task(event)
        except (Paused, Stopped):
            raise  # a hold's pause (or a silence the console caught): the workflow already waits at it
        except Exception as exc:
            failed = self.failed_task()
            if failed is not None:
                self.fail_refused(failed, exc)
            self.wf.pause_for(
                exc, at_seq=failed[1] if failed else None, step=failed[0] if failed else None, state=self.agent_state()
            )
        finally:
            _run.reset(token)
        snapshot = self.graph.get_state(self.config)
        interrupts = list(getattr(snapshot, "interrupts", ()) or ())
        if interrupts:
            raise self.pause_at_interrupt(interrupts[0].value)
        self.wf.finish("completed", self.wf.summary)
        return snapshot.values

    def resume_input(self, snapshot: Any) -> Any:
        """Settle confirmed effects, then the Command that carries the decision into the graph."""
        for step in self.wf.recorded:
            if (
                step["kind"] == "effect"
                and step["status"] == "pending"
                and self.wf.confirmation(step.get("idempotency_key")) == "happened"
            ):
                self.commit_confirmed(step, snapshot)
                snapshot = self.graph.get_state(self.config)
        if getattr(snapshot, "interrupts", None):
            return Command(resume=resume_value(self.wf.decision))
        return None  # after a node failure: the graph reruns the failed node

    def commit_confirmed(self, step: Json, snapshot: Any) -> None:
        name, key = step["name"], step["idempotency_key"]
        derive = self.adapter.confirmed.get(name)
        update = derive(snapshot.values, key) if derive else None
        self.wf.report(
            int(step["seq"]),
            name,
            "effect",
            "committed",
            input=step.get("input"),
            output={"confirmed_by_operator": "happened", "update": update},
            idempotency_key=key,
            promise=step.get("promise"),
            external_ref=_ref(update),
        )
        if name in snapshot.next:
            self.graph.update_state(self.config, update, as_node=name)

    # --- steps from the stream's task events --------------------------------------------------
    def on_task(self, debug: Mapping[str, Any]) -> None:
        event = debug.get("payload") or {}
        name = str(event.get("name"))
        if (
            debug.get("type") not in ("task", "task_result")
            or name not in self.adapter.node_kinds
            or name in self.adapter.decorated
        ):
            return
        kind = self.adapter.node_kinds[name]
        if debug["type"] == "task":  # started
            with self.lock:
                key = self.key(name, int(debug["step"])) if kind == "effect" else None
                recorded = self.reusable(name, key)
                seq = int(recorded["seq"]) if recorded else self.wf.next_seq()
                self.tasks[str(event["id"])] = (name, seq)
                if recorded is None:
                    self.wf.report(seq, name, kind, "pending", input=event.get("input"), idempotency_key=key)
            self.wf.drill_call(seq, kind, name)  # a rate-limit storm: the node is refused before it runs
            return
        name_seq = self.tasks.pop(str(event["id"]), None)
        if name_seq is None:
            return
        seq = name_seq[1]
        step = next(s for s in self.wf.recorded if int(s["seq"]) == seq)
        fields = {"input": step.get("input"), "idempotency_key": step.get("idempotency_key")}
        if event.get("interrupts") or event.get("error") is not None:
            self.tasks[str(event["id"])] = name_seq  # the checkpoint names it
        if event.get("interrupts"):
            return  # stays pending: the pending action the operator decides on
        if isinstance(event.get("error"), Paused | Stopped):
            return  # a hold's pause came with a decorated effect's report: the effect is recorded already
        if event.get("error") is not None:
            if kind != "effect":  # an effect that raised stays pending: its outcome is unknown
                error = event["error"]
                self.wf.report(
                    seq, name, kind, "failed", **fields, output={"error": type(error).__name__, "message": str(error)}
                )
            return
        try:
            result, verified = self.checked(name, kind, seq, event.get("result"))
        except Exception:
            self.tasks[str(event["id"])] = name_seq  # the checkpoint names it, and the step is reported failed
            raise
        self.wf.die_if_failing_over(seq)  # a failover drill: the process dies before reporting the node
        self.wf.report(
            seq, name, kind, "committed", **fields, output=result, external_ref=_ref(result), verified=verified
        )
        self.wf.crash_if_drilled(seq)

    def checked(self, name: str, kind: str, seq: int, result: Any) -> tuple[Any, bool]:
        """The node's update as the drill made it, through the node's check if it has one. Raises (the
        stream stops, the step fails, the workflow pauses) when the check refuses it, or when a drill's
        answer reaches a node without a check."""
        result, stops = self.wf.drill_answer(seq, kind, result)
        check = self.adapter.checks.get(name)
        if check is None:
            if stops is not None:
                what = (
                    "garbage answer"
                    if stops is GarbageAnswer
                    else "provider change (the model answered differently from the recorded one)"
                )
                self.refused = result
                raise stops(f"{name}: a drill's {what} at step {seq}, and the node does not check its update")
            return result, False
        refusal = ProviderChanged if stops is ProviderChanged else InvalidOutput
        try:
            accepted = check(result)
        except Exception as exc:
            self.refused = result
            raise refusal(f"{name}: the update failed its check: {exc}") from exc
        if not accepted:
            self.refused = result
            raise refusal(f"{name}: the update failed its check")
        return result, True

    def fail_refused(self, failed: tuple[str, int], exc: Exception) -> None:
        """A node stopped from the stream (a storm's refusal, a refused update) is reported failed, as a node
        that raised is; an effect stays pending (its outcome is unknown)."""
        name, seq = failed
        step = next((s for s in self.wf.recorded if int(s["seq"]) == seq), None)
        if step is None or step["status"] != "pending" or step["kind"] == "effect":
            return
        output = {"error": type(exc).__name__, "message": str(exc)}
        if self.refused is not None:
            output["refused"] = jsonable(self.refused)
        self.wf.report(seq, name, step["kind"], "failed", input=step.get("input"), output=output)

    def key(self, name: str, superstep: int) -> str:
        return f"{self.wf.external_id}:{name}:{superstep}"

    def reusable(self, name: str, key: str | None) -> Json | None:
        """A step left pending by an interrupted or crashed execution of this node carries on."""
        for step in self.wf.recorded:
            if step["name"] == name and step["status"] == "pending" and step.get("idempotency_key") == key:
                return step
        return None

    def failed_task(self) -> tuple[str, int] | None:
        return next(iter(self.tasks.values()), None)

    # --- decorated effects (called inside the node, in the graph's worker thread) -------------
    def effect_call(
        self, name: str, node: Callable[..., Any], state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        with self.lock:
            key = self.key(name, int(get_config()["metadata"]["langgraph_step"]))
            recorded = next((s for s in self.wf.recorded if s.get("idempotency_key") == key), None)
            if recorded is not None and recorded["status"] == "committed":
                output = recorded.get("output")
                return output if isinstance(output, dict) else {}
            seq = int(recorded["seq"]) if recorded else self.wf.next_seq()
            fields = {"input": state, "idempotency_key": key}
            self.tasks[f"effect:{name}"] = (name, seq)
            if recorded is None:
                self.wf.report(seq, name, "effect", "pending", **fields)
        token = _key.set(key)
        try:
            result = node(state, *args, **kwargs)
        finally:
            _key.reset(token)
        with self.lock:
            self.wf.die_if_failing_over(seq)  # a failover drill: the effect ran, the process dies unreported
            self.wf.report(seq, name, "effect", "committed", **fields, output=result, external_ref=_ref(result))
            self.tasks.pop(f"effect:{name}", None)
        self.wf.crash_if_drilled(seq)
        return result

    # --- pausing ------------------------------------------------------------------------------
    def agent_state(self) -> Json:
        """The graph's state as the checkpoint's agent state (and the plan derived from it, if asked for)."""
        snapshot = self.graph.get_state(self.config)
        state = {
            **self.wf.state,
            "graph": jsonable(snapshot.values),
            "next": list(snapshot.next),
            "thread_id": self.config["configurable"]["thread_id"],
        }
        if self.adapter.plan is not None:
            self.wf.plan = self.adapter.plan(state)
        return state

    def pause_at_interrupt(self, value: Any) -> Paused:
        reason: Reason = "manual"
        if isinstance(value, dict) and value.get("reason") in REASONS:
            reason = cast(Reason, value["reason"])
        detail = value.get("detail") or value.get("question") if isinstance(value, dict) else None
        pending = next(iter(self.tasks.values()), None)
        return self.wf.pause(
            reason,
            str(detail or value),
            at_seq=pending[1] if pending else None,
            state={**self.agent_state(), "interrupt": jsonable(value)},
        )


def _ref(result: Any) -> str | None:
    """An effect's external reference: the first string its update keeps under ``*ref`` (``refund_ref``)."""
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(key, str) and key.endswith("ref") and isinstance(value, str):
                return value
    return None
