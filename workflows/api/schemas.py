"""Request and response bodies of the agent API; lengths match the model columns."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from ..models import Action, Checkpoint, Decision, Step, Workflow
from ..models.runbooks import AGENT_REASONS

if TYPE_CHECKING:
    from workflows.shapes import PlanStep

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
    ReasonValue = one_of(AGENT_REASONS)
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


def _integral(value: Any) -> Any:
    # JSON has one number type, and JSON Schema's "integer" is any number with no fraction: 3.0 and 3e0 are
    # the integer 3. Strictness is about types, not spelling: 3.5, "3" and true are still refused.
    return int(value) if isinstance(value, float) and value.is_integer() else value


Seq = Annotated[int, Field(ge=1, le=MAX_SEQ), BeforeValidator(_integral)]

# Who may own a workflow depends on the console's users, which no schema can list (and must not: the names
# are not the agent's to learn). "format": "username" says what the value is; the description says the rule.
OWNER_RULE = (
    "The username of an active operator or admin of this console; null or absent means the agent's owner. "
    "Any other name, whether or not it exists, is 422 unknown_owner."
)
Owner = Annotated[
    str,
    StringConstraints(min_length=1, max_length=150),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 150, "format": "username"}),
]


class Strict(BaseModel):
    # Strict: "3" is not a seq and true is not an int; agents must send the types the contract names.
    model_config = ConfigDict(strict=True)


class WorkflowIn(Strict):
    external_id: Text200
    kind: Text100
    title: Text300
    owner: Owner | None = Field(default=None, description=OWNER_RULE)
    context: dict[str, Any] | None = None


# The schema states what the validator below enforces, so that a generated client or fuzzer knows it.
EFFECTS_NEED_A_KEY: JsonDict = {
    "if": {"properties": {"kind": {"const": Step.Kind.EFFECT.value}}, "required": ["kind"]},
    "then": {"properties": {"idempotency_key": {"type": "string"}}, "required": ["idempotency_key"]},
}


class StepIn(Strict):
    model_config = ConfigDict(json_schema_extra=EFFECTS_NEED_A_KEY)

    seq: Seq
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
                "An effect step needs an idempotency_key, so that it is never executed twice",
            )
        return value


class JournalPendingIn(Strict):
    seq: Seq
    name: Text200


class DrillJournalIn(Strict):
    """docs/API.md "Drill journal": what the runtime holds at a drill's fault, just before it carries it out."""

    committed: list[Text200] = Field(default_factory=list, max_length=500)  # committed effects' idempotency keys
    pending: JournalPendingIn | None = None  # the action it was about to take
    promises: list[Annotated[str, StringConstraints(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=200
    )


class DrillJournalOut(BaseModel):
    journal: dict[str, Any]


Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
MAX_PLAN_STEPS = 200
# An amount is a non-negative decimal: a string of digits (at most 18 before the point and 18 after it) or a
# JSON number up to 999,999,999,999,999,999. The schema says exactly this, so clients can check it first.
AMOUNT_PATTERN = r"^[0-9]{1,18}(\.[0-9]{1,18})?$"
MAX_AMOUNT = 999_999_999_999_999_999
Amount = Annotated[
    str | int | float,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": AMOUNT_PATTERN},
                {"type": "number", "minimum": 0, "maximum": MAX_AMOUNT},
            ]
        }
    ),
]
# What the validators of PlanStepIn enforce, stated in its schema (JSON Schema if/then).
PLAN_STEP_RULES: JsonDict = {
    "allOf": [
        # An amount needs its currency (currency_required).
        {
            "if": {"properties": {"amount": {"not": {"type": "null"}}}, "required": ["amount"]},
            "then": {"properties": {"currency": {"type": "string"}}, "required": ["currency"]},
        },
        # Only an effect moves money (money_on_non_effect): moves_money is false, or absent with no amount.
        {
            "if": {"properties": {"kind": {"not": {"const": Step.Kind.EFFECT.value}}}, "required": ["kind"]},
            "then": {
                "anyOf": [
                    {"properties": {"moves_money": {"const": False}}, "required": ["moves_money"]},
                    {"properties": {"moves_money": {"type": "null"}, "amount": {"type": "null"}}},
                ]
            },
        },
    ]
}


class PlanStepIn(Strict):
    """One step the agent will take if resumed. For an effect that moves money: the amount at stake."""

    model_config = ConfigDict(json_schema_extra=PLAN_STEP_RULES)

    name: Text200
    kind: StepKind
    amount: Amount | None = None
    currency: Currency | None = None
    moves_money: bool | None = None

    @field_validator("amount")
    @classmethod
    def amount_is_a_decimal(cls, value: str | int | float | None) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            if re.fullmatch(AMOUNT_PATTERN, value) is None:
                raise PydanticCustomError(
                    "invalid_amount",
                    'amount must be a decimal string such as "120.60" (digits, at most 18 on each side of the point)',
                )
            return value
        if not 0 <= value <= MAX_AMOUNT:
            raise PydanticCustomError("invalid_amount", "amount must be a number from 0 to 999999999999999999")
        return format(Decimal(str(value)), "f")

    @model_validator(mode="after")
    def money_belongs_to_effects(self) -> PlanStepIn:
        if self.amount is not None and self.currency is None:
            raise PydanticCustomError("currency_required", "an amount needs its currency (ISO 4217, e.g. EUR)")
        if self.moves_money is None:
            self.moves_money = self.amount is not None
        if self.moves_money and self.kind != Step.Kind.EFFECT:
            raise PydanticCustomError("money_on_non_effect", "only an effect step can move money")
        return self

    def normalized(self) -> PlanStep:
        return {
            "name": self.name,
            "kind": self.kind,
            "amount": None if self.amount is None else str(self.amount),  # a decimal string once validated
            "currency": self.currency,
            "moves_money": bool(self.moves_money),
        }


MAX_BATCH_STEPS = 500


class StepBatchIn(Strict):
    steps: list[StepIn] = Field(
        min_length=1,
        max_length=MAX_BATCH_STEPS,
        description=("Each seq at most once per batch (422 duplicate_seq); steps are judged in the order sent."),
    )


class CheckpointIn(Strict):
    reason: ReasonValue
    detail: str | None = ""
    at_seq: Seq | None = None
    state: dict[str, Any] | None = None
    # Optional (API v1 stays compatible): without it the console cannot know what a resume will do.
    plan: list[PlanStepIn] | None = Field(default=None, max_length=MAX_PLAN_STEPS)

    def plan_steps(self) -> list[PlanStep] | None:
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
        default=None, description="The agent's remaining plan as sent with the checkpoint; null when it sent none."
    )


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
    capabilities: list[Literal["replay", "fork", "failover", "drill", "drill_sandbox"]]
    runtime_version: Annotated[str, StringConstraints(max_length=200)] | None = None
    kinds: list[Text100] | None = None
    # Which step kinds' edited input the runtime applies in a fork (kept when absent; none: edits refused).
    fork_edits: list[StepKind] | None = None


class AgentOut(BaseModel):
    name: str
    capabilities: list[str]
    runtime_version: str
    kinds: list[str]
    replay_endpoint: bool
    fork_edits: list[str]


class ReplayResultIn(Strict):
    seq: Seq
    output: Any = None
    effects: list[Any] | None = None


class ReplayResultsIn(Strict):
    # Either the results or why there are none (422 missing_field otherwise).
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"results": {"type": "array"}}, "required": ["results"]},
                {"properties": {"error": {"type": "string", "minLength": 1}}, "required": ["error"]},
            ]
        }
    )

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
