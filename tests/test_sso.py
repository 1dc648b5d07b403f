"""Single sign-on against a real OpenID Connect provider on loopback (django-oauth-toolkit in its own
process, tests/oidc_provider/): the console's client is never mocked. The browser's side of the flow
is a requests session at the provider and the Django test client at the console.

Sign-in maps the group claim to a role and teams; leaving a group loses what it gave at the next
sign-in; a tampered ID token, one for another audience and a replayed ``state`` are refused;
local passwords can be turned off but for the break-glass accounts, and agents keep their tokens.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.helpers import make_agent, make_user, make_workflow
from tests.test_team_routing import make_team
from workflows.models import Event, SignInIdentity, Team
from workflows.roles import roles_of

ROOT = Path(__file__).resolve().parent.parent
CLIENT_ID, CLIENT_SECRET = "recovery-console", "console-secret-" + "x" * 20
CALLBACK = "http://testserver/oidc/callback/"
GROUP_MAP = {
    "rc-operators": ["role:operator"],
    "rc-tpm": "role:tpm",
    "rc-admins": ["role:admin"],
    "billing": ["team:billing"],
    "billing-leads": ["team:billing", "lead:billing"],
}


@dataclass
class Provider:
    url: str

    @property
    def issuer(self) -> str:
        return self.url + "/o"

    def person(self, username: str, *groups: str, email_verified: bool = True) -> str:
        """Create or update a person at the provider, in exactly these groups; their ``sub``."""
        answer = requests.post(
            self.url + "/control/user",
            timeout=10,
            data=json.dumps(
                {
                    "username": username,
                    "password": "provider-pw",
                    "email": f"{username}@example.org",
                    "email_verified": email_verified,
                    "groups": list(groups),
                }
            ),
        )
        answer.raise_for_status()
        sub: str = answer.json()["sub"]
        return sub

    def logout_token(self, username: str, **claims: str) -> str:
        answer = requests.post(
            self.url + "/control/logout-token", timeout=10, data=json.dumps({"username": username, **claims})
        )
        answer.raise_for_status()
        token: str = answer.json()["logout_token"]
        return token

    def tamper_next_token(self, mode: str) -> None:
        requests.post(self.url + "/control/tamper", data=json.dumps({"mode": mode}), timeout=10).raise_for_status()


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    home = tmp_path_factory.mktemp("oidc-provider")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (home / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(home / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY": str(home / "key.pem"),
        "OIDC_PROVIDER_ISSUER": url + "/o",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.oidc_provider.serve", str(port), CLIENT_ID, CLIENT_SECRET, CALLBACK],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # the provider says "ready" once it listens (or exits: EOF)
        assert line.strip() == "ready", f"the provider did not start: {line}{process.stderr.read()}"
        yield Provider(url)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def sso(settings, provider, db):
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_OP_ISSUER = provider.issuer
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = provider.url + "/o/authorize/"
    settings.OIDC_OP_TOKEN_ENDPOINT = provider.url + "/o/token/"
    settings.OIDC_OP_USER_ENDPOINT = provider.url + "/o/userinfo/"
    settings.OIDC_OP_JWKS_ENDPOINT = provider.url + "/o/.well-known/jwks.json"
    settings.OIDC_GROUP_MAP = GROUP_MAP
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    make_team("Billing")
    return provider


def through_provider(client: Client, provider: Provider, username: str) -> str:
    """Start at the console, sign in at the provider as a browser would: the callback URL it sends back."""
    start = client.get(reverse("oidc_authentication_init"))
    assert start.status_code == 302
    authorize = start["Location"]
    asked = parse_qs(urlparse(authorize).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["code_challenge"] and asked["nonce"]
    assert asked["client_id"] == [CLIENT_ID] and asked["redirect_uri"] == [CALLBACK]
    browser = requests.Session()
    to_login = browser.get(authorize, allow_redirects=False, timeout=10)
    login_url = urljoin(authorize, to_login.headers["Location"])
    signed = browser.post(
        login_url,
        allow_redirects=False,
        timeout=10,
        data={"username": username, "password": "provider-pw", "next": parse_qs(urlparse(login_url).query)["next"][0]},
    )
    back = browser.get(urljoin(authorize, signed.headers["Location"]), allow_redirects=False, timeout=10)
    callback = back.headers["Location"]
    assert callback.startswith(CALLBACK) and "code=" in callback, callback
    return callback.removeprefix("http://testserver")


def sign_in(client: Client, provider: Provider, username: str):
    return client.get(through_provider(client, provider, username))


def _user(client: Client):
    """The signed-in user of the client's session (anonymous: an AnonymousUser), read afresh."""
    user = client.get(reverse("login")).wsgi_request.user
    return get_user_model().objects.get(pk=user.pk) if user.is_authenticated else user


