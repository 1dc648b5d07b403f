"""3: recording the steps of a trajectory, idempotently."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from ..models import Agent, Event, Step, Workflow
from .errors import ApiError
from .schemas import ERRORS, StepIn, StepOut
from .shaping import calling_agent, canonical, own_workflow

router = Router()


IDENTITY_FIELDS = ("name", "kind", "input", "idempotency_key")
SET_ON_TRANSITION = ("status", "output", "verified", "promise", "external_ref")
# A null in a resend means "not repeated", not "erase": commit reports need not resend the input.
KEPT_WHEN_NULL = ("input", "output", "promise", "idempotency_key", "external_ref")


def _wanted(step: Step, payload: StepIn) -> dict:
    """The step as this report would leave it."""
    sent, recorded = payload.model_dump(), step.as_dict()
    return {f: recorded[f] if f in KEPT_WHEN_NULL and sent[f] is None else sent[f] for f in recorded}


def _key_taken(seq: int) -> ApiError:
    return ApiError(409, "idempotency_key_taken",
                    f"Step {seq} of this workflow already uses this idempotency_key; "
                    "an effect is recorded once.", "idempotency_key")


def _key_holder(workflow: Workflow, key: str | None) -> Step | None:
    return workflow.steps.filter(idempotency_key=key).first() if key else None


def _create_step(workflow: Workflow, payload: StepIn, agent: Agent) -> Step | None:
    """The new step, or None when a step with this seq exists by now (a concurrent report won)."""
    if holder := _key_holder(workflow, payload.idempotency_key):
        if holder.seq == payload.seq:
            return None
        raise _key_taken(holder.seq)
    try:
        with transaction.atomic():
            step = Step.objects.create(workflow=workflow, **payload.model_dump())
            Event.record(step, Event.Verb.step(step.status), actor=agent,
                         data={"seq": step.seq, "name": step.name, "kind": step.kind})
    except IntegrityError:
        if workflow.steps.filter(seq=payload.seq).exists():
            return None
        if holder := _key_holder(workflow, payload.idempotency_key):
            raise _key_taken(holder.seq) from None
        raise
    return step


def _update_step(step: Step, payload: StepIn, agent: Agent) -> Step:
    """Identical resend: unchanged. pending -> committed|failed: applied. Anything else: 409."""
    wanted, recorded = _wanted(step, payload), step.as_dict()
    if canonical(wanted) == canonical(recorded):
        return step
    if step.status != Step.Status.PENDING:
        raise ApiError(409, "step_conflict", f"Step {step.seq} is already {step.status}; a recorded step "
                                             "cannot change (resend it unchanged or report a new seq).")
    if changed := [f for f in IDENTITY_FIELDS if canonical(wanted[f]) != canonical(recorded[f])]:
        raise ApiError(409, "step_conflict", f"Step {step.seq} was recorded with a different "
                                             f"{', '.join(changed)}; report a new seq instead.", changed[0])
    if wanted["status"] not in Step.TRANSITIONS[Step.Status.PENDING]:
        raise ApiError(409, "step_conflict", f"Step {step.seq} is pending; it can only move to committed "
                                             "or failed.", "status")
    # The one place status changes happen: a compare-and-set that writes the step's Event.
    won = step.move(wanted["status"], actor=agent, verb=Event.Verb.step(wanted["status"]),
                    data={"seq": step.seq, "name": step.name}, updated_at=timezone.now(),
                    **{f: wanted[f] for f in SET_ON_TRANSITION if f != "status"})
    # Lost a race with another report of this step: judge this one against what won.
    return step if won else _update_step(step, payload, agent)


@router.post("/workflows/{workflow_id}/steps", response={200: StepOut, 201: StepOut, **ERRORS})
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise."""
    agent = calling_agent(request)
    workflow = own_workflow(request, workflow_id)
    if workflow.is_terminal:
        raise ApiError(409, "workflow_finished", f"The workflow is {workflow.status}; it takes no more steps.")
    step = workflow.steps.filter(seq=payload.seq).first()
    if step is None:
        created = _create_step(workflow, payload, agent)
        if created is not None:
            return Status(201, created.as_dict())
        step = workflow.steps.get(seq=payload.seq)
    return Status(200, _update_step(step, payload, agent).as_dict())
