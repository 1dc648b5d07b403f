"""The Agent API v1 (docs/API.md): agent runtimes report workflows, steps and checkpoints.

The contract is public: paths, field names and status codes follow
/docs/API.md exactly. Every answer is JSON, errors included:
``{"error": {"code", "message", "field"}}``. An agent sees only its own
workflows; anyone else's id answers 404, never 403, so ids leak nothing.
"""

from __future__ import annotations

import functools
import logging
import time
from datetime import datetime
from typing import Annotated, Any, Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, re_path
from django.utils import timezone
from ninja import NinjaAPI, Status
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.security import HttpBearer
from ninja.throttling import BaseThrottle
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from .api_json import BodyRejected, StrictJSONParser, dotted
from .models import Agent, Checkpoint, Conflict, Decision, Event, IllegalTransition, Step, Workflow

logger = logging.getLogger(__name__)

# PositiveIntegerField is a 32-bit column on PostgreSQL; larger values would be a DB error.
MAX_SEQ = 2_147_483_647


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
    kind: Literal["model", "tool", "effect", "message"]
    status: Literal["pending", "committed", "failed"]
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
    reason: Literal["model_timeout", "tool_error", "rate_limit", "provider_change", "untrusted_output",
                    "manual", "other"]
    detail: str | None = ""
    at_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ)
    state: dict[str, Any] | None = None


class FinishIn(Strict):
    status: Literal["completed", "failed"]
    summary: str | None = ""


class StepOut(BaseModel):
    seq: int
    name: str
    kind: str
    status: Literal["pending", "committed", "failed"]
    input: Any
    output: Any
    verified: bool
    promise: str | None
    idempotency_key: str | None
    external_ref: str | None


class CheckpointSummaryOut(BaseModel):
    id: str
    status: Literal["open", "claimed", "decided", "resolved"]
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
    status: Literal["running", "paused", "resuming", "completed", "failed", "handed_off", "aborted"]
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
    action: Literal["resume", "handoff", "retry_step", "abort"]
    instructions: str
    confirmations: dict[str, str]
    new_owner: str | None
    decided_by: str
    decided_at: datetime
    state: Literal["queued", "running", "succeeded", "failed"]
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


# --- Errors --------------------------------------------------------------------

class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def error_response(status: int, code: str, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "field": field}}, status=status)


def not_found(what: str) -> ApiError:
    # The same answer for "missing" and "another agent's": ids must not reveal other agents' data.
    return ApiError(404, "not_found", f"No {what} with this id belongs to your agent.")


_VALIDATION_CODES = {
    "missing": "missing_field", "literal_error": "invalid_choice", "enum": "invalid_choice",
    "string_too_long": "too_long", "string_too_short": "too_short",
    "greater_than_equal": "out_of_range", "less_than_equal": "out_of_range",
    "greater_than": "out_of_range", "less_than": "out_of_range",
}


def _validation_code(kind: str) -> str:
    if kind in _VALIDATION_CODES:
        return _VALIDATION_CODES[kind]
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return "wrong_type"
    return kind if kind.replace("_", "").isalpha() and kind.islower() else "invalid_value"


def _field(loc: tuple[Any, ...]) -> str | None:
    # ninja reports ("body", <parameter name>, ...): the agent only knows the part after them.
    parts = loc[2:] if loc[:1] == ("body",) else loc[1:]
    return dotted(tuple(parts))


def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    first = exc.errors[0]
    field = _field(tuple(first.get("loc", ())))
    code = _validation_code(first.get("type", ""))
    if field is None:
        message = "The body must be a JSON object with the fields this endpoint documents."
    else:
        message = f"{field}: {first.get('msg', 'invalid value').rstrip('.')}."
    if len(exc.errors) > 1:
        message = message[:-1] + f"; {len(exc.errors) - 1} more problem(s) in this body."
    return error_response(422, code, message, field)


_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "body_too_large", 429: "rate_limited"}


def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyRejected):  # ninja wraps every parser error in a 400
        return error_response(cause.status, cause.code, cause.message, cause.field)
    message = str(exc).rstrip(".") + "."
    return error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), message)


def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = error_response(401, "unauthorized",
                              "Send a valid agent token as 'Authorization: Bearer <token>'.")
    response["WWW-Authenticate"] = 'Bearer realm="recovery-console"'
    return response


def on_throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    # ninja adds the Retry-After header from AgentRateLimit.wait() after this returns.
    return error_response(429, "rate_limited",
                          f"Rate limit of {settings.API_RATE_LIMIT_PER_MINUTE} requests per minute reached; "
                          "retry after the number of seconds in the Retry-After header.")


