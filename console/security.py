"""Browser and sign-in protections that are ours rather than a library's (README, "Security").

- ``PrivatePagesMiddleware``: what a signed-in user or an agent sees is never stored by a
  browser or a shared cache (``Cache-Control: no-store``), and every console answer varies on
  the htmx headers (one URL serves a page and its partials).
- ``IdleSessionMiddleware``: a session ends ``SESSION_COOKIE_AGE`` after the last activity.
- The client's address for login lockouts is ``access.addresses.client_address``.
- Sign-ins, failed sign-ins and lockouts are audit events.
- ``Login``: the sign-in page (the single sign-on button, the password form where it is allowed); a queue
  poll whose session ended is told to load it as a page (``HX-Redirect``), not swap it into the table.
- ``PasswordChange``: people change their own password (the current one first, the validators'
  rules, lockout-counted wrong guesses, an audit event, the session kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.urls import reverse_lazy
from django.utils.cache import patch_cache_control, patch_vary_headers

from access.addresses import client_address

if TYPE_CHECKING:
    from workflows.models.base import Operator

HTMX_HEADERS = ("HX-Request", "HX-Target")
ACTIVITY_GRANULARITY = 60  # seconds: an active session is written at most once a minute


class PrivatePagesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated) or request.path.startswith("/api/"):
            patch_cache_control(response, no_store=True, private=True)
        if not request.path.startswith(("/api/", "/static/")):
            patch_vary_headers(response, HTMX_HEADERS)
        return response


class IdleSessionMiddleware:
    """Slide the session's expiry on activity: a page load or a form post, not a background poll.

    Django sets a session's expiry when it is saved; touching it at most once a minute keeps
    writes rare. htmx GETs (the queue's polling) are not activity: an unattended screen that
    refreshes itself still signs out after the idle time.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and _is_activity(request):
            now = int(time.time())
            if now - int(request.session.get("_active_at", 0)) >= ACTIVITY_GRANULARITY:
                request.session["_active_at"] = now  # modified: saved with a fresh expiry
        return self.get_response(request)


def _is_activity(request: HttpRequest) -> bool:
    return request.method != "GET" or "HTTP_HX_REQUEST" not in request.META


def origin(request: HttpRequest | None) -> dict[str, str]:
    """Where a request came from, for an audit event: the client's address and the path."""
    if request is None:
        return {}
    return {"ip": client_address(request), "path": request.path[:100]}


@receiver(user_logged_in, dispatch_uid="console.audit.logged_in")
def _logged_in(sender: object, request: HttpRequest | None, user: Operator, **kwargs: object) -> None:
    from workflows.models import Event

    if request is not None and hasattr(request, "session"):
        request.session["_active_at"] = int(time.time())
    Event.record(user, Event.Verb.LOGGED_IN, actor=user, data=origin(request))


@receiver(user_logged_in, dispatch_uid="console.lockout.forget_own_failures")
def _forget_own_failures(sender: object, request: HttpRequest | None, user: Operator, **kwargs: object) -> None:
    """A sign-in clears the failures of that username from that address, and nothing else.

    Not axes's own reset on success: it deletes by its lockout parameters (the username *or* the
    address), so an attacker signing in to their own account between guesses at another one would
    wipe the guesses from the address and never be locked out.
    """
    if request is None or not settings.AXES_ENABLED:
        return
    from axes.models import AccessAttempt  # type: ignore[import-untyped]  # django-axes ships no types

    address = getattr(request, "axes_ip_address", None) or client_address(request)
    AccessAttempt.objects.filter(username=user.get_username(), ip_address=address).delete()


def _refused_while_locked(request: HttpRequest | None) -> bool:
    """An attempt axes turned away before checking the password (the lock was already on).

    Recorded once, as the lockout: an attacker hammering a locked account must not flood the
    append-only trail. (axes flags such requests without counting them as a new failure.)
    """
    return (
        bool(getattr(request, "axes_locked_out", False)) and getattr(request, "axes_failures_since_start", None) is None
    )


@receiver(user_login_failed, dispatch_uid="console.audit.login_failed")
def _login_failed(
    sender: object, credentials: Mapping[str, object], request: HttpRequest | None = None, **kwargs: object
) -> None:
    from workflows.models import Event

    if _refused_while_locked(request):
        return
    username = str(credentials.get("username", ""))[:150]
    Event.record(None, Event.Verb.LOGIN_FAILED, data={"username": username, **origin(request)})


def _locked_out(
    sender: object,
    request: HttpRequest | None = None,
    username: str | None = None,
    ip_address: str | None = None,
    **kwargs: object,
) -> None:
    from workflows.models import Event

    if _refused_while_locked(request):
        return
    Event.record(None, Event.Verb.LOCKED_OUT, data={"username": str(username or "")[:150], **origin(request)})


class Login(LoginView):
    """The sign-in page: the single sign-on button, and the password form where it is allowed."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .sso import login_context  # the single sign-on button; the password form or break-glass only

        return {**super().get_context_data(**kwargs), **login_context()}

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if getattr(request, "htmx", False):
            # A poll whose session ended followed the redirect here: load the login
            # page as a page, instead of swapping it into the queue's table.
            return HttpResponse(status=204, headers={"HX-Redirect": request.get_full_path()})
        return super().get(request, *args, **kwargs)


class PasswordChange(PasswordChangeView):
    """Change one's own password (ASVS V2.1): the current password first, the new one through
    ``AUTH_PASSWORD_VALIDATORS`` (a minimum length, common and breached-list passwords refused).

    A wrong current password counts as a failed sign-in for the lockout (so a borrowed session
    cannot guess it), and once locked the form refuses before checking anything. Django's view keeps
    the session signed in (``update_session_auth_hash``); the change is an audit event.
    """

    template_name = "registration/password_change.html"
    success_url = reverse_lazy("queue")

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        from axes.handlers.proxy import AxesProxyHandler  # type: ignore[import-untyped]
        from axes.helpers import get_lockout_response  # type: ignore[import-untyped]

        credentials = {"username": request.user.get_username()}
        if settings.AXES_ENABLED and AxesProxyHandler.is_locked(request, credentials):
            return cast(HttpResponse, get_lockout_response(request, None, credentials))
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        if "old_password" in form.errors:
            user_login_failed.send(
                sender=__name__, credentials={"username": self.request.user.get_username()}, request=self.request
            )
        return super().form_invalid(form)

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        from workflows.models import Event

        response = super().form_valid(form)
        Event.record(form.user, Event.Verb.PASSWORD_CHANGED, actor=form.user, data=origin(self.request))
        messages.success(self.request, "Your password is changed; you stay signed in here.")
        return response


def connect_lockout_audit() -> None:
    from axes.signals import user_locked_out  # type: ignore[import-untyped]  # django-axes ships no types

    user_locked_out.connect(_locked_out, dispatch_uid="console.audit.locked_out")
