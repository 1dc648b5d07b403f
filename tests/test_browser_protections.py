"""The browser is told to run only our own scripts, keep nothing, and stay on https.

Finding 4 of issue 12 (``manage.py check --deploy`` with the compose settings is in
tests/test_docker_compose.py).
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint


def _directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


def test_pages_carry_a_strict_content_security_policy(client, alice):
    client.force_login(alice)
    response = client.get(reverse("queue"))
    csp = _directives(response)
    assert csp["script-src"] == ["'self'"] and csp["default-src"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]


def test_no_page_has_an_inline_script(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    for url in (
        reverse("queue"),
        reverse("workbench", args=[checkpoint.pk]),
        reverse("mine"),
        reverse("workflow", args=[checkpoint.workflow_id]),
    ):
        html = client.get(url).content.decode()
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert scripts and all("src=" in tag for tag in scripts), (url, scripts)
        assert '"allowEval":false' in html  # htmx may not evaluate attribute code either


def test_signed_in_pages_and_partials_are_never_stored(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    page = client.get(reverse("queue"))
    partial = client.get(
        reverse("workbench", args=[checkpoint.pk]), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="workbench-actions"
    )
    for response in (page, partial):
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
        vary = {v.strip().lower() for v in response["Vary"].split(",")}
        assert {"hx-request", "hx-target"} <= vary


def test_agent_api_answers_are_never_stored(client, db):
    from tests.apitools import api_agent

    bot = api_agent()
    response = bot.post("/workflows", {"external_id": "T-1", "kind": "refund", "title": "t"})
    assert response.status_code == 201 and "no-store" in response["Cache-Control"]


@pytest.fixture
def behind_tls(settings):
    """What TLS=true sets (console/settings.py); the derivation itself is checked by check --deploy."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    return settings


def test_behind_tls_http_is_redirected_and_https_gets_hsts(client, db, behind_tls):
    plain = client.get("/login/")
    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    secure = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert client.get("/healthz").status_code == 200  # the container health check stays on http


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_console_runs_in_chromium_without_a_policy_violation(page, alice):
    from playwright.sync_api import expect

    from tests.browser_fixtures import login

    checkpoint = make_checkpoint()
    violations: list[str] = []
    page.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("flash")).to_contain_text("You claimed")
    page.goto("/")
    expect(page.locator(f"#checkpoint-{checkpoint.pk}")).to_be_visible()
    assert violations == []
