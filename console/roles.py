"""Who may do what in the console: three groups, checked in views.

Operators and admins act on checkpoints (claim, assign, decide, approve); TPMs
read everything and change nothing. Superusers count as admins so a fresh
``createsuperuser`` can work the queue without a group.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

OPERATOR = "operator"
TPM = "tpm"
ADMIN = "admin"
ROLES = (OPERATOR, TPM, ADMIN)
ACTING_ROLES = (OPERATOR, ADMIN)


def set_role(user: Any, role: str) -> None:
    """Put the user in exactly the group of ``role`` (groups are created on first use)."""
    if role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: one of {', '.join(ROLES)}.")
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(pk=group.pk))
    user.groups.add(group)
    user.__dict__.pop("_console_can_act", None)


def can_act(user: Any) -> bool:
    """Operators and admins may change checkpoints; cached on the user for the request."""
    if not user.is_authenticated or not user.is_active:
        return False
    if "_console_can_act" not in user.__dict__:
        user._console_can_act = user.is_superuser or user.groups.filter(name__in=ACTING_ROLES).exists()
    return user._console_can_act


def is_admin(user: Any) -> bool:
    return user.is_superuser or user.groups.filter(name=ADMIN).exists()


def operators() -> QuerySet:
    """Everyone a checkpoint can be assigned or handed off to."""
    return (get_user_model().objects.filter(is_active=True)
            .filter(Q(groups__name__in=ACTING_ROLES) | Q(is_superuser=True)).distinct().order_by("username"))


def operator_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Actions are for operators and admins; a TPM gets a 403 page that says why."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if can_act(request.user):
            return view(request, *args, **kwargs)
        return render(request, "403.html", {"exception": "Your role is read-only: only operators and admins "
                                            "can claim, assign or decide checkpoints."}, status=403)

    return wrapper
