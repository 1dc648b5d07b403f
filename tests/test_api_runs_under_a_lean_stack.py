"""The agent API skips the operator pages' middleware (session, CSRF, auth, messages, htmx, page CSP) and
still answers with the headers a JSON answer needs; the pages keep the whole stack."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.module_loading import import_string

from tests.apitools import issue_refund

LEAN = "workflows.api.middleware.LeanApiMiddleware"
BELOW = settings.MIDDLEWARE[settings.MIDDLEWARE.index(LEAN) + 1 :]


@pytest.fixture
def middleware_below_trips(monkeypatch):
    """Every middleware under the lean one raises when it runs."""
    ran: list[str] = []

    def tripwire(path: str):
        original = import_string(path).__call__

        def call(self, request):
            ran.append(path)
            return original(self, request)

        return call

    for path in BELOW:
        monkeypatch.setattr(import_string(path), "__call__", tripwire(path))
    return ran


def test_a_step_report_runs_none_of_the_pages_middleware(bot, workflow_id, middleware_below_trips):
    response = bot.client.post(
        f"/api/v1/workflows/{workflow_id}/steps", issue_refund(), content_type="application/json"
    )

    assert response.status_code == 201
    assert middleware_below_trips == []
    assert "Set-Cookie" not in response.headers and "Cookie" not in response.get("Vary", "")


def test_an_api_answer_keeps_the_headers_a_json_answer_needs(bot, workflow_id):
    for response in (
        bot.client.post(f"/api/v1/workflows/{workflow_id}/steps", issue_refund(), content_type="application/json"),
        bot.client.get("/api/v1/no-such-endpoint"),
        bot.client.post(
            f"/api/v1/workflows/{workflow_id}/steps",
            b"x" * (settings.API_MAX_BODY_BYTES + 1),
            content_type="application/json",
        ),
    ):
        assert response["Content-Type"].startswith("application/json")
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware still runs first
        assert response["X-Frame-Options"] == "DENY"
        assert response["Content-Security-Policy"] == "default-src 'none'; frame-ancestors 'none'"


def test_pages_still_run_the_whole_stack(client, alice, middleware_below_trips):
    client.force_login(alice)

    assert client.get(reverse("queue")).status_code == 200
    assert set(middleware_below_trips) == set(BELOW)


def test_a_step_report_makes_no_session_or_user_query(bot, workflow_id):
    bot.report(workflow_id, 1, "read_ticket")  # the token is cached from here on
    with CaptureQueriesContext(connection) as queries:
        bot.report(workflow_id, 2, "decide")
    sql = " ".join(q["sql"] for q in queries.captured_queries)

    assert "django_session" not in sql and "auth_user" not in sql


def test_a_host_outside_allowed_hosts_is_refused_on_the_api_too(bot, workflow_id):
    response = bot.client.post(
        f"/api/v1/workflows/{workflow_id}/steps",
        issue_refund(),
        content_type="application/json",
        headers={"Host": "evil.example"},
    )

    assert response.status_code == 400
    assert not bot.agent.workflows.get(pk=workflow_id).steps.exists()
