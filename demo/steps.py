"""How the demo agent carries out each kind of step and reports it: a tool call, a model call, an effect
(reported ``pending`` before it is attempted, ``committed`` after), and a replay of recorded steps. The
report's answer may carry a drill's fault or a hold, which the run acts on.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from typing import TYPE_CHECKING, cast

from recovery_client import ApiError
from recovery_client.drills import DrillCrash, DrillFault

from .agent_base import DRILL_CRASHES, REFERENCE, RUNTIME_VERSION, AgentBase, log
from .plans import MONEY_STEPS, SYSTEM_FAULTS, TICKET_FIELDS, Paused, ProcessKilled, Run, StepSpec
from .systems import Fault, RateLimited, ServiceError, SystemFailure

if TYPE_CHECKING:
    from workflows.shapes import JsonObject

    from .shapes import ModelAnswer, Ticket, WorkflowAnswer


class StepKinds(AgentBase):
    """The steps of a run, one method per kind, and the report each makes to the console."""

    def report(
        self,
        run: Run,
        seq: int,
        spec: StepSpec,
        status: str,
        *,
        input: object = None,  # any JSON value (a TypedDict's too): handed to the client as it is
        output: object = None,
        verified: bool = False,
        promise: str | None = None,
        idempotency_key: str | None = None,
        external_ref: str | None = None,
    ) -> None:
        answer = self.client.report_step(
            run.workflow_id,
            seq,
            spec.name,
            spec.kind,
            status,
            input=input,
            output=output,
            verified=verified,
            promise=promise,
            idempotency_key=idempotency_key,
            external_ref=external_ref,
        )
        self.journal.acknowledge(run.workflow_id, seq, status)  # answered 2xx: the console must keep it
        instruction = answer.get("instruction") if isinstance(answer, dict) else None
        pause = instruction.get("pause") if isinstance(instruction, dict) else None
        if isinstance(pause, dict) and pause.get("checkpoint_id"):
            run.held = str(pause["checkpoint_id"])  # acted on once this step is done (``proceed``)
        if promise and status != "failed":
            self.promised.setdefault(run.workflow_id, []).append(promise)
        told = DrillFault.from_instruction(answer.get("instruction") if isinstance(answer, dict) else None)
        if told is not None and (run.workflow_id, told.drill_id) not in self.drills_done:
            self.drills[run.workflow_id] = told
        drill = self.drills.get(run.workflow_id)
        if drill and status == "committed" and drill.fault in DRILL_CRASHES and seq == drill.at_seq:
            self.drills.pop(run.workflow_id)  # carried out once: a resumed run goes on
            committed = sorted(run.committed | ({idempotency_key} if idempotency_key else set()))
            try:  # what this runtime holds at the fault, for the report's "state intact"
                self.client.record_drill_journal(
                    run.workflow_id, committed=committed, pending=None, promises=self.promised.get(run.workflow_id, [])
                )
            except ApiError as exc:
                log.warning("%s %s: the drill journal was refused: %s", self.name, run.external_id, exc)
            raise DrillCrash(f"{drill.fault} after step {seq} ({spec.name})")

    def tool_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        seq = run.take_seq()
        request = {"ticket": run.ticket_id}
        try:
            answer = self.ledgers.tickets.read(run.ticket_id, fault=SYSTEM_FAULTS.get(fault or ""))
        except SystemFailure as exc:
            self.report(run, seq, spec, "failed", input=request, output={"error": str(exc)})
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name} failed: {exc}", seq) from exc
        if not (isinstance(answer, dict) and all(isinstance(answer.get(f), str) for f in TICKET_FIELDS)):
            # Never act on an answer that does not parse: record it (escaped by the console) and pause.
            # Kept as text for the operator; NUL is the one character JSON text stores cannot hold.
            raw = str(answer)[:500].replace("\x00", "\\x00")
            self.report(run, seq, spec, "failed", input=request, output={"raw": raw})
            raise Paused("untrusted_output", f"{spec.name} answered something that is not a ticket.", seq)
        self.report(run, seq, spec, "committed", input=request, output=answer, verified=True)
        run.ticket = answer

    def model_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        seq = run.take_seq()
        ticket = run.ticket
        subject = ticket["subject"] if ticket else "?"
        prompt = {"model": "support-model-v3", "prompt": f"{subject} ({run.ticket_id}): what now?"}
        if self.provider.out_for(self.name):
            # The provider is down (the ledgers page's switch): every model call fails the same way, with a
            # request id of its own, so the console's fingerprint groups them into one incident.
            request_id = uuid.UUID(hashlib.sha256(f"{run.workflow_id}:{seq}".encode()).hexdigest()[:32])
            error = f"model provider unavailable: 503 Service Unavailable (request {request_id})"
            self.report(run, seq, spec, "failed", input=prompt, output={"error": error})
            raise Paused("model_timeout", f"{spec.name}: {error}.", seq)
        if fault in ("model_timeout", "rate_limit"):
            error = "model call timed out after 30 s" if fault == "model_timeout" else "model provider answered 429"
            self.report(run, seq, spec, "failed", input=prompt, output={"error": error})
            raise Paused(fault, f"{spec.name}: {error}.", seq)
        output = self.model_answer(spec.name, ticket, run.ticket_id)
        self.report(run, seq, spec, "committed", input=prompt, output=output, promise=spec.promise)
        run.decision = output

    def model_answer(self, step_name: str, ticket: Ticket | None, ticket_id: str) -> ModelAnswer:
        """What the model answers for a ticket: deterministic, so a replay of a healthy run matches its recording.

        With ``provider.changed`` on, the provider "changed behaviour": it answers amounts in cents.
        """
        amount, currency = (ticket["amount"], ticket["currency"]) if ticket else ("0.00", "EUR")
        if self.provider.changed:
            amount = f"{float(amount) * 100:.2f}"
        if step_name == "decide_refund":
            return {
                "decision": "refund",
                "amount": amount,
                "currency": currency,
                "rationale": "eligible under the 30-day refund policy",
            }
        if step_name == "assess_dispute":
            return {
                "decision": "credit",
                "amount": f"{float(amount) / 2:.2f}",
                "currency": currency,
                "rationale": "half of the invoice was billed in error",
            }
        return {"category": random.Random(ticket_id).choice(("delivery", "billing", "product")), "priority": "normal"}

    # --- replay (docs/API.md, "Replaying a step range") ------------------------------------
    def replay(self, request: JsonObject) -> dict[str, object]:
        """Re-execute the steps with their recorded inputs. Effects answer their recorded output and are never
        executed: this method holds no way to call payments, tickets' notes or messaging."""
        ticket_id = str(request.get("external_id") or "")
        ticket: Ticket | str | None = None
        results: list[dict[str, object]] = []
        steps = request.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, dict):
                continue
            name, kind, data = str(step.get("name")), step.get("kind"), step.get("input")
            output: object
            if kind == "effect":
                output = step.get("recorded_output")
                if self.replay_misbehaviour == "fabricate_effect":
                    output = {"ref": "R-0BADBEEF"}  # as if it had executed the refund again
            elif kind == "tool" and name in ("read_ticket", "read_invoice"):
                wanted = data.get("ticket") if isinstance(data, dict) else None
                ticket = self.ledgers.tickets.read(str(wanted or ticket_id))  # a read commits nothing
                output = ticket
            elif kind == "model":
                ticket = ticket if isinstance(ticket, dict) else self.ledgers.tickets.read(ticket_id)
                output = self.model_answer(name, ticket, ticket_id)
            else:
                output = {"error": f"{self.name} cannot replay a {kind} step named {name}"}
            result: dict[str, object] = {"seq": step.get("seq"), "output": output}
            if self.replay_misbehaviour == "extra_effect" and kind == "effect":
                result["effects"] = [{"name": name, "idempotency_key": step.get("idempotency_key")}]
            results.append(result)
        return {
            "results": results,
            "runtime_version": RUNTIME_VERSION + (" (provider changed)" if self.provider.changed else ""),
        }

    def effect_step(self, run: Run, spec: StepSpec, fault: str | None) -> None:
        if fault in ("model_timeout", "rate_limit"):
            # The model call that plans this step failed: nothing reported, nothing attempted.
            what = "timed out" if fault == "model_timeout" else "was rate limited (429)"
            raise Paused(fault, f"The model call planning {spec.name} {what}.", run.next_seq)
        key = run.key(spec)
        if key in run.committed:
            log.info("%s %s: %s already committed; skipping it", self.name, run.external_id, key)
            return
        if key in run.in_flight and key not in run.committed:
            # Reporting it again under a new seq would be a duplicate effect (the console refuses it).
            raise Paused(
                "other",
                f"{spec.name} was in flight when this run was interrupted; whether {key} happened is unknown.",
                run.in_flight[key],
            )
        # A failed attempt is retried as a new attempt of the same step (failed -> pending), same input and key.
        retry_seq = run.failed.pop(key, None)
        seq = retry_seq or run.take_seq()
        request = self.effect_input(run, spec) if retry_seq is None else self.recorded_input(run, seq)
        fork = run.fork or {}
        edited = fork.get("input")
        if fork.get("input_edited") and fork.get("step") == spec.name and isinstance(edited, dict):
            request = {**request, **edited}  # the operator's edited input for the step forked from
        # Reported before acting: if the call never answers, the console knows the outcome is unknown.
        self.report(run, seq, spec, "pending", input=request, idempotency_key=key, promise=promise_of(request))
        self.execute_effect(run, spec, seq, request, key, SYSTEM_FAULTS.get(fault or ""))

    def execute_effect(
        self, run: Run, spec: StepSpec, seq: int, request: JsonObject, key: str, fault: Fault | None
    ) -> None:
        try:
            answer = self.call_system(spec, request, key, fault)
            if self.faults.forced_kill(spec.name):
                raise ProcessKilled(f"{self.name} died after {key} was executed, before reporting it")
        except (RateLimited, ServiceError) as exc:
            # The system refused it: nothing happened, so the effect failed and can be retried under its key.
            self.report(
                run,
                seq,
                spec,
                "failed",
                input=request,
                output={"error": str(exc)},
                idempotency_key=key,
                promise=promise_of(request),
            )
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name} failed: {exc}; nothing happened, retry it under {key}.", seq) from exc
        except SystemFailure as exc:
            # Left pending on purpose: the agent cannot know whether it happened, an operator can.
            reason = "rate_limit" if isinstance(exc, RateLimited) else "tool_error"
            raise Paused(reason, f"{spec.name}: {exc}; whether {key} happened is unknown.", seq) from exc
        if not REFERENCE.fullmatch(answer):
            raise Paused(
                "untrusted_output",
                f"{spec.name} answered something that is not a reference; whether {key} happened is unknown.",
                seq,
            )
        self.report(
            run,
            seq,
            spec,
            "committed",
            input=request,
            output={"ref": answer},
            idempotency_key=key,
            external_ref=answer,
            promise=promise_of(request),
        )
        run.committed.add(key)
        run.refs[spec.name] = answer

    def recorded_input(self, run: Run, seq: int) -> JsonObject:
        """A retry repeats the failed attempt's input exactly (the console refuses another)."""
        workflow = cast("WorkflowAnswer", self.client.get_workflow(run.workflow_id))
        step = next(s for s in workflow.get("steps") or [] if int(s["seq"]) == seq)
        return step["input"] if isinstance(step["input"], dict) else {}

    def effect_input(self, run: Run, spec: StepSpec) -> JsonObject:
        ticket, (amount, currency) = run.ticket, run.at_stake()
        if spec.name in MONEY_STEPS:
            return {
                "ticket": run.ticket_id,
                "amount": amount,
                "currency": currency,
                "to": ticket["customer"] if ticket else None,
            }
        if spec.name == "write_ticket_note":
            done = ", ".join(f"{name} {ref}" for name, ref in run.refs.items()) or "no effect yet"
            return {"ticket": run.ticket_id, "text": f"{self.name}: {self.kind.replace('_', ' ')} handled ({done})."}
        promise = next((s.promise for s in self.plan.values() if s.promise), "")
        text = (
            f"Dear {ticket['customer'] if ticket else 'customer'}, we have issued {amount} {currency}: {promise}."
            if amount and self.kind != "ticket_triage"
            else f"Dear customer, {promise}."
        )
        return {
            "ticket": run.ticket_id,
            "to": ticket["email"] if ticket else None,
            "text": text,
            "promise": f"customer told: {promise}",
        }

    def call_system(self, spec: StepSpec, request: JsonObject, key: str, fault: Fault | None) -> str:
        if spec.name in MONEY_STEPS:
            return self.ledgers.payments.refund(
                key,
                ticket=str(request["ticket"]),
                amount=str(request["amount"]),
                currency=str(request["currency"]),
                agent=self.name,
                fault=fault,
                operation="refund" if spec.name == "issue_refund" else "credit",
            )
        if spec.name == "write_ticket_note":
            return self.ledgers.tickets.add_note(
                key, ticket=str(request["ticket"]), text=str(request["text"]), agent=self.name, fault=fault
            )
        return self.ledgers.messaging.send(
            key,
            ticket=str(request["ticket"]),
            to=str(request.get("to")),
            text=str(request["text"]),
            agent=self.name,
            fault=fault,
        )


def promise_of(request: JsonObject) -> str | None:
    """The promise an effect's input makes the customer (a message's), reported with the step."""
    promise = request.get("promise")
    return promise if isinstance(promise, str) else None
