"""Reading an agent's own objects and shaping them into the bodies API.md documents."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.db.models import Exists, OuterRef, Q
from django.http import HttpRequest

from ..models import Agent, Checkpoint, Decision, Event, Hold, Workflow
from .errors import ApiError, not_found

if TYPE_CHECKING:
    from ..models.base import Operator


class CheckpointSummary(TypedDict):
    """A checkpoint as a workflow's body lists it (API.md, endpoint 2)."""

    id: str
    status: str
    reason: str
    detail: str
    at_seq: int | None
    opened_at: datetime
    due_at: datetime
    breached: bool
    resolved_at: datetime | None


class WorkflowBody(TypedDict):
    """Endpoints 1, 2 and 6: a workflow with its steps (as ``Step.as_dict``) and checkpoints."""

    id: str
    external_id: str
    kind: str
    title: str
    status: str
    owner: str | None
    agent: str
    context: Mapping[str, object]
    summary: str
    created_at: datetime
    last_activity_at: datetime
    finished_at: datetime | None
    forked_from: str | None
    forked_at_seq: int | None
    steps: list[Mapping[str, object]]
    checkpoints: list[CheckpointSummary]


class DecisionBody(TypedDict):
    """The decision a checkpoint's body carries once an operator decided."""

    action: str
    instructions: str
    confirmations: Mapping[str, object]
    new_owner: str | None
    decided_by: str
    decided_at: datetime
    state: str
    delivery_id: str


class RunbookLink(TypedDict):
    slug: str
    title: str
    url: str | None


class CheckpointBody(CheckpointSummary):
    """Endpoints 4 and 5: a checkpoint with its resume state, and the decision once there is one."""

    workflow_id: str
    assignee: str | None
    warn_at: datetime | None
    runbook: RunbookLink | None
    resume_state: Mapping[str, object]
    decision: DecisionBody | None


def calling_agent(request: HttpRequest) -> Agent:
    agent: Agent = request.auth  # type: ignore[attr-defined]  # set by AgentToken before any handler runs
    return agent


def parse_pk(raw: str) -> int | None:
    # Ids are opaque to agents; anything but a bigint-sized number cannot be one of ours.
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def own_workflow(request: HttpRequest, workflow_id: str, *, touch: bool = True, holds: bool = False) -> Workflow:
    """The calling agent's workflow (404 for anyone else's), touched: any write is a sign of life.

    ``touch=False`` for reads (they touch with ``reading=True``: polling a paused workflow is not
    activity) and for callers that touch it in their own transaction (recording steps). ``holds``: the
    same read also says whether an active hold covers it (``under_hold``), so a step report under no hold
    (nearly all of them) pays no query for holds.
    """
    pk = parse_pk(workflow_id)
    workflow = None
    if pk:
        mine = calling_agent(request).workflows.filter(pk=pk)
        if holds:
            mine = mine.annotate(
                under_hold=Exists(
                    Hold.objects.active().filter(  # as Hold.objects.covering
                        Q(kind="") | Q(kind=OuterRef("kind")), agent_id=OuterRef("agent_id")
                    )
                )
            )
        workflow = mine.first()
    if workflow is None:
        raise stood_down_or_not_found(request, pk, "workflow")
    if touch:
        workflow.touch()
    return workflow


def stood_down_or_not_found(request: HttpRequest, workflow_pk: int | None, what: str) -> ApiError:
    """Not the caller's: 409 ``stood_down`` when a failover took this workflow from the calling agent
    (it knew the workflow, so nothing leaks), else the 404 every other agent's id gets."""
    failover = (
        Decision.objects.took_over_from(calling_agent(request)).filter(checkpoint__workflow_id=workflow_pk).first()
        if workflow_pk
        else None
    )
    if failover is None:
        return not_found(what)
    if request.method == "POST":  # it tried to act on the workflow again (its polling is not worth a record)
        Event.record(
            failover.checkpoint.workflow,
            Event.Verb.STOOD_DOWN_REFUSED,
            actor=calling_agent(request),
            data={"path": request.path[:200], "taken_over_by": failover.standby.name if failover.standby else None},
        )
    return ApiError(409, "stood_down", failover.stand_down_message())


def _username(user: Operator | None) -> str | None:
    return user.get_username() if user else None


def checkpoint_summary(checkpoint: Checkpoint) -> CheckpointSummary:
    return {
        "id": str(checkpoint.pk),
        "status": checkpoint.status,
        "reason": checkpoint.reason,
        "detail": checkpoint.detail,
        "at_seq": checkpoint.at_seq,
        "opened_at": checkpoint.opened_at,
        "due_at": checkpoint.due_at,
        "breached": checkpoint.is_breached,
        "resolved_at": checkpoint.resolved_at,
    }


def workflow_body(workflow: Workflow) -> WorkflowBody:
    workflow.refresh_from_db()  # callers changed it through other instances (open_for, touch)
    return {
        "id": str(workflow.pk),
        "external_id": workflow.external_id,
        "kind": workflow.kind,
        "title": workflow.title,
        "status": workflow.status,
        "owner": _username(workflow.owner),
        "agent": workflow.agent.name,
        "context": workflow.context,
        "summary": workflow.summary,
        "created_at": workflow.created_at,
        "last_activity_at": workflow.last_activity_at,
        "finished_at": workflow.finished_at,
        "forked_from": str(workflow.forked_from_id) if workflow.forked_from_id else None,
        "forked_at_seq": workflow.forked_at_seq,
        "steps": [step.as_dict() for step in workflow.steps.order_by("seq")],
        "checkpoints": [checkpoint_summary(c) for c in workflow.checkpoints.order_by("opened_at", "pk")],
    }


def decision_body(decision: Decision) -> DecisionBody:
    return {
        "action": decision.action,
        "instructions": decision.instructions,
        "confirmations": decision.confirmations,
        "new_owner": decision.new_owner_name,
        "decided_by": decision.decided_by.get_username(),
        "decided_at": decision.decided_at,
        "state": decision.status,
        "delivery_id": str(decision.delivery_id),
    }


def checkpoint_body(checkpoint: Checkpoint, decision: Decision | None = None) -> CheckpointBody:
    runbook = checkpoint.runbook
    read = checkpoint.runbook_version or runbook  # the title and link of the version it opened with
    return {
        **checkpoint_summary(checkpoint),
        "workflow_id": str(checkpoint.workflow_id),
        "assignee": _username(checkpoint.assignee),
        "warn_at": checkpoint.warn_at,
        "runbook": {"slug": runbook.slug, "title": read.title, "url": read.url or None} if runbook and read else None,
        "resume_state": checkpoint.resume_state,
        "decision": decision_body(decision) if decision else None,
    }
