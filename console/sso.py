"""Single sign-on through an OpenID Connect provider (mozilla-django-oidc), and the password switch.

On when ``OIDC_RP_CLIENT_ID`` is set (the variables are in .env.example and the README). The
flow is the authorisation code flow with PKCE (S256); mozilla-django-oidc keeps ``state``,
``nonce`` and the code verifier in the session and spends the state once. On top of the
library, ``OIDCBackend`` checks what it leaves out: the ID token's audience (our client id),
issuer, expiry and issue time, RS256 only, and that the userinfo answer is about the same
subject. It finds the user by (issuer, subject) (``SignInIdentity``), creates one on the first
sign-in, and applies the group claim to roles and teams at every sign-in
(``workflows.directory``). Someone whose groups grant no role is signed out of nothing and
signed in to nothing: the change is recorded and the sign-in refused.

``PASSWORD_LOGIN=false`` turns local passwords off, except for the ``BREAK_GLASS_USERS``.
Agents are not users: their API tokens are untouched by either switch.
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import TYPE_CHECKING, Any, TypedDict

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from workflows.directory import apply_groups
from workflows.models import Event, SignInIdentity, SignInSession
from workflows.shapes import JsonObject

if TYPE_CHECKING:
    from workflows.models.base import Operator

logger = logging.getLogger(__name__)


def enabled() -> bool:
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def verified_email(claims: JsonObject) -> str:
    """The claims' email when the identity provider says it verified it, else "": an address someone typed at
    a provider that does not check it must not become what Slack links a console user by."""
    email = claims.get("email")
    return email[:254] if isinstance(email, str) and claims.get("email_verified") is True else ""


class PasswordBackend(ModelBackend):
    """Django's password check, refused for everyone but the break-glass users when PASSWORD_LOGIN is off."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Operator | None:
        if not settings.PASSWORD_LOGIN and username not in settings.BREAK_GLASS_USERS:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class OIDCBackend(OIDCAuthenticationBackend):  # type: ignore[misc]  # the library ships no types
    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Operator | None:
        return super().authenticate(request, **kwargs) if enabled() else None

    def _verify_jws(self, payload: str, key: jwt.PyJWK | str) -> JsonObject:
        """The library checks the signature only; the audience, issuer and times are checked here too."""
        return self.verified(payload, key, require=["exp", "iat", "aud", "iss", "sub"], what="ID token")

    def verified(self, token: str, key: jwt.PyJWK | str, *, require: list[str], what: str) -> JsonObject:
        """The token's claims: RS256 by the provider's key, for our client id, from our issuer, unexpired."""
        try:
            if jwt.get_unverified_header(token).get("alg") != "RS256":
                raise SuspiciousOperation(f"The {what} is not signed with RS256.")
            claims: JsonObject = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_OP_ISSUER,
                leeway=30,
                options={"require": require},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"The {what} did not verify: {exc}.") from exc
        return claims

    def get_userinfo(self, access_token: str, id_token: str, payload: JsonObject) -> JsonObject:
        """The ID token's claims, with the userinfo endpoint's when there is one (the ID token's win)."""
        info: JsonObject = {}
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("The userinfo answer is about another subject than the ID token.")
        return {**info, **payload}

    def verify_claims(self, claims: JsonObject) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: JsonObject) -> QuerySet[Operator]:
        return get_user_model().objects.filter(
            sign_in_identities__issuer=claims["iss"], sign_in_identities__subject=claims["sub"]
        )

    def create_user(self, claims: JsonObject) -> Operator | None:
        user_model = get_user_model()
        base = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:140]
        with transaction.atomic():
            name, n = base, 1
            while user_model.objects.filter(username=name).exists():  # never take over a local account
                n += 1
                name = f"{base}-{n}"
            user = user_model.objects.create_user(username=name, email=verified_email(claims))
            SignInIdentity.objects.create(user=user, issuer=str(claims["iss"]), subject=str(claims["sub"]))
        return self.update_user(user, claims)

    def update_user(self, user: Operator, claims: JsonObject) -> Operator | None:
        if (email := verified_email(claims)) and email != user.email:  # what Slack links by: kept only verified
            user.email = email
            user.save(update_fields=["email"])
        groups = claims.get(settings.OIDC_GROUP_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        if not isinstance(groups, list):
            raise SuspiciousOperation(f"The {settings.OIDC_GROUP_CLAIM} claim is not a list of groups.")
        self.request._sso_claims = claims  # the callback records the session under this identity
        access = apply_groups(user, [str(g) for g in groups], settings.OIDC_GROUP_MAP, claim=settings.OIDC_GROUP_CLAIM)
        SignInIdentity.objects.filter(user=user, issuer=claims["iss"], subject=claims["sub"]).update(
            last_sign_in_at=timezone.now()
        )
        if access.role is None and not user.is_superuser:
            self.request._sso_refusal = (  # read by the callback view for its message
                "Your account at the identity provider is in no group that gives a role in this console."
            )
            return None
        return user

    def get_or_create_user(self, access_token: str, id_token: str, payload: JsonObject) -> Operator | None:
        try:
            user: Operator | None = super().get_or_create_user(access_token, id_token, payload)
            return user
        except IntegrityError:  # two first sign-ins of one subject at once: the other one made the account
            return self.filter_users_by_claims(payload).first()


class SignInStart(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Off (404) until single sign-on is configured."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not enabled():
            raise Http404("Single sign-on is not configured.")
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response


class SignInCallback(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """The provider's redirect back. A state that is unknown or spent, a token that does not verify:
    400 and the login page saying so, recorded as a failed sign-in."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        except SuspiciousOperation as exc:
            Event.record(None, Event.Verb.LOGIN_FAILED, data={"via": "single sign-on", "why": str(exc)[:300]})
            return _login_page(
                request,
                "Sign-in through the identity provider failed: its answer did not verify "
                "or was already used. Start again.",
                status=400,
            )
        return response

    def login_success(self) -> HttpResponse:
        response: HttpResponse = super().login_success()
        claims = getattr(self.request, "_sso_claims", None) or {}
        identity = SignInIdentity.objects.filter(issuer=claims.get("iss"), subject=claims.get("sub")).first()
        if identity is not None and self.request.session.session_key:
            SignInSession.objects.update_or_create(
                session_key=self.request.session.session_key,
                defaults={"identity": identity, "sid": str(claims.get("sid") or "")[:255]},
            )
        return response

    def login_failure(self) -> HttpResponse:
        refusal = getattr(self.request, "_sso_refusal", "")
        return _login_page(self.request, refusal or "Sign-in through the identity provider failed.", status=403)


def _login_page(request: HttpRequest, error: str, *, status: int) -> HttpResponse:
    return render(request, "registration/login.html", {**login_context(), "sso_error": error}, status=status)


class LoginContext(TypedDict):
    sso: bool
    sso_name: str
    password_login: bool


def login_context() -> LoginContext:
    """What the login page offers: the provider's button, the password form (or only break-glass)."""
    return {
        "sso": enabled(),
        "sso_name": getattr(settings, "OIDC_PROVIDER_NAME", ""),
        "password_login": settings.PASSWORD_LOGIN,
    }


BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


@csrf_exempt  # the provider posts here, server to server; the signed logout token is the credential
@require_POST
def backchannel_logout(request: HttpRequest) -> HttpResponse:
    """OpenID Connect Back-Channel Logout 1.0: the provider says a person signed out; their sessions end.

    The logout token must verify as an ID token does (RS256 from the JWKS, our audience, the issuer),
    carry the back-channel event, a ``sub`` or a ``sid``, and no ``nonce``. 400 otherwise."""
    if not enabled():
        raise Http404("Single sign-on is not configured.")
    token = str(request.POST.get("logout_token", ""))
    try:
        backend = OIDCBackend()
        claims = backend.verified(
            token,
            backend.retrieve_matching_jwk(token),
            require=["exp", "iat", "aud", "iss", "jti"],
            what="logout token",
        )
        events = claims.get("events")
        if not isinstance(events, dict) or BACKCHANNEL_EVENT not in events or "nonce" in claims:
            raise SuspiciousOperation("Not a back-channel logout token.")
        if not (claims.get("sub") or claims.get("sid")):
            raise SuspiciousOperation("The logout token names no subject and no session.")
    except (SuspiciousOperation, jwt.InvalidTokenError, KeyError, ValueError) as exc:
        Event.record(None, Event.Verb.LOGIN_FAILED, data={"via": "back-channel logout", "why": str(exc)[:300]})
        return HttpResponse(
            "invalid logout token", status=400, content_type="text/plain", headers={"Cache-Control": "no-store"}
        )
    sessions = SignInSession.objects.filter(identity__issuer=claims["iss"]).select_related("identity__user")
    sid = str(claims.get("sid") or "")
    sessions = sessions.filter(sid=sid) if sid else sessions.filter(identity__subject=str(claims["sub"]))
    ended = list(sessions)
    store = import_module(settings.SESSION_ENGINE).SessionStore
    for session in ended:
        store(session_key=session.session_key).delete()
    SignInSession.objects.filter(pk__in=[s.pk for s in ended]).delete()
    for user in {s.identity.user for s in ended}:
        Event.record(
            user,
            Event.Verb.SSO_LOGGED_OUT,
            actor=user,
            data={"sessions": sum(s.identity.user_id == user.pk for s in ended), "sid": sid or None},
        )
    return HttpResponse(status=200, headers={"Cache-Control": "no-store"})
