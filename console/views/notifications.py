"""The signed-in user's notifications: the bell's count and the breach-review link (a context processor),
and the list."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.functional import lazy
from django.views.decorators.http import require_GET, require_POST

from workflows import push
from workflows.models import Channel, Notification
from workflows.models.people import ADMIN, TPM

from ..roles import READERS, SUPERUSER, role_required, roles_of, signed_in

PAGE = 100


def unread_notifications(request: HttpRequest) -> dict[str, Any]:
    """The bell's unread count on every page, one indexed count query for a signed-in user, made only when a
    template asks (base.html does; the polled partials do not)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    counted: list[int] = []

    def unread() -> int:  # lazy() calls this at every use: base.html reads it three times, one query
        if not counted:
            counted.append(Notification.objects.for_user(user).unread().count())
        return counted[0]

    return {
        "unread_notifications": lazy(unread, int)(),
        "can_review_breaches": bool(roles_of(user) & {TPM, ADMIN, SUPERUSER}),
    }


@role_required(*READERS)
@require_GET
def notifications(request: HttpRequest) -> HttpResponse:
    user = signed_in(request)
    items = list(Notification.objects.for_user(user).select_related("checkpoint__workflow")[:PAGE])
    devices = list(Channel.objects.filter(kind=Channel.Kind.PUSH, user=user, is_active=True).order_by("pk"))
    return render(
        request,
        "console/notifications.html",
        {"items": items, "page_size": PAGE, "devices": devices, "push_key": push.public_key()},
    )


@role_required(*READERS)
@require_POST
def mark_read(request: HttpRequest, pk: int) -> HttpResponse:
    """Read one (and open what it is about), or ``pk`` 0: all of them."""
    mine = Notification.objects.for_user(signed_in(request))
    if pk == 0:
        count = mine.unread().update(read_at=timezone.now())
        messages.success(request, f"Marked {count} notification{'s' if count != 1 else ''} read.")
        return redirect("notifications")
    note = get_object_or_404(mine, pk=pk)
    note.mark_read()
    return redirect(note.path or "notifications")
