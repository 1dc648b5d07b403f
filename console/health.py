"""Liveness for load balancers and docker compose (the database answers), and the icon browsers ask for."""

import functools
import logging
from pathlib import Path

from django.contrib.staticfiles import finders
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from .roles import public

log = logging.getLogger(__name__)


@public
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # the reason goes to the log: this URL is public and errors name hosts
        log.exception("healthz: the database does not answer")
        return JsonResponse({"status": "unavailable", "database": "unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


@public
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``: what a browser asks for on pages without a ``<link rel=icon>`` (the admin, JSON, CSVs).
    The console's SVG icon, read once from the static files (no 404 in every browser console)."""
    icon = _icon()
    if icon is None:
        raise Http404("no icon")
    response = HttpResponse(icon, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


@functools.cache
def _icon() -> bytes | None:
    path = finders.find("favicon.svg")
    return Path(str(path)).read_bytes() if path else None
