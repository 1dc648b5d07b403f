"""Liveness for load balancers and docker compose: the database answers."""

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
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
