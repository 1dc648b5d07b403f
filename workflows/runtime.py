"""The only module that talks to agent runtimes: signed delivery of decisions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from django.conf import settings
from recovery_client import sign

from .models import Decision


class DeliveryError(Exception):
    """The agent runtime did not accept the delivery; the attempt is retried."""


def deliver(decision: Decision) -> int:
    """POST the decision to the agent's resume endpoint; returns the 2xx status or raises DeliveryError."""
    agent = decision.agent
    body = json.dumps(decision.payload(), sort_keys=True).encode()
    request = urllib.request.Request(  # noqa: S310 - admins configure resume URLs
        agent.resume_url, data=body, method="POST",
        headers={"Content-Type": "application/json",
                 "X-Recovery-Delivery": str(decision.delivery_id),
                 "X-Recovery-Signature": sign(agent.signing_secret, body),
                 "User-Agent": "recovery-console/1"})
    try:
        with urllib.request.urlopen(request, timeout=settings.DELIVERY_TIMEOUT_SECONDS) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"The agent answered {exc.code} {exc.reason}.") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryError(f"The agent's resume endpoint could not be reached: {reason}.") from exc
