"""Refuse oversized agent API bodies before Django reads them."""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class ApiBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.API_MAX_BODY_BYTES
            if length > limit:
                return JsonResponse({"error": {
                    "code": "body_too_large",
                    "message": f"The request body is {length} bytes; the limit is {limit} bytes.",
                    "field": None}}, status=413)
        return self.get_response(request)
