"""``make run SSO=1`` works as shipped: the provider process its Procfile line starts (``python -m demo.sso
serve``), with the people it seeds, and the console configured by ``python -m demo.sso env``'s variables
and ``manage.py seed_sso``'s teams: a seeded person signs in through the console's real flow and lands
with the role and teams the profile's group mapping gives. Plain ``make run`` starts no provider.

The provider runs as its own process on loopback, as in tests/test_sso.py; the browser's side is a
requests session at the provider and the Django test client at the console.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from demo import sso as profile
from workflows.directory import parse_mapping
from workflows.models import Team
from workflows.roles import roles_of

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = "http://testserver"  # the Django test client's host: the redirect URI the provider registers


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VAR_DIR": str(var)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # What the Makefile runs: the variables, then the Procfile's "sso" process.
    exports = subprocess.run(
        [sys.executable, "-m", "demo.sso", "env", "--port", str(port), "--console", CONSOLE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    variables = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in exports.splitlines())
    process = subprocess.Popen(
        [sys.executable, "-m", "demo.sso", "serve", "--port", str(port), "--console", CONSOLE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = []
        for line in process.stdout:  # the sign-in lines, then "ready" once it listens (EOF: it exited)
            said.append(line)
            if line.strip() == "ready":
                break
        assert said and said[-1].strip() == "ready", f"the provider did not start: {said}{process.stderr.read()}"
        people = {
            p["username"]: p["password"] for p in json.loads((var / "sso" / "profile.json").read_text())["people"]
        }
        yield variables, people, "".join(said)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def console(settings, provider, db):
    variables, people, _ = provider
    for name, value in variables.items():  # as console/settings.py reads them (OIDC_GROUP_MAP: env.json)
        setattr(settings, name, json.loads(value) if name == "OIDC_GROUP_MAP" else value)
    parse_mapping(settings.OIDC_GROUP_MAP)  # what the system check does when single sign-on is on
    call_command("seed_sso", stdout=io.StringIO())
    return people


def sign_in(client: Client, username: str, password: str):
    start = client.get(reverse("oidc_authentication_init"))
    authorize = start["Location"]
    assert parse_qs(urlparse(authorize).query)["client_id"] == [profile.CLIENT_ID]
    browser = requests.Session()
    to_login = browser.get(authorize, allow_redirects=False, timeout=10)
    login_url = urljoin(authorize, to_login.headers["Location"])
    assert "Password" in browser.get(login_url, timeout=10).text  # the provider's sign-in form, for a person
    signed = browser.post(
        login_url,
        allow_redirects=False,
        timeout=10,
        data={"username": username, "password": password, "next": parse_qs(urlparse(login_url).query)["next"][0]},
    )
    back = browser.get(urljoin(authorize, signed.headers["Location"]), allow_redirects=False, timeout=10)
    callback = back.headers["Location"]
    assert callback.startswith(CONSOLE + "/oidc/callback/"), callback
    return client.get(callback.removeprefix(CONSOLE))


def signed_in(client: Client):
    user = client.get(reverse("login")).wsgi_request.user
    return get_user_model().objects.get(pk=user.pk) if user.is_authenticated else None


def test_the_login_page_offers_the_profiles_provider(console, client):
    page = client.get(reverse("login"))
    assert b'data-testid="sso-start"' in page.content
    assert f"Sign in with {profile.PROVIDER_NAME}".encode() in page.content


def test_a_seeded_operator_signs_in_and_lands_on_the_queue_in_her_team(console, client):
    response = sign_in(client, "olivia", console["olivia"])
    assert response.status_code == 302 and response["Location"] == reverse("queue")
    olivia = signed_in(client)
    assert olivia.username == "olivia" and roles_of(olivia) == {"operator"}
    assert list(Team.objects.of(olivia).values_list("slug", flat=True)) == ["support"]
    assert client.get(reverse("queue")).status_code == 200


def test_the_seeded_lead_leads_billing_and_the_admin_is_in_both_teams(console, client):
    assert sign_in(client, "lena", console["lena"]).status_code == 302
    assert Team.objects.get(slug="billing").lead.username == "lena"
    client.logout()
    assert sign_in(client, "ada", console["ada"]).status_code == 302
    ada = signed_in(client)
    assert roles_of(ada) == {"admin"} and set(Team.objects.of(ada).values_list("slug", flat=True)) == {
        "support",
        "billing",
    }


def test_someone_in_no_mapped_group_is_refused(console, client):
    response = sign_in(client, "mallory", console["mallory"])
    assert response.status_code == 403 and signed_in(client) is None


def test_the_provider_prints_who_can_sign_in(provider):
    _, people, said = provider
    for username, password in people.items():
        assert username in said and password in said


def test_only_make_run_sso_starts_the_provider():
    def dry_run(*extra: str) -> str:
        return subprocess.run(
            ["make", "-n", "run", *extra], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    plain, with_sso = dry_run(), dry_run("SSO=1", "PORT=8100")
    assert "start web worker beat relay fleet" in plain and "demo.sso" not in plain and "seed_sso" not in plain
    assert "start web worker beat relay fleet sso" in with_sso
    assert "demo.sso env --port 8101 --console http://127.0.0.1:8100" in with_sso and "seed_sso" in with_sso
    procfile = (ROOT / "Procfile.dev").read_text()
    assert (
        "sso: .venv/bin/python -m demo.sso serve --port $SSO_PORT --console http://127.0.0.1:$CONSOLE_PORT" in procfile
    )