def on_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.warning("Agent API: database unavailable: %s", exc)
    response = error_response(503, "unavailable", "The console's database is unavailable; retry shortly.")
    response["Retry-After"] = "5"
    return response


def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("Agent API: unhandled error on %s %s", request.method, request.path)
    return error_response(500, "internal_error",
                          "The console failed to handle this request; it has been logged. Retry later.")


HANDLERS: dict[type[Exception], Any] = {
    ApiError: lambda request, exc: error_response(exc.status, exc.code, exc.message, exc.field),
    ValidationError: on_validation_error,
    HttpError: on_http_error,
    AuthenticationError: on_auth_error,
    Throttled: on_throttled,
    Http404: lambda request, exc: error_response(404, "not_found", "Not found."),
    Conflict: lambda request, exc: error_response(409, "conflict", str(exc)),
    IllegalTransition: lambda request, exc: error_response(409, "conflict", str(exc)),
    OperationalError: on_unavailable,
    InterfaceError: on_unavailable,
    Exception: on_unexpected,
}


# --- Auth, rate limit, the API object ---------------------------------------------

class AgentToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Agent | None:
        if not token or len(token) > 256:
            return None
        return Agent.authenticate(token)


class AgentRateLimit(BaseThrottle):
    """A fixed one-minute window per agent, counted in the cache shared by every web process."""

    WINDOW = 60

    def allow_request(self, request: HttpRequest) -> bool:
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        agent = getattr(request, "auth", None)
        if not limit or not isinstance(agent, Agent):
            return True
        # The token hash, not the pk: a pk can be reused (SQLite), a token never is.
        key = f"recovery-console:api-rate:{agent.token_hash[:24]}:{int(time.time() // self.WINDOW)}"
        try:
            cache.add(key, 0, timeout=self.WINDOW * 2)
            count = cache.incr(key)
        except ValueError:  # the key expired between add() and incr()
            cache.set(key, 1, timeout=self.WINDOW * 2)
            count = 1
        except Exception:  # a cache outage must not take the API down with it
            logger.warning("Agent API: rate limit cache unavailable; request let through", exc_info=True)
            return True
        return count <= limit

    def wait(self) -> float:
        # Stateless, so one throttle object can serve every thread: the window ends on the minute.
        return self.WINDOW - time.time() % self.WINDOW


