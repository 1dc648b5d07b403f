"""The shapes of the JSON the domain keeps and passes around, named once (docs/API.md is their contract).

``Json`` is any value a JSON document holds: what an agent sends in a step's input or output, its opaque
state, a checkpoint's context. Code that reads into it narrows first (``isinstance``), so a field the agent
spelled differently is a branch the type checker makes us write, not a ``KeyError`` at run time.

The TypedDicts are what the console itself writes: a recorded step as the resume state lists it, a step of
the plan an agent says it will take if resumed, and the resume state a checkpoint opens with; what it sends
an agent's runtime (a decision, a stand-down, a replay request, a step report's instruction); and the SLA
terms a checkpoint freezes when it opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict

if TYPE_CHECKING:
    from .business_time import HoursDict

Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, Json]"


class StepRecord(TypedDict):
    """One recorded step as the resume state and the API show it (``Step.as_dict``)."""

    seq: int
    name: str
    kind: str
    status: str
    input: Json
    output: Json
    verified: bool
    promise: str | None
    idempotency_key: str | None
    external_ref: str | None


class PlanStep(TypedDict):
    """One step the agent will take if resumed (endpoint 4's ``plan``, normalised; a fork's opening plan)."""

    name: str
    kind: str
    amount: str | None
    currency: str | None
    moves_money: bool


class ResumeState(TypedDict):
    """The minimum that makes the next step safe (DESIGN.md "Resume state"), computed from the steps."""

    committed: list[StepRecord]
    pending: StepRecord | None
    last_verified_output: Json
    promises: list[str]
    unknown_effects: list[StepRecord]
    state: Json
    plan: list[PlanStep] | None


class RetryTarget(TypedDict):
    """For a ``retry_step`` decision: the failed effect the agent attempts again, under its key."""

    seq: int
    name: str
    idempotency_key: str | None
    attempt: int


class FailoverNote(TypedDict):
    from_agent: str


class DecisionPayload(TypedDict):
    """What an agent's resume endpoint receives (docs/API.md, "Resume delivery")."""

    workflow_id: str
    external_id: str
    checkpoint_id: str
    action: str
    instructions: str
    confirmations: dict[str, str]
    confirmation_refs: dict[str, str]
    resume_state: ResumeState
    new_owner: str | None
    delivery_id: str
    retry: RetryTarget | None
    failover: FailoverNote | None


class StandDownPayload(TypedDict):
    """What the replaced agent's resume endpoint receives after a failover."""

    workflow_id: str
    external_id: str
    checkpoint_id: str
    action: str
    taken_over_by: str | None
    delivery_id: str


class HandoffPacket(TypedDict):
    """Who takes a handed-off workflow over (a username or a human process) and the note for them."""

    to: str
    note: str


class EscalationSpec(TypedDict):
    """One level of an escalation chain as a checkpoint keeps it (``EscalationLevel.freeze``)."""

    delay: int
    notify: bool
    reassign: bool
    user: int | None
    group: int | None
    team: str | None
    target: str
    stop_once_claimed: bool
    every: int
    repeats: int


class SlaTerms(TypedDict):
    """The SLA terms frozen into a checkpoint when it opens (``SLAPolicy.freeze``); times in seconds."""

    policy_id: int | None
    policy: str
    claim_target: int | None
    claim_lead: int
    decision_target: int
    decision_lead: int
    hours: HoursDict | None
    calendar: str | None
    watchers: int | None
    reminder: int | None
    release: int | None
    escalations: list[EscalationSpec]


class DrillFault(TypedDict):
    """The fault a drill asks the agent's runtime to carry out (docs/API.md, "Drills")."""

    id: str
    fault: str
    at_seq: int | None
    silent_minutes: int


class HoldPause(TypedDict):
    """A hold's order to stop at a step report (docs/API.md, "Holds")."""

    checkpoint_id: str
    reason: str
    hold_id: str
    message: str


class StepInstruction(TypedDict, total=False):
    """What a step report's answer tells the runtime beside the steps: a drill's fault, a hold's pause."""

    drill: DrillFault
    pause: HoldPause


class ReplayStep(TypedDict):
    """A recorded step a replay sends the runtime; an effect carries what it recorded instead of running again."""

    seq: int
    name: str
    kind: str
    input: Json
    recorded_output: NotRequired[Json]
    idempotency_key: NotRequired[str | None]
    external_ref: NotRequired[str | None]


class ReplayRequest(TypedDict):
    """What the runtime's replay endpoint receives (docs/API.md, "Replaying a step range")."""

    replay_id: str
    workflow_id: str
    external_id: str
    kind: str
    from_seq: int
    to_seq: int
    deadline: str
    results_path: str
    steps: list[ReplayStep]
