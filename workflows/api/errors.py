"""Every error answer of the agent API, in one JSON shape: {"error": {code, message, field}}."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from ..models import Conflict, IllegalTransition, Invalid
from .auth import TooManyFailures
from .json_body import BodyRejected, dotted

logger = logging.getLogger(__name__)


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
    "missing": "missing_field",
    "literal_error": "invalid_choice",
    "enum": "invalid_choice",
    "string_too_long": "too_long",
    "string_too_short": "too_short",
    "greater_than_equal": "out_of_range",
    "less_than_equal": "out_of_range",
    "greater_than": "out_of_range",
    "less_than": "out_of_range",
}


def _validation_code(kind: str) -> str:
    if kind in _VALIDATION_CODES:
        return _VALIDATION_CODES[kind]
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return "wrong_type"
    return kind if kind.replace("_", "").isalpha() and kind.islower() else "invalid_value"


def _field(loc: tuple[str | int, ...]) -> str | None:
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


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    429: "rate_limited",
}


def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyRejected):  # ninja wraps every parser error in a 400
        return error_response(cause.status, cause.code, cause.message, cause.field)
    message = str(exc).rstrip(".") + "."
    return error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), message)


def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = error_response(401, "unauthorized", "Send a valid agent token as 'Authorization: Bearer <token>'.")
    response["WWW-Authenticate"] = 'Bearer realm="recovery-console"'
    return response


def on_throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    # ninja adds the Retry-After header from AgentRateLimit.wait() after this returns.
    return error_response(
        429,
        "rate_limited",
        f"Rate limit of {settings.API_RATE_LIMIT_PER_MINUTE} requests per minute reached; "
        "retry after the number of seconds in the Retry-After header.",
    )


def on_auth_failures(request: HttpRequest, exc: Exception) -> HttpResponse:
    response = error_response(
        429,
        "rate_limited",
        f"More than {settings.API_AUTH_FAILURES_PER_MINUTE} requests without a valid token "
        "came from your address this minute; retry after the Retry-After header's seconds.",
    )
    response["Retry-After"] = str(int(60 - time.time() % 60) + 1)
    return response


def on_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.warning("Agent API: database unavailable: %s", exc)
    response = error_response(503, "unavailable", "The console's database is unavailable; retry shortly.")
    response["Retry-After"] = "5"
    return response


def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("Agent API: unhandled error on %s %s", request.method, request.path)
    return error_response(
        500, "internal_error", "The console failed to handle this request; it has been logged. Retry later."
    )


HANDLERS: dict[type[Exception], Any] = {
    ApiError: lambda request, exc: error_response(exc.status, exc.code, exc.message, exc.field),
    ValidationError: on_validation_error,
    HttpError: on_http_error,
    AuthenticationError: on_auth_error,
    Throttled: on_throttled,
    TooManyFailures: on_auth_failures,
    Http404: lambda request, exc: error_response(404, "not_found", "Not found."),
    Conflict: lambda request, exc: error_response(409, exc.code, str(exc), exc.field),
    Invalid: lambda request, exc: error_response(422, exc.code, str(exc), exc.field),
    IllegalTransition: lambda request, exc: error_response(409, "conflict", str(exc)),
    OperationalError: on_unavailable,
    InterfaceError: on_unavailable,
    Exception: on_unexpected,
}
