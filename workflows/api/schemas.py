"""Request and response bodies of the agent API; lengths match the model columns."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..models import Action, Checkpoint, Decision, Reason, Step, Workflow

# PositiveIntegerField is a 32-bit column on PostgreSQL; larger values would be a DB error.
MAX_SEQ = 2_147_483_647



def one_of(values: Any) -> Any:
    """A Literal of the model's choices: the API and the models name one vocabulary."""
    return Literal[tuple(str(value) for value in values)]


if TYPE_CHECKING:  # a Literal built at runtime is a plain str to a type checker
    StepKind: TypeAlias = str
    StepStatus: TypeAlias = str
    ReasonValue: TypeAlias = str
    FinishStatus: TypeAlias = str
    CheckpointStatus: TypeAlias = str
    WorkflowStatus: TypeAlias = str
    ActionValue: TypeAlias = str
    DecisionState: TypeAlias = str
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


Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
MAX_PLAN_STEPS = 200


class PlanStepIn(Strict):
    """One step the agent will take if resumed. For an effect that moves money: the amount at stake."""

    name: Text200
    kind: StepKind
    amount: str | int | float | None = None
    currency: Currency | None = None
    moves_money: bool | None = None

    @field_validator("amount")
    @classmethod
    def amount_is_a_decimal(cls, value: str | int | float | None) -> str | None:
        if value is None or isinstance(value, bool):
            return None
        try:
            amount = Decimal(str(value))
        except InvalidOperation:
            raise PydanticCustomError("invalid_amount", "amount must be a decimal number such as \"120.60\"") from None
        if not amount.is_finite() or amount < 0 or len(amount.as_tuple().digits) > 18:
            raise PydanticCustomError("invalid_amount", "amount must be a finite, non-negative decimal of at most "
                                                "18 digits")
        return str(value) if isinstance(value, str) else format(amount, "f")

    @model_validator(mode="after")
    def money_belongs_to_effects(self) -> PlanStepIn:
        if self.amount is not None and self.currency is None:
            raise PydanticCustomError("currency_required", "an amount needs its currency (ISO 4217, e.g. EUR)")
        if self.moves_money is None:
            self.moves_money = self.amount is not None
        if self.moves_money and self.kind != Step.Kind.EFFECT:
            raise PydanticCustomError("money_on_non_effect", "only an effect step can move money")
        return self

    def normalized(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "amount": self.amount, "currency": self.currency,
                "moves_money": bool(self.moves_money)}


MAX_BATCH_STEPS = 500


class StepBatchIn(Strict):
    steps: list[StepIn] = Field(min_length=1, max_length=MAX_BATCH_STEPS)


class CheckpointIn(Strict):
    reason: ReasonValue
    detail: str | None = ""
    at_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ)
    state: dict[str, Any] | None = None
    # Optional (API v1 stays compatible): without it the console cannot know what a resume will do.
    plan: list[PlanStepIn] | None = Field(default=None, max_length=MAX_PLAN_STEPS)

    def plan_steps(self) -> list[dict[str, Any]] | None:
        return None if self.plan is None else [step.normalized() for step in self.plan]


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
    forked_from: str | None = None  # issue 11: the workflow this one was forked from, and from which step
    forked_at_seq: int | None = None
    steps: list[StepOut]
    checkpoints: list[CheckpointSummaryOut]


class RunbookOut(BaseModel):
    slug: str
    title: str
    url: str | None


class PlanStepOut(BaseModel):
    name: str
    kind: str
    amount: str | None
    currency: str | None
    moves_money: bool


class ResumeStateOut(BaseModel):
    # Computed by the model; keep any key it adds later rather than silently dropping it.
    model_config = ConfigDict(extra="allow")
    committed: list[StepOut]
    pending: StepOut | None
    last_verified_output: Any
    promises: list[str]
    unknown_effects: list[StepOut]
    state: Any
    plan: list[PlanStepOut] | None = Field(
        default=None, description="The agent's remaining plan as sent with the checkpoint; null when it sent none.")


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


# --- Replays and capabilities (issue 11: additions to v1, nothing above changes) ---------------

class CapabilitiesIn(Strict):
    capabilities: list[Literal["replay", "fork", "failover"]]
    runtime_version: Annotated[str, StringConstraints(max_length=200)] | None = None
    kinds: list[Text100] | None = None


class AgentOut(BaseModel):
    name: str
    capabilities: list[str]
    runtime_version: str
    kinds: list[str]
    replay_endpoint: bool


class ReplayResultIn(Strict):
    seq: int = Field(ge=1, le=MAX_SEQ)
    output: Any = None
    effects: list[Any] | None = None


class ReplayResultsIn(Strict):
    results: list[ReplayResultIn] | None = None
    runtime_version: Annotated[str, StringConstraints(max_length=200)] | None = None
    error: Annotated[str, StringConstraints(max_length=2000)] | None = None


class ReplayOut(BaseModel):
    id: str
    workflow_id: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    from_seq: int
    to_seq: int
    reason: str
    runtime_version: str
    first_divergent_seq: int | None
    explanation: str
    safety_violations: list[str]
