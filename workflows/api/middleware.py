"""The agent API's own middleware stack: refuse oversized bodies, then run the API view at once.

Agents report every step of every workflow, so a step report is the hottest request the console
serves. It needs none of what the operator pages need: no session, no signed-in user, no CSRF check
(agents send a bearer token, never a cookie), no messages, no htmx details, no page CSP. This
middleware sits early in settings.MIDDLEWARE, after the security headers; on ``/api/`` it resolves
the path and calls the API view itself, so the rest of the stack never runs for an agent, and it
sets the headers the skipped middleware would have set on a JSON answer (no-store, no framing, a
CSP that allows nothing). Every other path goes down the full stack as before.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import resolve
from django.utils.cache import patch_cache_control

API_PREFIX = "/api/"
# A JSON answer runs no script and loads nothing; nothing may frame it.
API_CSP = "default-src 'none'; frame-ancestors 'none'"


def body_too_large(request: HttpRequest) -> HttpResponse | None:
    """413 before Django reads a body over API_MAX_BODY_BYTES."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    limit = settings.API_MAX_BODY_BYTES
    if length > limit:
        return JsonResponse(
            {
                "error": {
                    "code": "body_too_large",
                    "message": f"The request body is {length} bytes; the limit is {limit} bytes.",
                    "field": None,
                }
            },
            status=413,
        )
    return None


class LeanApiMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware checks it for the pages: DisallowedHost is a 400
        response = body_too_large(request) or self.call_view(request)
        patch_cache_control(response, no_store=True, private=True)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", API_CSP)
        return response

    @staticmethod
    def call_view(request: HttpRequest) -> HttpResponse:
        # What Django's handler does after the middleware, less what the API has no use for: the API's
        # URLconf ends in a catch-all that answers a JSON 404, and its views catch their own errors
        # (an exception still escapes to Django's 500 handling through this middleware's wrapper).
        match = resolve(request.path_info)
        request.resolver_match = match
        response: HttpResponse = match.func(request, *match.args, **match.kwargs)
        return response
