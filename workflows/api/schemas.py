"""Request and response bodies of the agent API; lengths match the model columns."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ..models import Action, Checkpoint, Decision, Reason, Step, Workflow

# PositiveIntegerField is a 32-bit column on PostgreSQL; larger values would be a DB error.
MAX_SEQ = 2_147_483_647



def one_of(values: Any) -> Any:
    """A Literal of the model's choices: the API and the models name one vocabulary."""
    return Literal[tuple(str(value) for value in values)]


if TYPE_CHECKING:  # a Literal built at runtime is a plain str to a type checker
    StepKind = StepStatus = ReasonValue = FinishStatus = CheckpointStatus = WorkflowStatus = str
    ActionValue = DecisionState = str
else:
    StepKind = one_of(Step.Kind.values)
    StepStatus = one_of(Step.Status.values)
    ReasonValue = one_of(Reason.values)
    FinishStatus = one_of(Workflow.FINISHED_BY_AGENT)
    CheckpointStatus = one_of(Checkpoint.Status.values)
    WorkflowStatus = one_of(Workflow.Status.values)
    ActionValue = one_of(Action.values)
    DecisionState = one_of(Decision.SHOWN_TO_AGENT)


# --- Schemas -------------------------------------------------------------------

# Lengths match the model columns, so an over-long value is a 422 here, never a database error.
Text100 = Annotated[str, StringConstraints(min_length=1, max_length=100)]
Text150 = Annotated[str, StringConstraints(min_length=1, max_length=150)]
Text200 = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Text300 = Annotated[str, StringConstraints(min_length=1, max_length=300)]
MaybeEmpty200 = Annotated[str, StringConstraints(max_length=200)]


class Strict(BaseModel):
    # Strict: "3" is not a seq and true is not an int; agents must send the types the contract names.
    model_config = ConfigDict(strict=True)


class WorkflowIn(Strict):
    external_id: Text200
    kind: Text100
    title: Text300
    owner: Text150 | None = None
    context: dict[str, Any] | None = None


class StepIn(Strict):
    seq: int = Field(ge=1, le=MAX_SEQ)
    name: Text200
    kind: StepKind
    status: StepStatus
    input: Any = None
    output: Any = None
    verified: bool = False
    promise: str | None = None
    idempotency_key: Text200 | None = Field(default=None, validate_default=True)
    external_ref: MaybeEmpty200 | None = None

    @field_validator("idempotency_key")
    @classmethod
    def effects_need_a_key(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("kind") == Step.Kind.EFFECT:
            raise PydanticCustomError(
                "idempotency_key_required",
                "An effect step needs an idempotency_key, so that it is never executed twice")
        return value


class CheckpointIn(Strict):
    reason: ReasonValue
    detail: str | None = ""
    at_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ)
    state: dict[str, Any] | None = None


class FinishIn(Strict):
    status: FinishStatus
    summary: str | None = ""


class StepOut(BaseModel):
    seq: int
    name: str
    kind: str
    status: StepStatus
    input: Any
    output: Any
    verified: bool
    promise: str | None
    idempotency_key: str | None
    external_ref: str | None


class CheckpointSummaryOut(BaseModel):
    id: str
    status: CheckpointStatus
    reason: str
    detail: str
    at_seq: int | None
    opened_at: datetime
    due_at: datetime
    breached: bool
    resolved_at: datetime | None


class WorkflowOut(BaseModel):
    id: str
    external_id: str
    kind: str
    title: str
    status: WorkflowStatus
    owner: str | None
    agent: str
    context: dict[str, Any]
    summary: str
    created_at: datetime
    last_activity_at: datetime
    finished_at: datetime | None
    steps: list[StepOut]
    checkpoints: list[CheckpointSummaryOut]


class RunbookOut(BaseModel):
    slug: str
    title: str
    url: str | None


class ResumeStateOut(BaseModel):
    # Computed by the model; keep any key it adds later rather than silently dropping it.
    model_config = ConfigDict(extra="allow")
    committed: list[StepOut]
    pending: StepOut | None
    last_verified_output: Any
    promises: list[str]
    unknown_effects: list[StepOut]
    state: Any


class DecisionOut(BaseModel):
    action: ActionValue
    instructions: str
    confirmations: dict[str, str]
    new_owner: str | None
    decided_by: str
    decided_at: datetime
    state: DecisionState
    delivery_id: str


class CheckpointOut(CheckpointSummaryOut):
    workflow_id: str
    assignee: str | None
    warn_at: datetime
    runbook: RunbookOut | None
    resume_state: ResumeStateOut
    decision: DecisionOut | None


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None


class ErrorOut(BaseModel):
    error: ErrorBody


# Documented on every operation: the codes API.md lists, plus 500/503 (503 is worth a retry).
ERRORS = {frozenset({400, 401, 404, 405, 409, 413, 422, 429, 500, 503}): ErrorOut}