def _json_fallbacks(view: Any) -> Any:
    """Answer ninja's plain-text 405 and Django's HTML 404 in the API's JSON error shape."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            return unknown_path(request)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = error_response(405, "method_not_allowed",
                                      f"{request.method} is not allowed here; use {allowed}.")
            response["Allow"] = allowed
        return response

    return wrapper


def unknown_path(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    return error_response(404, "not_found", "There is no such endpoint; the API is described at "
                                            "/api/v1/openapi.json.")


class RecoveryAPI(NinjaAPI):
    def _get_urls(self) -> list[Any]:
        patterns = super()._get_urls()
        for pattern in patterns:
            if isinstance(pattern, URLPattern):
                pattern.callback = _json_fallbacks(pattern.callback)
        return [*patterns, re_path(r"^.*$", unknown_path)]


api = RecoveryAPI(
    title="Recovery Console Agent API", version="1", urls_namespace="api",
    description="Agent runtimes report workflows, steps and checkpoints; see docs/API.md.",
    # The interactive docs page loads assets from a CDN that production networks cannot reach.
    docs_url=None,
    auth=AgentToken(), throttle=AgentRateLimit(), parser=StrictJSONParser(),
)
for _exc, _handler in HANDLERS.items():
    api.add_exception_handler(_exc, _handler)


# --- Reading and shaping -------------------------------------------------------------

def _agent(request: HttpRequest) -> Agent:
    return request.auth  # type: ignore[attr-defined]


def _pk(raw: str) -> int | None:
    # Ids are opaque to agents; anything but a bigint-sized number cannot be one of ours.
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def own_workflow(request: HttpRequest, workflow_id: str) -> Workflow:
    pk = _pk(workflow_id)
    workflow = _agent(request).workflows.filter(pk=pk).first() if pk else None
    if workflow is None:
        raise not_found("workflow")
    workflow.touch()  # any call counts as a sign of life for the silence sweep
    return workflow


def _username(user: Any) -> str | None:
    return user.get_username() if user else None


def checkpoint_summary(checkpoint: Checkpoint) -> dict:
    return {"id": str(checkpoint.pk), "status": checkpoint.status, "reason": checkpoint.reason,
            "detail": checkpoint.detail, "at_seq": checkpoint.at_seq, "opened_at": checkpoint.opened_at,
            "due_at": checkpoint.due_at, "breached": checkpoint.is_breached,
            "resolved_at": checkpoint.resolved_at}


def workflow_body(workflow: Workflow) -> dict:
    workflow.refresh_from_db()  # callers changed it through other instances (open_for, touch)
    return {
        "id": str(workflow.pk), "external_id": workflow.external_id, "kind": workflow.kind,
        "title": workflow.title, "status": workflow.status, "owner": _username(workflow.owner),
        "agent": workflow.agent.name, "context": workflow.context, "summary": workflow.summary,
        "created_at": workflow.created_at, "last_activity_at": workflow.last_activity_at,
        "finished_at": workflow.finished_at,
        "steps": [step.as_dict() for step in workflow.steps.order_by("seq")],
        "checkpoints": [checkpoint_summary(c) for c in workflow.checkpoints.order_by("opened_at", "pk")],
    }


def decision_body(decision: Decision) -> dict:
    return {
        "action": decision.action, "instructions": decision.instructions,
        "confirmations": decision.confirmations,
        "new_owner": _username(decision.new_owner) or decision.handoff_to or None,
        "decided_by": decision.decided_by.get_username(), "decided_at": decision.decided_at,
        "state": decision.status, "delivery_id": str(decision.delivery_id),
    }


def checkpoint_body(checkpoint: Checkpoint, decision: Decision | None = None) -> dict:
    runbook = checkpoint.runbook
    return {
        **checkpoint_summary(checkpoint),
        "workflow_id": str(checkpoint.workflow_id), "assignee": _username(checkpoint.assignee),
        "warn_at": checkpoint.warn_at,
        "runbook": {"slug": runbook.slug, "title": runbook.title, "url": runbook.url or None} if runbook else None,
        "resume_state": checkpoint.resume_state,
        "decision": decision_body(decision) if decision else None,
    }


# --- 1, 2. Workflows ----------------------------------------------------------------

def _owner(username: str | None, agent: Agent) -> Any:
    if username is None:
        return agent.owner
    User = get_user_model()
    owner = User.objects.filter(**{User.USERNAME_FIELD: username}, is_active=True).first()
    if owner is None:
        raise ApiError(422, "unknown_owner", f"No active console user is called {username!r}.", "owner")
    return owner


def _create_workflow(agent: Agent, payload: WorkflowIn, owner: Any) -> Workflow | None:
    """The new workflow, or None when a concurrent create with the same external_id won."""
    try:
        with transaction.atomic():
            workflow = Workflow.objects.create(
                agent=agent, external_id=payload.external_id, kind=payload.kind, title=payload.title,
                owner=owner, context=payload.context or {})
            Event.record(workflow, "created", actor=agent, data={"external_id": payload.external_id})
    except IntegrityError:
        if agent.workflows.filter(external_id=payload.external_id).exists():
            return None
        raise
    return workflow


@api.post("/workflows", response={200: WorkflowOut, 201: WorkflowOut, **ERRORS})
def create_workflow(request: HttpRequest, payload: WorkflowIn) -> Status:
    """Start a workflow. The same external_id again answers 200 with the existing one."""
    agent = _agent(request)
    # A resend answers what the first request made, even if its owner was deactivated since.
    workflow = agent.workflows.filter(external_id=payload.external_id).first()
    if workflow is None:
        created = _create_workflow(agent, payload, _owner(payload.owner, agent))
        if created is not None:
            return Status(201, workflow_body(created))
        workflow = agent.workflows.get(external_id=payload.external_id)
    workflow.touch()
    return Status(200, workflow_body(workflow))


@api.get("/workflows/{workflow_id}", response={200: WorkflowOut, **ERRORS})
def get_workflow(request: HttpRequest, workflow_id: str) -> dict:
    """The workflow with its steps (by seq) and checkpoints."""
    return workflow_body(own_workflow(request, workflow_id))


# --- 3. Steps ------------------------------------------------------------------------

IDENTITY_FIELDS = ("name", "kind", "input", "idempotency_key")
SET_ON_TRANSITION = ("status", "output", "verified", "promise", "external_ref")
# A null in a resend means "not repeated", not "erase": commit reports need not resend the input.
KEPT_WHEN_NULL = ("input", "output", "promise", "idempotency_key", "external_ref")


def _canonical(value: Any) -> Any:
    """A value as comparable after a trip through the database.

    jsonb keeps numbers as decimals: 1.5e300 comes back as a 301-digit integer, which Python
    compares exactly with the float and finds different. Compared as floats, a resend of the
    same number is the same number; True stays distinct from 1.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int) and abs(value) > 2**53:
        return float(value)
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return value


