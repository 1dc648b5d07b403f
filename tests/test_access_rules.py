"""Every URL of the console declares who may open it, and the rule holds for every principal.

The URLs come from the URLconf (``console.roles.url_rules``), never from a hand
list: a new URL whose view declares no rule fails here. Each URL is requested
with GET and POST as anonymous, an operator, a TPM, an admin, a superuser and
an agent token; a principal the rule refuses must be refused (login redirect,
401, 403 or 405) without writing an audit event, one it allows must get through.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import resolve

from console.roles import (
    ADMIN,
    AGENT_TOKEN,
    ANONYMOUS,
    OPERATOR,
    PRINCIPALS,
    PUBLIC,
    SUPERUSER,
    TPM,
    set_role,
    url_rules,
)
from tests.helpers import make_agent, make_checkpoint, make_user
from workflows.models import Event

LOGIN_PAGES = ("/login/", "/admin/login/")


def example_path(route: str) -> str:
    """A concrete path for a route: converters and named groups filled, regex anchors dropped."""
    path = re.sub(r"\(\?P<\w+>([^)]*)\)", lambda m: m.group(1).split("|")[0] if "|" in m.group(1) else "1", route)
    path = re.sub(r"<(?:\w+:)?\w+>", "1", path)
    path = path.replace("^", "").replace("$", "").replace(".*", "anything")
    return "/" + path


def test_every_url_declares_an_access_rule():
    missing = [f"/{route} ({name})" for route, name, _view, rule in url_rules() if rule is None]
    assert not missing, (
        "These URLs declare no access rule; decorate their views with @role_required(...) "
        "or @public (console/roles.py): " + ", ".join(missing)
    )


def test_changing_ones_own_password_is_for_every_signed_in_role():
    """Issue 22, finding 13: the password change page, declared like every URL."""
    [rule] = [rule for _route, name, _view, rule in url_rules() if name == "password_change"]
    assert {p for p in PRINCIPALS if rule.allows(p)} == {OPERATOR, TPM, ADMIN, SUPERUSER}


def test_every_example_path_resolves_to_its_own_view():
    for route, name, view, _rule in url_rules():
        assert resolve(example_path(route)).func is view, f"/{route} ({name}): {example_path(route)}"


def _client_for(principal: str, users: dict, token: str) -> Client:
    if principal == AGENT_TOKEN:
        return Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    client = Client()
    if principal != ANONYMOUS:
        client.force_login(users[principal])
    return client


def _refused(response) -> bool:
    if response.status_code in (401, 403):
        return True
    location = response.headers.get("Location", "")
    return response.status_code == 302 and location.split("?")[0] in LOGIN_PAGES


@pytest.fixture
def everyone(db):
    superuser = make_user("root", role=OPERATOR)
    superuser.groups.clear()
    superuser.is_superuser = superuser.is_staff = True
    superuser.save()
    admin = make_user("adele", role=OPERATOR)
    admin.is_superuser = False
    admin.save()
    set_role(admin, ADMIN)
    users = {
        OPERATOR: make_user("olga", role=OPERATOR),
        TPM: make_user("tom", role=TPM),
        ADMIN: admin,
        SUPERUSER: superuser,
    }
    agent, token = make_agent("rules-agent")
    return users, token, make_checkpoint()


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_every_url_lets_in_exactly_the_principals_its_rule_names(everyone, principal):
    users, token, _checkpoint = everyone
    wrong = []
    for route, name, _view, rule in url_rules():
        path = example_path(route)
        for method in ("get", "post"):
            client = _client_for(principal, users, token)  # signing in is an event of its own
            events = Event.objects.count()
            response = getattr(client, method)(path)
            what = f"{method.upper()} {path} ({name}) as {principal}: {response.status_code}"
            if response.status_code >= 500:
                wrong.append(f"{what}, a server error")
            elif rule.allows(principal):
                # A finer check (model permissions) may still say 403; the role gate must not redirect or 401.
                passed_gate = not _refused(response) or (rule.finer and response.status_code == 403)
                if rule is not PUBLIC and not passed_gate:
                    wrong.append(f"{what}, refused although the rule is “{rule.summary}”")
            elif not (_refused(response) or response.status_code == 405):
                wrong.append(f"{what}, let through although the rule is “{rule.summary}”")
            elif Event.objects.count() != events:
                wrong.append(f"{what}, refused but an event was written")
    assert not wrong, "\n".join(wrong)


def test_the_readme_matrix_is_the_one_the_rules_generate():
    from pathlib import Path

    from console.roles import matrix_markdown

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("<!-- access-matrix:start -->\n")[1].split("<!-- access-matrix:end -->")[0]
    assert block == matrix_markdown(), "run `python manage.py access_matrix` and paste it into the README"
