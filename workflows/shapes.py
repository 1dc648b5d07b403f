"""The shapes of the JSON the domain keeps and passes around, named once (docs/API.md is their contract).

``Json`` is any value a JSON document holds: what an agent sends in a step's input or output, its opaque
state, a checkpoint's context. Code that reads into it narrows first (``isinstance``), so a field the agent
spelled differently is a branch the type checker makes us write, not a ``KeyError`` at run time.

The TypedDicts are what the console itself writes: a recorded step as the resume state lists it, a step of
the plan an agent says it will take if resumed, and the resume state a checkpoint opens with.
"""

from __future__ import annotations

from typing import TypeAlias, TypedDict

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
