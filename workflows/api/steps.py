"""3: recording the steps of a trajectory, idempotently (the rules are Workflow.record_step's)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status

from ..models import Conflict, Invalid
from .errors import ApiError
from .schemas import ERRORS, StepBatchIn, StepIn, StepOut
from .shaping import calling_agent, own_workflow

router = Router()


@router.post("/workflows/{workflow_id}/steps", response={200: StepOut, 201: StepOut, **ERRORS})
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status[dict[str, Any]]:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise."""
    workflow = own_workflow(request, workflow_id, touch=False)  # touched in the step's own transaction
    step, created = workflow.record_step(payload.model_dump(), actor=calling_agent(request))
    return Status(201 if created else 200, step.as_dict())


class StepBatchOut(Schema):
    created: list[int]
    steps: list[StepOut]


@router.post("/workflows/{workflow_id}/steps/batch", response={200: StepBatchOut, 201: StepBatchOut, **ERRORS})
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
    return Status(201 if created else 200, {"created": created, "steps": [step.as_dict() for step, _ in results]})