def _wanted(step: Step, payload: StepIn) -> dict:
    """The step as this report would leave it."""
    sent, recorded = payload.model_dump(), step.as_dict()
    return {f: recorded[f] if f in KEPT_WHEN_NULL and sent[f] is None else sent[f] for f in recorded}


def _key_taken(seq: int) -> ApiError:
    return ApiError(409, "idempotency_key_taken",
                    f"Step {seq} of this workflow already uses this idempotency_key; "
                    "an effect is recorded once.", "idempotency_key")


def _key_holder(workflow: Workflow, key: str | None) -> Step | None:
    return workflow.steps.filter(idempotency_key=key).first() if key else None


def _create_step(workflow: Workflow, payload: StepIn, agent: Agent) -> Step | None:
    """The new step, or None when a step with this seq exists by now (a concurrent report won)."""
    if holder := _key_holder(workflow, payload.idempotency_key):
        if holder.seq == payload.seq:
            return None
        raise _key_taken(holder.seq)
    try:
        with transaction.atomic():
            step = Step.objects.create(workflow=workflow, **payload.model_dump())
            Event.record(step, f"step_{step.status}", actor=agent,
                         data={"seq": step.seq, "name": step.name, "kind": step.kind})
    except IntegrityError:
        if workflow.steps.filter(seq=payload.seq).exists():
            return None
        if holder := _key_holder(workflow, payload.idempotency_key):
            raise _key_taken(holder.seq) from None
        raise
    return step


def _update_step(step: Step, payload: StepIn, agent: Agent) -> Step:
    """Identical resend: unchanged. pending -> committed|failed: applied. Anything else: 409."""
    wanted, recorded = _wanted(step, payload), step.as_dict()
    if _canonical(wanted) == _canonical(recorded):
        return step
    if step.status != Step.Status.PENDING:
        raise ApiError(409, "step_conflict", f"Step {step.seq} is already {step.status}; a recorded step "
                                             "cannot change (resend it unchanged or report a new seq).")
    if changed := [f for f in IDENTITY_FIELDS if _canonical(wanted[f]) != _canonical(recorded[f])]:
        raise ApiError(409, "step_conflict", f"Step {step.seq} was recorded with a different "
                                             f"{', '.join(changed)}; report a new seq instead.", changed[0])
    if wanted["status"] not in Step.TRANSITIONS[Step.Status.PENDING]:
        raise ApiError(409, "step_conflict", f"Step {step.seq} is pending; it can only move to committed "
                                             "or failed.", "status")
    # The one place status changes happen: a compare-and-set that writes the step's Event.
    won = step.move(wanted["status"], actor=agent, verb=f"step_{wanted['status']}",
                    data={"seq": step.seq, "name": step.name}, updated_at=timezone.now(),
                    **{f: wanted[f] for f in SET_ON_TRANSITION if f != "status"})
    # Lost a race with another report of this step: judge this one against what won.
    return step if won else _update_step(step, payload, agent)


@api.post("/workflows/{workflow_id}/steps", response={200: StepOut, 201: StepOut, **ERRORS})
def report_step(request: HttpRequest, workflow_id: str, payload: StepIn) -> Status:
    """Record a step: 201 new, 200 identical resend or pending -> committed|failed, 409 otherwise."""
    agent = _agent(request)
    workflow = own_workflow(request, workflow_id)
    if workflow.is_terminal:
        raise ApiError(409, "workflow_finished", f"The workflow is {workflow.status}; it takes no more steps.")
    step = workflow.steps.filter(seq=payload.seq).first()
    if step is None:
        created = _create_step(workflow, payload, agent)
        if created is not None:
            return Status(201, created.as_dict())
        step = workflow.steps.get(seq=payload.seq)
    return Status(200, _update_step(step, payload, agent).as_dict())


# --- 4, 5. Checkpoints -------------------------------------------------------------------

