"""Additions to v1 for replays (docs/API.md, "Replaying a step range"): what the agent can do, and results
sent later for a long replay. Nothing here changes an endpoint of v1."""

from __future__ import annotations

import uuid
from typing import TypedDict

from django.http import HttpRequest
from ninja import Router

from ..models import Agent, ReplayRun
from .errors import ApiError, not_found
from .schemas import ERRORS, AgentOut, CapabilitiesIn, ReplayOut, ReplayResultsIn
from .shaping import calling_agent

router = Router()


class AgentBody(TypedDict):
    """The calling agent as ``GET /agent`` answers it."""

    name: str
    capabilities: list[str]
    runtime_version: str
    kinds: list[str]
    replay_endpoint: bool
    fork_edits: list[str]


class ReplayBody(TypedDict):
    """A replay as ``GET /replays/{id}`` answers it."""

    id: str
    workflow_id: str
    status: str
    from_seq: int
    to_seq: int
    reason: str
    runtime_version: str
    first_divergent_seq: int | None
    explanation: str
    safety_violations: list[str]


def agent_body(agent: Agent) -> AgentBody:
    return {
        "name": agent.name,
        "capabilities": list(agent.capabilities or []),
        "runtime_version": agent.runtime_version,
        "kinds": list(agent.kinds or []),
        "replay_endpoint": bool(agent.replay_url),
        "fork_edits": list(agent.fork_edits or []),
    }


def replay_body(run: ReplayRun) -> ReplayBody:
    return {
        "id": str(run.replay_id),
        "workflow_id": str(run.workflow_id),
        "status": run.status,
        "from_seq": run.from_seq,
        "to_seq": run.to_seq,
        "reason": run.reason,
        "runtime_version": run.runtime_version,
        "first_divergent_seq": run.first_divergent_seq,
        "explanation": run.explanation,
        "safety_violations": list(run.safety_violations or []),
    }


@router.get("/agent", response={200: AgentOut, **ERRORS})
def get_agent(request: HttpRequest) -> AgentBody:
    """The calling agent as the console knows it: its advertised capabilities."""
    return agent_body(calling_agent(request))


@router.post("/agent/capabilities", response={200: AgentOut, **ERRORS})
def advertise_capabilities(request: HttpRequest, payload: CapabilitiesIn) -> AgentBody:
    """The runtime says what it supports; the console offers operators only that (the URLs stay admin-set)."""
    agent = calling_agent(request)
    agent.advertise(
        sorted(set(payload.capabilities)),
        runtime_version=payload.runtime_version,
        kinds=payload.kinds,
        fork_edits=payload.fork_edits,
    )
    return agent_body(agent)


def _own_replay(request: HttpRequest, replay_id: str) -> ReplayRun:
    try:
        key = uuid.UUID(replay_id)
    except ValueError:
        raise not_found("replay") from None
    run = ReplayRun.objects.filter(replay_id=key, agent=calling_agent(request)).first()
    if run is None:
        raise not_found("replay")
    return run


@router.get("/replays/{replay_id}", response={200: ReplayOut, **ERRORS})
def get_replay(request: HttpRequest, replay_id: str) -> ReplayBody:
    """A long replay checks here whether an operator cancelled it."""
    return replay_body(_own_replay(request, replay_id))


@router.post("/replays/{replay_id}/results", response={200: ReplayOut, **ERRORS})
def post_replay_results(request: HttpRequest, replay_id: str, payload: ReplayResultsIn) -> ReplayBody:
    """Results of a replay the runtime accepted with 202 (or ``error``: why it could not replay)."""
    run = _own_replay(request, replay_id)
    agent = calling_agent(request)
    if payload.error:
        recorded = run.fail(f"The runtime could not replay: {payload.error}")
    elif payload.results is None:
        raise ApiError(422, "missing_field", "Send either results or error.", "results")
    else:
        recorded = run.record_results(payload.model_dump(), actor=agent)
    if not recorded:
        run.refresh_from_db()
        raise ApiError(409, "replay_finished", f"The replay is {run.status}; it takes no more results.")
    run.refresh_from_db()
    return replay_body(run)
