"""Who is calling (an agent token) and how often (limits shared by every web process).

Both counters live in the cache, which production shares between processes (Redis; a
per-process cache with several gunicorn workers refuses to start: gunicorn.conf.py, and
``check --deploy`` flags it): the per-agent rate limit, and failed authentications per
client address, which answer 429 once an address has sent too many bad tokens.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.security import HttpBearer
from ninja.throttling import BaseThrottle

from access.addresses import client_address

from ..models import Agent

logger = logging.getLogger(__name__)


class TooManyFailures(Exception):
    """An address sent too many requests without a valid token this minute."""


def _count(key: str, window: int) -> int:
    """This request's number in the window, in the cache every process shares; 0 when the cache is down.

    The common case is one incr (the key exists).
    """
    try:
        try:
            return cache.incr(key)
        except ValueError:  # the first request of the window
            if cache.add(key, 1, timeout=window * 2):
                return 1
            return cache.incr(key)  # another request added it first
    except Exception:  # a cache outage must not take the API down with it
        logger.warning("Agent API: limit cache unavailable; request let through", exc_info=True)
        return 0


class AgentToken(HttpBearer):
    WINDOW = 60

    def __call__(self, request: HttpRequest) -> Agent | None:
        agent = super().__call__(request)
        if agent is None:  # no token or a bad one: only failures are counted, the valid path stays free
            self._count_failure(request)
        return agent

    def authenticate(self, request: HttpRequest, token: str) -> Agent | None:
        if not token or len(token) > 256:
            return None
        return Agent.authenticate(token)

    def _count_failure(self, request: HttpRequest) -> None:
        limit = settings.API_AUTH_FAILURES_PER_MINUTE
        if not limit:
            return
        key = f"recovery-console:api-auth-fail:{client_address(request)}:{int(time.time() // self.WINDOW)}"
        if _count(key, self.WINDOW) > limit:
            raise TooManyFailures


class AgentRateLimit(BaseThrottle):
    """A fixed one-minute window per agent, counted in the cache shared by every web process."""

    WINDOW = 60

    def allow_request(self, request: HttpRequest) -> bool:
        limit: int = settings.API_RATE_LIMIT_PER_MINUTE
        agent = getattr(request, "auth", None)
        if not limit or not isinstance(agent, Agent):
            return True
        # The token hash, not the pk: a pk can be reused (SQLite), a token never is.
        key = f"recovery-console:api-rate:{agent.token_hash[:24]}:{int(time.time() // self.WINDOW)}"
        return _count(key, self.WINDOW) <= limit

    def wait(self) -> float:
        # Stateless, so one throttle object can serve every thread: the window ends on the minute.
        return self.WINDOW - time.time() % self.WINDOW