def test_a_sign_in_maps_the_group_claim_to_a_role_and_a_team(sso, client):
    sub = sso.person("olivia", "rc-operators", "billing", "unrelated")
    response = sign_in(client, sso, "olivia")
    assert response.status_code == 302 and response["Location"] == reverse("queue")
    user = _user(client)
    assert user.username == "olivia" and roles_of(user) == {"operator"}
    assert SignInIdentity.objects.get(user=user).subject == sub
    assert list(Team.objects.of(user).values_list("slug", flat=True)) == ["billing"]
    assert not user.has_usable_password()  # signs in through the provider only
    (event,) = Event.objects.filter(verb=Event.Verb.SSO_ACCESS_CHANGED, subject=f"user:{user.pk}")
    assert event.data == {
        "granted": ["role operator", "team billing"],
        "revoked": [],
        "claim": "groups",
        "groups": ["billing", "rc-operators", "unrelated"],
    }
    assert Event.objects.filter(verb=Event.Verb.LOGGED_IN, actor_name="olivia").exists()


def test_only_an_email_the_provider_verified_is_kept_what_slack_links_people_by(sso, client):
    """An address someone typed at a provider that does not check it must not let its owner claim another
    person's Slack presses (workflows/slack/people.py links a Slack user by a verified email)."""
    sso.person("olivia", "rc-operators", email_verified=False)
    assert sign_in(client, sso, "olivia").status_code == 302
    assert _user(client).email == ""
    client.logout()
    sso.person("olivia", "rc-operators")  # the provider verified it since
    assert sign_in(client, sso, "olivia").status_code == 302
    assert _user(client).email == "olivia@example.org"


def test_without_a_userinfo_endpoint_the_id_token_alone_carries_the_groups(sso, client, settings):
    settings.OIDC_OP_USER_ENDPOINT = ""
    sso.person("olivia", "rc-tpm", "billing")
    assert sign_in(client, sso, "olivia").status_code == 302
    user = _user(client)
    assert roles_of(user) == {"tpm"} and list(Team.objects.of(user)) == [Team.objects.get(slug="billing")]


def test_a_local_account_of_the_same_name_is_never_taken_over(sso, client):
    local = make_user("olivia", role="admin")  # a local admin named like the person at the provider
    sso.person("olivia", "rc-operators")
    sign_in(client, sso, "olivia")
    user = _user(client)
    assert user.pk != local.pk and user.username == "olivia-2" and roles_of(user) == {"operator"}
    local = type(local).objects.get(pk=local.pk)
    assert roles_of(local) >= {"admin"} and not local.sign_in_identities.exists()


def test_a_lead_group_makes_the_team_lead(sso, client):
    sso.person("lena", "rc-operators", "billing-leads")
    sign_in(client, sso, "lena")
    assert Team.objects.get(slug="billing").lead.username == "lena"


def test_leaving_a_group_loses_what_it_gave_at_the_next_sign_in(sso, client):
    sso.person("olivia", "rc-admins", "billing-leads")
    sign_in(client, sso, "olivia")
    user = _user(client)
    assert roles_of(user) == {"admin"} and user.is_staff
    client.logout()
    sso.person("olivia", "rc-operators")  # the provider's admin moved her: no admin, no team
    assert sign_in(client, sso, "olivia").status_code == 302
    user = type(user).objects.get(pk=user.pk)  # a fresh read: no roles cached on the object
    assert roles_of(user) == {"operator"} and not user.is_staff
    billing = Team.objects.get(slug="billing")
    assert billing.lead is None and not billing.members.filter(pk=user.pk).exists()
    last = Event.objects.filter(verb=Event.Verb.SSO_ACCESS_CHANGED).latest("pk")
    assert last.data["granted"] == ["role operator"]
    assert last.data["revoked"] == ["role admin", "team billing", "lead of billing"]
    assert last.data["groups"] == ["rc-operators"]


def test_someone_in_no_mapped_group_loses_the_role_and_is_not_signed_in(sso, client):
    sso.person("olivia", "rc-operators")
    sign_in(client, sso, "olivia")
    client.logout()
    sso.person("olivia", "marketing")
    response = sign_in(client, sso, "olivia")
    assert response.status_code == 403
    assert b"no group that gives a role" in response.content
    assert not _user(client).is_authenticated
    olivia = SignInIdentity.objects.get().user
    assert roles_of(olivia) == frozenset()
    assert Event.objects.filter(verb=Event.Verb.SSO_ACCESS_CHANGED).latest("pk").data["revoked"] == ["role operator"]


def test_a_tampered_id_token_is_refused(sso, client):
    sso.person("mallory", "rc-operators")
    sso.tamper_next_token("groups")  # adds rc-admins to the claims, keeps the provider's signature
    response = sign_in(client, sso, "mallory")
    assert response.status_code == 400
    assert b"did not verify" in response.content
    assert not _user(client).is_authenticated
    assert not SignInIdentity.objects.exists()
    failed = Event.objects.filter(verb=Event.Verb.LOGIN_FAILED, data__via="single sign-on").get()
    assert "Signature verification failed" in failed.data["why"]


def test_an_id_token_for_another_audience_is_refused(sso, client):
    sso.person("olivia", "rc-operators")
    sso.tamper_next_token("audience")  # signed by the provider, for another client
    response = sign_in(client, sso, "olivia")
    assert response.status_code == 400
    assert not _user(client).is_authenticated
    assert "audience" in Event.objects.get(verb=Event.Verb.LOGIN_FAILED).data["why"].lower()


