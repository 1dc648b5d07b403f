"""4, 5: opening a checkpoint and reading it with its decision."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from ..models import Checkpoint, Conflict, Workflow, canonical
from .errors import ApiError
from .schemas import ERRORS, CheckpointIn, CheckpointOut
from .shaping import CheckpointBody, calling_agent, checkpoint_body, own_workflow, parse_pk, stood_down_or_not_found

router = Router()


def checkpoint_conflict(workflow: Workflow, exc: Conflict) -> ApiError:
    workflow.refresh_from_db()
    if unresolved := workflow.checkpoints.unresolved().first():
        return ApiError(
            409,
            "checkpoint_open",
            f"Checkpoint {unresolved.pk} is still {unresolved.status}; a workflow has at most one open checkpoint.",
        )
    if workflow.is_terminal:
        return ApiError(409, "workflow_finished", f"The workflow is {workflow.status}; it cannot pause.")
    return ApiError(409, "conflict", str(exc))


def _resent_checkpoint(workflow: Workflow, payload: CheckpointIn) -> Checkpoint | None:
    """The unresolved checkpoint this very request opened before (its answer was lost), if any."""
    checkpoint = workflow.checkpoints.unresolved().filter(opened_by_console=False).first()
    if checkpoint is None:
        return None
    sent = (payload.reason, payload.detail or "", payload.at_seq, canonical(payload.state or {}), payload.plan_steps())
    recorded = (checkpoint.reason, checkpoint.detail, checkpoint.at_seq, canonical(checkpoint.state), checkpoint.plan)
    return checkpoint if sent == recorded else None


@router.post("/workflows/{workflow_id}/checkpoints", response={200: CheckpointOut, 201: CheckpointOut, **ERRORS})
def open_checkpoint(request: HttpRequest, workflow_id: str, payload: CheckpointIn) -> Status[CheckpointBody]:
    """Pause the workflow at a checkpoint for an operator; answers the computed resume state.

    An identical resend of the open checkpoint answers 200 with it; any other while one is open, 409."""
    workflow = own_workflow(request, workflow_id)
    try:
        checkpoint = Checkpoint.open_for(
            workflow,
            reason=payload.reason,
            detail=payload.detail or "",
            at_seq=payload.at_seq,
            state=payload.state or {},
            plan=payload.plan_steps(),
            actor=calling_agent(request),
        )
    except Conflict as exc:
        # Not a second checkpoint but this request again, its first answer lost (or a concurrent twin).
        if resent := _resent_checkpoint(workflow, payload):
            return Status(200, checkpoint_body(resent, resent.decision_for_agent()))
        raise checkpoint_conflict(workflow, exc) from None
    return Status(201, checkpoint_body(checkpoint))


@router.get("/checkpoints/{checkpoint_id}", response={200: CheckpointOut, **ERRORS})
def get_checkpoint(request: HttpRequest, checkpoint_id: str) -> CheckpointBody:
    """The checkpoint and its decision. Agents without a resume endpoint poll this."""
    pk = parse_pk(checkpoint_id)
    checkpoint = (
        Checkpoint.objects.filter(pk=pk, workflow__agent=calling_agent(request))
        .select_related("workflow__agent", "runbook", "runbook_version", "assignee")
        .first()
        if pk
        else None
    )
    if checkpoint is None:
        workflow_pk = Checkpoint.objects.filter(pk=pk).values_list("workflow_id", flat=True).first() if pk else None
        raise stood_down_or_not_found(request, workflow_pk, "checkpoint")
    # Polling a paused workflow for its decision is not activity ("last activity 0 s ago" for ten minutes).
    checkpoint.workflow.touch(reading=True)
    decision = checkpoint.decision_for_agent()
    # An agent without a resume endpoint polls: this fetch is the delivery of its decision.
    if decision is not None and decision.awaits_fetch:
        decision.mark_fetched()  # a concurrent fetch may win: the same outcome, recorded once
        checkpoint.refresh_from_db()
    return checkpoint_body(checkpoint, decision)
