"""The access rule every URL declares: who may open it, enforced or declared by one decorator.

The roles themselves (operators and admins act, TPMs read) are the domain's
(``workflows.roles``); this module turns them into rules for URLs.

**Every view states its rule** with one decorator, and
``tests/test_access_rules.py`` walks every URL pattern of the URLconf as every
principal (anonymous, operator, TPM, admin, superuser, an agent token): a URL
whose view declares no rule fails the suite. The README's role matrix is
generated from these rules (``python manage.py access_matrix``)::

    @role_required(*READERS)            # pages: operators, TPMs, admins
    @require_GET
    def queue(request): ...

    @role_required(*ACTORS)             # anything that changes state
    @require_POST
    def claim(request, pk): ...

    path("login/", public(views.Login.as_view()), name="login")

An htmx endpoint is a view like any other: the page view that renders the
partial (``_render`` in console/views/htmx.py) carries the page's rule, and a
dedicated partial or action URL gets its own decorator. A refused htmx request
gets the same answer as a page: anonymous → the login redirect (the login view
answers htmx with ``HX-Redirect``), a role that may not → 403 with the reason.
The agent API declares ``AGENT`` for all its operations in one place
(``workflows/api/__init__.py``); the Django admin is ``ADMIN_SITE`` (staff,
then model permissions), recognised from its views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, TypeVar, cast

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render

from workflows.roles import ACTING_ROLES, ADMIN, OPERATOR, ROLES, SUPERUSER, TPM, roles_of

if TYPE_CHECKING:
    from workflows.models.base import Operator

# Who can knock on a URL: the three roles, plus the principals without one.
ANONYMOUS = "anonymous"
AGENT_TOKEN = "agent token"  # noqa: S105 - the name of a principal, not a secret
PRINCIPALS = (ANONYMOUS, OPERATOR, TPM, ADMIN, SUPERUSER, AGENT_TOKEN)

READERS = (OPERATOR, TPM, ADMIN)  # every console page
ACTORS = ACTING_ROLES  # every state change
REVIEWERS = (TPM, ADMIN)  # the program's figures


@dataclass(frozen=True)
class Rule:
    """Which principals a URL lets through, in words for the README's matrix."""

    allowed: frozenset[str]
    summary: str
    finer: str = ""  # a further check inside the view (model permissions) that may still answer 403

    def allows(self, principal: str) -> bool:
        return principal in self.allowed


PUBLIC = Rule(frozenset(PRINCIPALS), "anyone (no sign-in)")
AGENT = Rule(frozenset({AGENT_TOKEN}), "agent runtimes with a valid API token")
ADMIN_SITE = Rule(
    frozenset({ADMIN, SUPERUSER}), "Django admin: active staff accounts", finer="Django model permissions"
)


# --- declaring a URL's rule ------------------------------------------------------------

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def declare(rule: Rule) -> Callable[[View], View]:
    """Attach ``rule`` to a view that enforces it some other way (the API, the admin)."""

    def mark(view: View) -> View:
        view.access_rule = rule  # type: ignore[attr-defined]
        return view

    return mark


def public(view: View) -> View:
    """Anyone may open this URL (the login page, health checks)."""
    return declare(PUBLIC)(view)


def role_required(*roles: str, why: str = "") -> Callable[[View], View]:
    """Signed-in users with one of ``roles`` (superusers count as admins); others are refused.

    Anonymous requests are sent to the login page; a signed-in user without the
    role gets the 403 page saying why. Use ``READERS`` for pages and ``ACTORS``
    for anything that changes state.
    """
    unknown = set(roles) - set(ROLES)
    if unknown or not roles:
        raise ValueError(f"role_required takes roles among {ROLES}, got {roles!r}")
    allowed = frozenset(roles) | ({SUPERUSER} if ADMIN in roles else set())
    names = " and ".join(_plural(r) for r in roles)
    reason = why or f"This page is for {names}."
    rule = Rule(allowed, f"signed-in {names}")

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if roles_of(request.user) & allowed:
                return view(request, *args, **kwargs)
            return render(request, "403.html", {"exception": reason}, status=403)

        wrapper.access_rule = rule  # type: ignore[attr-defined]
        return cast(View, wrapper)  # the view's own signature: the wrapper only refuses, or calls it

    return decorate


