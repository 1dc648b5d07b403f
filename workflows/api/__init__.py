"""The Agent API v1 (docs/API.md): agent runtimes report workflows, steps and checkpoints.

The contract is public: paths, field names and status codes follow
/docs/API.md exactly. Every answer is JSON, errors included:
``{"error": {"code", "message", "field"}}``. An agent sees only its own
workflows; anyone else's id answers 404, never 403, so ids leak nothing.

One module per resource (workflows, steps, checkpoints), each with its own router; the
schemas, errors and authentication they share sit beside them.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import URLPattern, re_path
from ninja import NinjaAPI

from access.rules import AGENT, PUBLIC, declare, public

from . import checkpoints, replays, steps, workflows
from .auth import AgentRateLimit, AgentToken
from .errors import HANDLERS, error_response
from .json_body import StrictJSONParser
from .openapi import with_storage_rules
from .schemas import CheckpointIn, CheckpointOut, DecisionOut, StepIn, WorkflowIn, WorkflowOut

__all__ = [
    "AgentRateLimit",
    "CheckpointIn",
    "CheckpointOut",
    "DecisionOut",
    "StepIn",
    "WorkflowIn",
    "WorkflowOut",
    "api",
    "cache",
]


def _json_fallbacks(view: Any) -> Any:
    """Answer ninja's plain-text 405 and Django's HTML 404 in the API's JSON error shape."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response: HttpResponse = view(request, *args, **kwargs)
        except Http404:
            return unknown_path(request)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = error_response(
                405, "method_not_allowed", f"{request.method} is not allowed here; use {allowed}."
            )
            response["Allow"] = allowed
        return response

    return wrapper


def unknown_path(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    return error_response(404, "not_found", "There is no such endpoint; the API is described at /api/v1/openapi.json.")


class RecoveryAPI(NinjaAPI):
    def _get_urls(self) -> list[Any]:
        # Every operation needs an agent token (AgentToken below); the schema and the JSON 404s are public.
        patterns = super()._get_urls()
        for pattern in patterns:
            if isinstance(pattern, URLPattern):
                rule = PUBLIC if pattern.name in ("openapi-json", "api-root") else AGENT
                pattern.callback = declare(rule)(_json_fallbacks(pattern.callback))
        return [*patterns, re_path(r"^.*$", public(unknown_path))]

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None) -> Any:
        # The parser's rules (no NUL anywhere in a body) stated where clients read them.
        return with_storage_rules(super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params))

    def get_openapi_operation_id(self, operation: Any) -> str:
        # Stable ids from before the split by resource (workflows_api_<view>): generated clients use them.
        return f"workflows_api_{operation.view_func.__name__}"


api = RecoveryAPI(
    title="Recovery Console Agent API",
    version="1",
    urls_namespace="api",
    description="Agent runtimes report workflows, steps and checkpoints; see docs/API.md.",
    # The interactive docs page loads assets from a CDN that production networks cannot reach.
    docs_url=None,
    auth=AgentToken(),
    throttle=AgentRateLimit(),
    parser=StrictJSONParser(),
    renderer=steps.RENDERER,  # the batch endpoint renders its answer with it directly
)
for _exc, _handler in HANDLERS.items():
    api.add_exception_handler(_exc, _handler)
for _router in (workflows.router, steps.router, checkpoints.router, replays.router):
    api.add_router("", _router)
