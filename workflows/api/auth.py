"""Who is calling (an agent token) and how often (a rate limit shared by every web process)."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.security import HttpBearer
from ninja.throttling import BaseThrottle

from ..models import Agent

logger = logging.getLogger(__name__)


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
            count = self._count(key)
        except Exception:  # a cache outage must not take the API down with it
            logger.warning("Agent API: rate limit cache unavailable; request let through", exc_info=True)
            return True
        return count <= limit

    def _count(self, key: str) -> int:
        """This request's number in the window. The common case is one incr (the key exists)."""
        try:
            return cache.incr(key)
        except ValueError:  # the first request of the window
            if cache.add(key, 1, timeout=self.WINDOW * 2):
                return 1
            return cache.incr(key)  # another request added it first

    def wait(self) -> float:
        # Stateless, so one throttle object can serve every thread: the window ends on the minute.
        return self.WINDOW - time.time() % self.WINDOW