def signed_in(request: HttpRequest) -> Operator:
    """The user of a request that a login check let through (``role_required``, the admin site).

    PermissionDenied (403) if it is anonymous after all: a view reached without its check."""
    user = request.user
    if isinstance(user, AnonymousUser):
        raise PermissionDenied("Sign in first.")
    return user


def operator_required(view: View) -> View:
    """Actions are for operators and admins; a TPM gets a 403 page that says why."""
    return role_required(
        *ACTORS,
        why="Your role is read-only: only operators and admins can claim, assign, "
        "decide checkpoints or complete handed-off work.",
    )(view)


def _plural(role: str) -> str:
    return {OPERATOR: "operators", TPM: "TPMs", ADMIN: "admins"}[role]


# --- reading the rules back ------------------------------------------------------------


def rule_of(callback: Callable[..., HttpResponseBase], namespace: str = "") -> Rule | None:
    """The rule a resolved view declares; None when it declares none (the suite fails on that)."""
    rule: Rule | None = getattr(callback, "access_rule", None)
    if rule is not None:
        return rule
    if namespace.split(":")[0] == "admin":
        # Django's admin wraps every view but its login page in AdminSite.admin_view (active staff only).
        from django.contrib.admin import AdminSite

        site = getattr(callback, "__self__", None) or getattr(callback, "admin_site", None)
        signing = isinstance(site, AdminSite) and callback.__name__ in ("login", "logout")
        return PUBLIC if signing else ADMIN_SITE
    return None


def url_rules() -> Iterable[tuple[str, str, Callable[..., HttpResponseBase], Rule | None]]:
    """(route, name, view, rule) for every URL pattern of the URLconf, resolved, not hand-listed."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(
        patterns: Iterable[URLPattern | URLResolver], prefix: str, namespace: str
    ) -> Iterable[tuple[str, str, Callable[..., HttpResponseBase], Rule | None]]:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                yield from walk(p.url_patterns, route, ns)
            elif isinstance(p, URLPattern):
                yield route, f"{namespace}{p.name or ''}", p.callback, rule_of(p.callback, namespace)

    yield from walk(get_resolver().url_patterns, "", "")


def matrix_markdown() -> str:
    """The role matrix of the README, generated from the declared rules (``manage.py access_matrix``).

    Console URLs get a row each; the admin and the agent API one row per rule, since each of
    those declares its rule in one place.
    """
    rows: dict[tuple[str, Rule], list[str]] = {}
    for route, name, _view, rule in url_rules():
        if rule is None:
            continue
        group = name.split(":")[0] if ":" in name else ""
        label = {"admin": "/admin/…", "api": "/api/v1/…"}.get(group, "/" + route)
        rows.setdefault((label, rule), []).append(name.split(":")[-1] or "(catch-all)")
    header = "| URL | view | " + " | ".join(principal_label(p) for p in PRINCIPALS) + " | rule |"
    lines = [header, "|" + "---|" * (len(PRINCIPALS) + 3)]
    for (label, rule), names in rows.items():
        views = ", ".join(names) if len(names) <= 3 else f"{len(names)} views"
        marks = " | ".join("✓" if rule.allows(p) else "–" for p in PRINCIPALS)
        finer = f" (then {rule.finer})" if rule.finer else ""
        lines.append(f"| `{label}` | {views} | {marks} | {rule.summary}{finer} |")
    return "\n".join(lines) + "\n"


def principal_label(principal: str) -> str:
    return {
        ANONYMOUS: "anonymous",
        OPERATOR: "operator",
        TPM: "TPM",
        ADMIN: "admin",
        SUPERUSER: "superuser",
        AGENT_TOKEN: "agent token",
    }[principal]