def _checkpoint_conflict(workflow: Workflow, exc: Conflict) -> ApiError:
    workflow.refresh_from_db()
    if unresolved := workflow.checkpoints.unresolved().first():
        return ApiError(409, "checkpoint_open", f"Checkpoint {unresolved.pk} is still {unresolved.status}; "
                                                "a workflow has at most one open checkpoint.")
    if workflow.is_terminal:
        return ApiError(409, "workflow_finished", f"The workflow is {workflow.status}; it cannot pause.")
    return ApiError(409, "conflict", str(exc))


def _resent_checkpoint(workflow: Workflow, payload: CheckpointIn) -> Checkpoint | None:
    """The unresolved checkpoint this very request opened before (its answer was lost), if any."""
    checkpoint = workflow.checkpoints.unresolved().filter(opened_by_console=False).first()
    if checkpoint is None:
        return None
    sent = (payload.reason, payload.detail or "", payload.at_seq, _canonical(payload.state or {}))
    recorded = (checkpoint.reason, checkpoint.detail, checkpoint.at_seq, _canonical(checkpoint.state))
    return checkpoint if sent == recorded else None


@api.post("/workflows/{workflow_id}/checkpoints", response={200: CheckpointOut, 201: CheckpointOut, **ERRORS})
def open_checkpoint(request: HttpRequest, workflow_id: str, payload: CheckpointIn) -> Status:
    """Pause the workflow at a checkpoint for an operator; answers the computed resume state.

    An identical resend of the open checkpoint answers 200 with it; any other while one is open, 409."""
    workflow = own_workflow(request, workflow_id)
    try:
        checkpoint = Checkpoint.open_for(workflow, reason=payload.reason, detail=payload.detail or "",
                                         at_seq=payload.at_seq, state=payload.state or {},
                                         actor=_agent(request))
    except Conflict as exc:
        # Not a second checkpoint but this request again, its first answer lost (or a concurrent twin).
        if resent := _resent_checkpoint(workflow, payload):
            return Status(200, checkpoint_body(resent, visible_decision(resent, deliver=False)))
        raise _checkpoint_conflict(workflow, exc) from None
    return Status(201, checkpoint_body(checkpoint))


def visible_decision(checkpoint: Checkpoint, *, deliver: bool = True) -> Decision | None:
    """The decision the agent may act on. A proposal awaiting four eyes is not one yet; a failed
    delivery is not one any more (the checkpoint went back to the operators)."""
    decision = checkpoint.current_decision()
    if decision is None or decision.status == Decision.Status.PROPOSED:
        return None
    if deliver and decision.status == Decision.Status.QUEUED and decision.is_polled:
        # This fetch is the delivery for an agent without a resume endpoint.
        decision.mark_succeeded(how="fetched_by_agent")
        decision.refresh_from_db()
        checkpoint.refresh_from_db()
    return decision


@api.get("/checkpoints/{checkpoint_id}", response={200: CheckpointOut, **ERRORS})
def get_checkpoint(request: HttpRequest, checkpoint_id: str) -> dict:
    """The checkpoint and its decision. Agents without a resume endpoint poll this."""
    pk = _pk(checkpoint_id)
    checkpoint = (Checkpoint.objects.filter(pk=pk, workflow__agent=_agent(request))
                  .select_related("workflow__agent", "runbook", "assignee").first() if pk else None)
    if checkpoint is None:
        raise not_found("checkpoint")
    checkpoint.workflow.touch()
    decision = visible_decision(checkpoint)
    return checkpoint_body(checkpoint, decision)


# --- 6. Finish -------------------------------------------------------------------------

def _finish(workflow: Workflow, payload: FinishIn, agent: Agent) -> None:
    if workflow.is_terminal:
        raise ApiError(409, "workflow_finished", f"The workflow is already {workflow.status}.")
    try:
        won = workflow.finish(payload.status, payload.summary or "", actor=agent)
    except Conflict as exc:
        raise _checkpoint_conflict(workflow, exc) from None
    except IllegalTransition:
        raise ApiError(409, "conflict", f"A {workflow.status} workflow cannot finish yet.") from None
    if not won and workflow.status != payload.status:
        raise ApiError(409, "conflict", f"The workflow became {workflow.status} meanwhile; it cannot finish.")


@api.post("/workflows/{workflow_id}/finish", response={200: WorkflowOut, **ERRORS})
def finish_workflow(request: HttpRequest, workflow_id: str, payload: FinishIn) -> dict:
    """Close the workflow as completed or failed; 409 while a checkpoint is unresolved."""
    workflow = own_workflow(request, workflow_id)
    if workflow.status != payload.status:  # the same finish again is a harmless retry
        _finish(workflow, payload, _agent(request))
    return workflow_body(workflow)
