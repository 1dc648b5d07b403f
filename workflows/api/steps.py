"""3: recording the steps of a trajectory, idempotently (the rules are Workflow.record_step's)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from .schemas import ERRORS, StepIn, StepOut
from .shaping import calling_agent, own_workflow

router = Router()


@router.post("/workflows/{workflow_id}/steps", response={200: StepOut, 201: StepOut, **ERRORS})
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise."""
    workflow = own_workflow(request, workflow_id, touch=False)  # touched in the step's own transaction
    step, created = workflow.record_step(payload.model_dump(), actor=calling_agent(request))
    return Status(201 if created else 200, step.as_dict())
