"""The decision's states and its queries: what the outbox, the lease sweep and the workbench ask of decisions."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import models

from ..clock import database_now
from .runbooks import Action

if TYPE_CHECKING:
    from .agents import Agent
    from .decisions import Decision  # noqa: F401 - the queryset's model, named in a string


class DecisionStatus(models.TextChoices):
    PROPOSED = "proposed"  # waiting for a second operator (four eyes)
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"  # the second operator said no


# History, not the checkpoint's decision: a failed delivery or a rejected proposal. Module level so that
# Meta's constraint can name it.
INACTIVE_STATUSES = (DecisionStatus.FAILED, DecisionStatus.REJECTED)


class DecisionQuerySet(models.QuerySet["Decision"]):
    def active(self) -> DecisionQuerySet:
        return self.exclude(status__in=INACTIVE_STATUSES)

    def proposed(self) -> DecisionQuerySet:
        """Four eyes: proposals waiting for a second operator."""
        return self.filter(status=DecisionStatus.PROPOSED)

    def sent_back(self) -> DecisionQuerySet:
        """Decisions that gave their checkpoint back: a failed delivery, a rejected proposal."""
        return self.filter(status__in=INACTIVE_STATUSES)

    def dispatchable(self, now: datetime | None = None) -> DecisionQuerySet:
        """The outbox: queued decisions whose next attempt is due."""
        return self.filter(status=DecisionStatus.QUEUED, next_attempt_at__lte=now or database_now())

    def stuck(self, now: datetime | None = None) -> DecisionQuerySet:
        """Running decisions whose delivery lease expired: the worker died or hung."""
        return self.filter(status=DecisionStatus.RUNNING, lease_expires_at__lt=now or database_now())

    def took_over_from(self, agent: Agent) -> DecisionQuerySet:
        """Failovers that took workflows away from ``agent`` and still stand (a failed one gave it back)."""
        return (
            self.active()
            .filter(action=Action.FAILOVER, replaced_agent=agent)
            .exclude(status=DecisionStatus.PROPOSED)
            .select_related("standby")
            .order_by("-decided_at")
        )
