"""3: recording the steps of a trajectory, idempotently (the rules are Workflow.record_step's)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status

from ..models import Conflict, Drill, Invalid, Workflow
from .errors import ApiError
from .schemas import ERRORS, StepBatchIn, StepIn, StepOut
from .shaping import calling_agent, own_workflow

router = Router()


class StepReportOut(StepOut):
    # docs/API.md, "Drills": present (not null) when the console has something for the runtime to do;
    # agents that ignore it still get every field and status code they always did.
    instruction: dict[str, Any] | None = None


def _instruction(workflow: Workflow) -> dict[str, Any]:
    """What the answer tells the runtime beside the step: a drill's fault, until it was carried out. The
    workflow as loaded for the request: a drill is set at creation, so an undrilled run costs no query."""
    instruction = Drill.instruction_for(workflow)
    return {"instruction": instruction} if instruction else {}


@router.post("/workflows/{workflow_id}/steps", response={200: StepReportOut, 201: StepReportOut, **ERRORS},
             exclude_unset=True)  # no "instruction" key at all unless there is one
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status[dict[str, Any]]:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise.

    A drilled workflow's answer carries ``instruction.drill`` until its fault was carried out."""
    workflow = own_workflow(request, workflow_id, touch=False)  # touched in the step's own transaction
    step, created = workflow.record_step(payload.model_dump(), actor=calling_agent(request))
    return Status(201 if created else 200, {**step.as_dict(), **_instruction(workflow)})


class StepBatchOut(Schema):
    created: list[int]
    steps: list[StepOut]
    instruction: dict[str, Any] | None = None


@router.post("/workflows/{workflow_id}/steps/batch", response={200: StepBatchOut, 201: StepBatchOut, **ERRORS},
             exclude_unset=True)
def report_steps(request: HttpRequest, workflow_id: str, payload: StepBatchIn) -> Status[dict[str, Any]]:
    """Record up to 500 steps of one workflow in one transaction: all of them or none.

    Each step follows the rules of a single report; 201 when any step is new (their seqs in
    ``created``), 200 when the whole batch was already recorded (a resend).
    """
    workflow = own_workflow(request, workflow_id, touch=False)  # touched in the batch's transaction
    try:
        results = workflow.record_steps([step.model_dump() for step in payload.steps], actor=calling_agent(request))
    except (Conflict, Invalid) as exc:
        index = getattr(exc, "index", None)
        if index is None:
            raise
        status = 409 if isinstance(exc, Conflict) else 422
        raise ApiError(status, exc.code, f"steps.{index} (seq {payload.steps[index].seq}): {exc} "
                                         "Nothing in this batch was recorded.",
                       f"steps.{index}" + (f".{exc.field}" if exc.field else "")) from None
    created = [step.seq for step, new in results if new]
    return Status(201 if created else 200, {"created": created, "steps": [step.as_dict() for step, _ in results],
                                            **_instruction(workflow)})
