"""1, 2, 6: creating, reading and finishing workflows."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from ..models import Agent, Conflict, Hold, Workflow
from .checkpoints import checkpoint_conflict
from .errors import ApiError
from .schemas import ERRORS, FinishIn, WorkflowIn, WorkflowOut
from .shaping import WorkflowBody, calling_agent, own_workflow, workflow_body

router = Router()


@router.post("/workflows", response={200: WorkflowOut, 201: WorkflowOut, **ERRORS})
def create_workflow(request: HttpRequest, payload: WorkflowIn) -> Status[WorkflowBody]:
    """Start a workflow. The same external_id again answers 200 with the existing one; a new one under a
    hold that refuses new workflows answers 409 agent_on_hold (docs/API.md, "Holds")."""
    Hold.refuse_new(calling_agent(request), kind=payload.kind, external_id=payload.external_id)
    workflow, created = Workflow.objects.start(
        calling_agent(request),
        external_id=payload.external_id,
        kind=payload.kind,
        title=payload.title,
        owner_name=payload.owner,
        context=payload.context,
    )
    return Status(201 if created else 200, workflow_body(workflow))


@router.get("/workflows/{workflow_id}", response={200: WorkflowOut, **ERRORS})
def get_workflow(request: HttpRequest, workflow_id: str) -> WorkflowBody:
    """The workflow with its steps (by seq) and checkpoints."""
    workflow = own_workflow(request, workflow_id, touch=False)
    workflow.touch(reading=True)  # a sign of life while it runs; polling a paused one is not activity
    return workflow_body(workflow)


def _finish(workflow: Workflow, payload: FinishIn, agent: Agent) -> None:
    if workflow.is_terminal:
        raise ApiError(409, "workflow_finished", f"The workflow is already {workflow.status}.")
    try:
        won = workflow.finish(payload.status, payload.summary or "", actor=agent)
    except Conflict as exc:
        raise checkpoint_conflict(workflow, exc) from None
    if not won and workflow.status != payload.status:
        raise ApiError(409, "conflict", f"The workflow is {workflow.status}; it cannot finish now.")


@router.post("/workflows/{workflow_id}/finish", response={200: WorkflowOut, **ERRORS})
def finish_workflow(request: HttpRequest, workflow_id: str, payload: FinishIn) -> WorkflowBody:
    """Close the workflow as completed or failed; 409 while a checkpoint is unresolved."""
    workflow = own_workflow(request, workflow_id)
    if workflow.status != payload.status:  # the same finish again is a harmless retry
        _finish(workflow, payload, calling_agent(request))
    return workflow_body(workflow)
