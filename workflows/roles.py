"""The roles of the domain: who holds which one, who may own work, who may act.

Three groups: operators and admins act on checkpoints (claim, assign, decide, approve,
complete handed-off work); TPMs read everything and change nothing. Superusers count as
admins so a fresh ``createsuperuser`` can work the queue.

These are facts about people, not about requests: the SLA clocks reassign and return work
without a request, an agent names a workflow's owner over the API, ``create_agent`` picks an
owner on the command line. So they live here, at the bottom of the domain (this module
imports nothing of ours), and everything above uses them: the models, the agent API, the
access rules of ``access.rules`` and the console's screens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from .models.base import Operator

OPERATOR = "operator"
TPM = "tpm"
ADMIN = "admin"
ROLES = (OPERATOR, TPM, ADMIN)
ACTING_ROLES = (OPERATOR, ADMIN)
SUPERUSER = "superuser"  # not a group: what ``roles_of`` adds for a superuser, beside admin


def operators() -> QuerySet[Operator]:
    """Everyone a checkpoint can be assigned or handed off to: active users in an acting role."""
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(groups__name__in=ACTING_ROLES) | Q(is_superuser=True))
        .distinct()
        .order_by("username")
    )


def owner_candidates() -> QuerySet[Operator]:
    """Who may own a workflow an agent reports: active members of the operator or admin group.

    Narrower than ``operators()``: a superuser account without a role is not a work queue.
    """
    return (
        get_user_model().objects.filter(is_active=True, groups__name__in=ACTING_ROLES).distinct().order_by("username")
    )


def set_role(user: Operator, role: str) -> None:
    """Put the user in exactly the group of ``role`` (groups are created on first use)."""
    if role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: one of {', '.join(ROLES)}.")
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(pk=group.pk))
    user.groups.add(group)
    if role == ADMIN:
        _grant_admin_permissions(group)
    if user.is_staff != (role == ADMIN or user.is_superuser):  # the Django admin is for admins
        user.is_staff = role == ADMIN or user.is_superuser
        user.save(update_fields=["is_staff"])
    user.__dict__.pop("_console_roles", None)


def _grant_admin_permissions(group: Group) -> None:
    """Admins configure agents, runbooks and users in the Django admin: they need its model permissions."""
    from django.contrib.auth.models import Permission

    wanted = Permission.objects.filter(
        Q(content_type__app_label="workflows")
        | Q(content_type__app_label="auth", content_type__model__in=["user", "group"])
    )
    if group.permissions.count() != wanted.count():
        group.permissions.set(wanted)


def roles_of(user: Operator | AnonymousUser) -> frozenset[str]:
    """The roles of a signed-in, active user (superusers count as admins); cached per request."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    # getattr, not user.__dict__: request.user is a lazy wrapper whose own __dict__ never holds it.
    cached: frozenset[str] | None = getattr(user, "_console_roles", None)
    if cached is None:
        names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if user.is_superuser:
            names |= {ADMIN, SUPERUSER}
        cached = frozenset(names)
        # A per-request cache on the user object, an attribute the model does not declare.
        setattr(user, "_console_roles", cached)  # noqa: B010
    return cached


def can_act(user: Operator | AnonymousUser) -> bool:
    """Operators and admins may change checkpoints and workflows."""
    return bool(roles_of(user) & set(ACTING_ROLES))


def can_review(user: Operator | AnonymousUser) -> bool:
    """TPMs and admins read the program's figures (the resume dashboard, readiness, staffing)."""
    return bool(roles_of(user) & {TPM, ADMIN})


def is_admin(user: Operator | AnonymousUser) -> bool:
    return ADMIN in roles_of(user)
