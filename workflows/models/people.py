"""Who can take work: the acting roles and operators' working hours.

The role names and ``operators()`` live in ``workflows.roles`` (the bottom of the domain);
they are imported here for the models that use them and for their older importers.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from ..roles import ACTING_ROLES, ADMIN, OPERATOR, ROLES, TPM, operators

if TYPE_CHECKING:
    from .base import Operator

__all__ = [
    "ACTING_ROLES",
    "ADMIN",
    "OPERATOR",
    "ROLES",
    "TPM",
    "OperatorProfile",
    "can_take_work",
    "is_working",
    "operators",
]

User = settings.AUTH_USER_MODEL


class OperatorProfile(models.Model):
    """What the console knows about a person beyond Django's user: when they work."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="operator_profile")
    calendar = models.ForeignKey(
        "workflows.BusinessCalendar",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Their working hours; empty means always reachable.",
    )

    def __str__(self) -> str:
        return f"Profile of {self.user}"


def is_working(user: Operator, at: datetime) -> bool:
    """Within the user's working hours (no calendar set: always)."""
    profile = OperatorProfile.objects.filter(user=user).select_related("calendar").first()
    if profile is None or profile.calendar is None:
        return True
    return profile.calendar.hours().is_open(at)


def can_take_work(user: Operator | None, at: datetime) -> tuple[bool, str]:
    """May the console hand this person a checkpoint now? With the reason when not."""
    if user is None:
        return False, "nobody to return it to"
    user.refresh_from_db(fields=["is_active", "is_superuser"])
    if not user.is_active:
        return False, f"{user.get_username()} is inactive"
    if not operators().filter(pk=user.pk).exists():
        return False, f"{user.get_username()} no longer has the operator role"
    if not is_working(user, at):
        return False, f"{user.get_username()} is outside their working hours"
    return True, ""
