"""The JSON the demo agent reads and writes, named once: the console's answers it reads (docs/API.md), the
state it keeps in a checkpoint and in its journal, and what its simulated systems and model answer.

The console's answers are ``total=False``: the agent reads each field with ``.get`` and a default, as it
would an answer from any service it does not own. The steps inside them are the console's own
``StepRecord`` (workflows/shapes.py), which the API shows as the resume state lists them.
"""

from __future__ import annotations

from typing import TypedDict

from workflows.shapes import JsonObject, StepRecord


class Ticket(TypedDict):
    """What the tickets system answers for a ticket (``Tickets.read``)."""

    ticket: str
    customer: str
    email: str
    subject: str
    amount: str
    currency: str


class ModelAnswer(TypedDict, total=False):
    """What the model answers: a decision with an amount for the money workflows, a category for triage."""

    decision: str
    amount: str
    currency: str
    rationale: str
    category: str
    priority: str


class Fork(TypedDict, total=False):
    """Where a fork came from and the (edited) input of the step it restarts at (the console writes it)."""

    from_workflow_id: str
    from_external_id: str
    from_seq: int
    step: str
    kind: str
    input: JsonObject
    input_edited: bool


class RunState(TypedDict, total=False):
    """The agent's own state in a checkpoint (``Run.state``); a fork's or a console-opened checkpoint's may
    lack any of it."""

    kind: str
    remaining: list[str]
    ticket_id: str
    ticket: Ticket | None
    decision: ModelAnswer | None
    refs: dict[str, str]
    fork: Fork


class ResumeState(TypedDict, total=False):
    """The resume state as a checkpoint or a delivery carries it (the parts the agent reads)."""

    committed: list[StepRecord]
    pending: StepRecord | None
    unknown_effects: list[StepRecord]
    promises: list[str]
    state: RunState


class CheckpointBrief(TypedDict):
    """A checkpoint as a workflow's answer lists it."""

    id: str
    status: str


class WorkflowAnswer(TypedDict, total=False):
    """``GET /workflows/{id}`` and the create's answer: the parts the agent reads."""

    id: str
    status: str
    steps: list[StepRecord]
    checkpoints: list[CheckpointBrief]


class Decision(TypedDict, total=False):
    """An operator's decision: delivered to the resume endpoint, or found by polling a checkpoint (then the
    agent adds the resume state it holds)."""

    workflow_id: str
    external_id: str
    checkpoint_id: str
    action: str
    instructions: str
    confirmations: dict[str, str]
    resume_state: ResumeState
    new_owner: str | None
    taken_over_by: str
    delivery_id: str


class CheckpointAnswer(TypedDict, total=False):
    """``GET /checkpoints/{id}`` and the answer to opening one: the parts the agent reads."""

    id: str
    status: str
    resume_state: ResumeState
    decision: Decision | None


class JournalRun(TypedDict):
    """A run as the agent's journal keeps it (``Journal.run``)."""

    external_id: str
    agent: str
    kind: str
    workflow_id: str
    checkpoint_id: str
    status: str
    state: RunState
    resume_state: ResumeState
    updated_at: str


class JournalDelivery(TypedDict):
    """A delivery the resume endpoint accepted (``Journal.unfinished_deliveries``)."""

    delivery_id: str
    agent: str
    payload: Decision
    status: str
    received_at: str
    finished_at: str | None
