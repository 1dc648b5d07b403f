"""3: recording the steps of a trajectory, idempotently (the rules are Workflow.record_step's)."""

from __future__ import annotations

from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema, Status
from ninja.renderers import JSONRenderer

from ..models import Conflict, Drill, Hold, Invalid, Step, Workflow
from .errors import ApiError
from .schemas import ERRORS, DrillJournalIn, DrillJournalOut, StepBatchIn, StepIn, StepOut
from .shaping import calling_agent, own_workflow

# The API's renderer: workflows.api gives this one to its NinjaAPI, so the batch answer rendered here directly is
# byte for byte what the API would render (no import of the package, which imports this module).
RENDERER = JSONRenderer()
CONTENT_TYPE = f"{RENDERER.media_type}; charset={RENDERER.charset}"

router = Router()


class StepReportOut(StepOut):
    # docs/API.md, "Holds" and "Drills": present (not null) when the console has something for the
    # runtime to do; agents that ignore it still get every field and status code they always did.
    instruction: dict[str, Any] | None = None


def _instruction(workflow: Workflow, steps: list[Step]) -> dict[str, Any]:
    """What the answer tells the runtime beside the steps: a hold's pause (at a report that finished a step,
    never while one is pending: pausing then would leave its outcome unknown) and a drill's fault, until it
    was carried out. The workflow as loaded for the request says whether a hold covers it and whether a
    drill picked it, so a report under neither pays no query for them."""
    instruction = Drill.instruction_for(workflow)
    last = max(steps, key=lambda s: s.seq)
    if getattr(workflow, "under_hold", True) and not any(s.status == Step.Status.PENDING for s in steps):
        workflow.refresh_from_db()
        instruction = {**instruction, **(Hold.pause_if_held(workflow, at_seq=last.seq + 1) or {})}
    return {"instruction": instruction} if instruction else {}


@router.post(
    "/workflows/{workflow_id}/steps", response={200: StepReportOut, 201: StepReportOut, **ERRORS}, exclude_unset=True
)  # no "instruction" key at all unless there is one
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status[dict[str, Any]]:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise.

    Under a hold, the answer carries ``instruction.pause`` and the workflow is paused at a ``held``
    checkpoint; a drilled workflow's answer carries ``instruction.drill`` until its fault was carried out."""
    workflow = own_workflow(request, workflow_id, touch=False, holds=True)  # touched in the step's own transaction
    step, created = workflow.record_step(payload.model_dump(), actor=calling_agent(request))
    return Status(201 if created else 200, {**step.as_dict(), **_instruction(workflow, [step])})


class StepBatchOut(Schema):
    created: list[int]
    steps: list[StepOut]
    instruction: dict[str, Any] | None = None


@router.post(
    "/workflows/{workflow_id}/steps/batch",
    response={200: StepBatchOut, 201: StepBatchOut, **ERRORS},
    exclude_unset=True,
)
def report_steps(request: HttpRequest, workflow_id: str, payload: StepBatchIn) -> HttpResponse:
    """Record up to 500 steps of one workflow in one transaction: all of them or none.

    Each step follows the rules of a single report; 201 when any step is new (their seqs in
    ``created``), 200 when the whole batch was already recorded (a resend).
    """
    workflow = own_workflow(request, workflow_id, touch=False, holds=True)  # touched in the batch's transaction
    try:
        # The validated fields as they are (a copy of each model's field dict): a model_dump per step copied every
        # input and output value, the view's largest cost after the insert.
        results = workflow.record_steps([vars(step).copy() for step in payload.steps], actor=calling_agent(request))
    except (Conflict, Invalid) as exc:
        index = getattr(exc, "index", None)
        if index is None:
            raise
        status = 409 if isinstance(exc, Conflict) else 422
        raise ApiError(
            status,
            exc.code,
            f"steps.{index} (seq {payload.steps[index].seq}): {exc} Nothing in this batch was recorded.",
            f"steps.{index}" + (f".{exc.field}" if exc.field else ""),
        ) from None
    created = [step.seq for step, new in results if new]
    body = {
        "created": created,
        "steps": [step.as_dict() for step, _ in results],
        **_instruction(workflow, [step for step, _ in results]),
    }
    # Rendered as is: the body is StepBatchOut already (as_dict is StepOut's fields), and re-validating and dumping
    # 500 steps' inputs and outputs cost more than the insert. The response schema above still documents it.
    # orjson when the body is plain JSON values (the steps as reported, no instruction); the API's renderer for
    # an instruction (its timestamps are the API's format) or an integer past 64 bits in an input or output.
    status = 201 if created else 200
    if "instruction" not in body:
        try:
            return HttpResponse(orjson.dumps(body), status=status, content_type=CONTENT_TYPE)
        except orjson.JSONEncodeError:
            pass
    return HttpResponse(
        RENDERER.render(request, body, response_status=status), status=status, content_type=CONTENT_TYPE
    )


@router.put("/workflows/{workflow_id}/drill-journal", response={200: DrillJournalOut, 201: DrillJournalOut, **ERRORS})
def record_drill_journal(request: HttpRequest, workflow_id: str, payload: DrillJournalIn) -> Status[dict[str, Any]]:
    """What the runtime journalled at a drill's fault: 201 recorded, 200 already recorded (the first journal
    stands, and is answered), 409 ``not_drilled`` for a workflow no drill picked."""
    workflow = own_workflow(request, workflow_id)
    recorded = Drill.record_journal(workflow, payload.model_dump())
    workflow.refresh_from_db(fields=["drill_journal"])
    return Status(201 if recorded else 200, {"journal": workflow.drill_journal})