def test_an_id_token_with_another_sign_ins_nonce_is_refused(sso, client):
    sso.person("olivia", "rc-operators")
    sso.tamper_next_token("nonce")  # signed by the provider for us, but not for the sign-in this browser began
    response = sign_in(client, sso, "olivia")
    assert response.status_code == 400
    assert not _user(client).is_authenticated and not SignInIdentity.objects.exists()
    assert "nonce" in Event.objects.get(verb=Event.Verb.LOGIN_FAILED).data["why"].lower()


def test_an_id_token_from_another_issuer_is_refused(sso, client, settings):
    settings.OIDC_OP_ISSUER = "https://idp.example.org"  # the console trusts another issuer than this one
    sso.person("olivia", "rc-operators")
    assert sign_in(client, sso, "olivia").status_code == 400
    assert not _user(client).is_authenticated
    assert "issuer" in Event.objects.get(verb=Event.Verb.LOGIN_FAILED).data["why"].lower()


def test_a_replayed_state_is_refused(sso, client):
    sso.person("olivia", "rc-operators")
    callback = through_provider(client, sso, "olivia")
    assert client.get(callback).status_code == 302
    client.logout()
    again = client.get(callback)  # the same browser: its state was spent by the first use
    assert again.status_code in (400, 403)
    assert not _user(client).is_authenticated
    elsewhere = Client()  # another browser: it never started this sign-in
    assert elsewhere.get(callback).status_code in (400, 403)
    assert not _user(elsewhere).is_authenticated


def test_a_state_the_console_never_issued_is_refused(sso, client):
    sso.person("olivia", "rc-operators")
    callback = through_provider(client, sso, "olivia")
    forged = callback.replace("state=", "state=x")
    response = client.get(forged)
    assert response.status_code == 400
    assert not _user(client).is_authenticated


def test_a_back_channel_logout_ends_the_persons_sessions_here(sso, client):
    sso.person("olivia", "rc-operators")
    sso.person("peter", "rc-operators")
    sign_in(client, sso, "olivia")
    other = Client()
    sign_in(other, sso, "peter")
    assert _user(client).is_authenticated and _user(other).is_authenticated
    provider_side = Client()  # the provider's server-to-server POST: no cookie, no CSRF token
    answer = provider_side.post(reverse("oidc_backchannel_logout"), {"logout_token": sso.logout_token("olivia")})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    assert not _user(client).is_authenticated  # her session ended
    assert _user(other).is_authenticated  # his did not
    (event,) = Event.objects.filter(verb=Event.Verb.SSO_LOGGED_OUT)
    assert event.actor_name == "olivia" and event.data["sessions"] == 1


def test_a_logout_token_for_another_audience_or_altered_is_refused(sso, client):
    sso.person("olivia", "rc-operators")
    sign_in(client, sso, "olivia")
    wrong_audience = sso.logout_token("olivia", aud="another-client")
    header, payload, signature = sso.logout_token("olivia").split(".")
    altered = ".".join([header, payload[:-4] + ("AAAA" if payload[-4:] != "AAAA" else "BBBB"), signature])
    for token in (wrong_audience, altered, "not-a-token", ""):
        answer = Client().post(reverse("oidc_backchannel_logout"), {"logout_token": token})
        assert answer.status_code == 400, token
    assert _user(client).is_authenticated
    assert not Event.objects.filter(verb=Event.Verb.SSO_LOGGED_OUT).exists()


def test_local_passwords_off_but_for_break_glass_and_agents_keep_their_tokens(settings, client, db):
    settings.PASSWORD_LOGIN, settings.BREAK_GLASS_USERS = False, ["root-admin"]
    make_user("alice")
    make_user("root-admin", role="admin")
    refused = client.post(reverse("login"), {"username": "alice", "password": "pw-" + "x" * 12})
    assert refused.status_code == 200 and not refused.wsgi_request.user.is_authenticated
    page = client.get(reverse("login"))
    assert b'data-testid="break-glass"' in page.content
    allowed = client.post(reverse("login"), {"username": "root-admin", "password": "pw-" + "x" * 12})
    assert allowed.status_code == 302 and allowed.wsgi_request.user.username == "root-admin"
    assert (
        Client()
        .post(reverse("admin:login"), {"username": "alice", "password": "pw-" + "x" * 12})
        .wsgi_request.user.is_anonymous
    )  # the admin's login too
    agent, token = make_agent("refunder")
    workflow = make_workflow(agent)
    api = Client().get(f"/api/v1/workflows/{workflow.pk}", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 200 and api.json()["external_id"] == workflow.external_id


def test_without_configuration_single_sign_on_is_off(client, db):
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_callback") + "?code=a&state=b").status_code == 404
    assert b"sso-start" not in client.get(reverse("login")).content


def test_the_login_page_offers_the_provider(sso, client):
    page = client.get(reverse("login"))
    assert b'data-testid="sso-start"' in page.content and b"Sign in with Test IdP" in page.content
