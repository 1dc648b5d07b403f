"""The test provider's own pieces: the groups claim, a login form, and the test's controls.

The controls stand for what happens at a real provider between two sign-ins (an admin puts a
person in a group or takes them out) and for an attacker between the provider and the console
(``tamper``: the next ID token is altered on its way out, or signed for another audience).
"""

import base64
import json
import time
import uuid
from typing import Any

import jwt
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth import login as sign_in
from django.contrib.auth.models import Group
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.html import escape
from django.views.decorators.csrf import csrf_exempt
from jwcrypto import jwk
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings

UNVERIFIED_EMAILS: set[str] = set()  # usernames whose email this provider says it did not verify
TAMPER: dict[str, str] = {}  # the mode for the next token response; the server is single-threaded


class GroupsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "email_verified": bool(user.email) and user.username not in UNVERIFIED_EMAILS,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }


@csrf_exempt
def login(request: HttpRequest) -> HttpResponse:
    target = request.GET.get("next", "/")
    if request.method == "POST":
        user = authenticate(request, username=request.POST.get("username"), password=request.POST.get("password"))
        if user is None:
            return HttpResponse("wrong password", status=403)
        sign_in(request, user)
        return HttpResponseRedirect(target)
    return HttpResponse(
        f"<!doctype html><title>Test identity provider</title><h1>Test identity provider</h1>"
        f'<form method="post"><label>Username <input name="username" autofocus></label> '
        f'<label>Password <input name="password" type="password"></label>'
        f'<input type="hidden" name="next" value="{escape(target)}"> <button>Sign in</button></form>'
    )


@csrf_exempt
def control_user(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body)
    user, _ = get_user_model().objects.get_or_create(
        username=data["username"], defaults={"email": data.get("email", "")}
    )
    user.email = data.get("email", user.email)
    user.set_password(data["password"])
    user.save()
    (UNVERIFIED_EMAILS.add if data.get("email_verified") is False else UNVERIFIED_EMAILS.discard)(user.username)
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in data.get("groups", [])])
    return JsonResponse({"sub": str(user.pk)})


@csrf_exempt
def control_logout_token(request: HttpRequest) -> JsonResponse:
    """A back-channel logout token for a person, signed by this provider's key, as the provider would send
    it to the console when they sign out here (django-oauth-toolkit sends none itself: the test delivers it)."""
    data = json.loads(request.body)
    user = get_user_model().objects.get(username=data["username"])
    now = int(time.time())
    claims = {
        "iss": oauth2_settings.OIDC_ISS_ENDPOINT,
        "aud": data.get("aud", "recovery-console"),
        "iat": now,
        "exp": now + 120,
        "jti": uuid.uuid4().hex,
        "sub": str(user.pk),
        "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
    }
    key = jwk.JWK.from_pem(oauth2_settings.OIDC_RSA_PRIVATE_KEY.encode())
    token = jwt.encode(
        claims, oauth2_settings.OIDC_RSA_PRIVATE_KEY, algorithm="RS256", headers={"kid": key.thumbprint()}
    )
    return JsonResponse({"logout_token": token})


@csrf_exempt
def control_tamper(request: HttpRequest) -> JsonResponse:
    TAMPER["mode"] = json.loads(request.body)["mode"]
    return JsonResponse({"mode": TAMPER["mode"]})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _tampered(id_token: str, mode: str) -> str:
    header_b64, payload_b64, signature = id_token.split(".")
    claims = jwt.decode(id_token, options={"verify_signature": False})
    if mode == "groups":  # an attacker adds a group and keeps the provider's signature
        claims["groups"] = [*claims.get("groups", []), "rc-admins"]
        return ".".join([header_b64, _b64(json.dumps(claims).encode()), signature])
    if mode in ("audience", "nonce"):  # validly signed by the provider, but for another client or sign-in
        if mode == "audience":
            claims["aud"] = "another-client"
        else:  # as an ID token replayed from another sign-in would carry
            claims["nonce"] = "a-nonce-from-another-sign-in"
        header = jwt.get_unverified_header(id_token)
        return jwt.encode(
            claims, oauth2_settings.OIDC_RSA_PRIVATE_KEY, algorithm="RS256", headers={"kid": header["kid"]}
        )
    raise ValueError(mode)


class TamperMiddleware:
    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        mode = TAMPER.pop("mode", None) if request.path == "/o/token/" and response.status_code == 200 else None
        if mode:
            body = json.loads(response.content)
            body["id_token"] = _tampered(body["id_token"], mode)
            response.content = json.dumps(body).encode()
        return response
