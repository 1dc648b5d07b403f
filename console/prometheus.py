"""``GET /metrics`` for Prometheus: the collector in workflows.prometheus, behind a token or an address list."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from workflows.prometheus import exposition

from .roles import Rule, declare

# No signed-in principal gets through: scrapers prove themselves with the token or their address.
SCRAPERS = Rule(frozenset(), "Prometheus scrapers: the METRICS_TOKEN bearer token or an address in METRICS_ALLOWED_IPS")


def _allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    if token and sent.startswith("Bearer ") and hmac.compare_digest(sent[7:].encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.METRICS_ALLOWED_IPS)


@declare(SCRAPERS)
@require_GET
def metrics_endpoint(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse(
            "Forbidden: send the METRICS_TOKEN as a bearer token, or scrape from an address in METRICS_ALLOWED_IPS.\n",
            status=403,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
