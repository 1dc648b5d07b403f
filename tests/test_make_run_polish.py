"""make run for a newcomer (issue 8, item 11): the demo ledgers are linked, the fleet's port follows
PORT, and the dev server does not log every poll."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_worked_example

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_the_nav_and_each_effect_link_to_the_demo_ledgers_in_demo_mode(client, alice, settings):
    settings.DEMO_LEDGERS_URL = "http://127.0.0.1:8765/ledgers"
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    client.force_login(alice)

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()

    key = checkpoint.unknown_effects[0]["idempotency_key"]
    assert 'data-testid="nav-ledgers"' in html
    assert f'href="http://127.0.0.1:8765/ledgers?q={key.replace(":", "%3A")}"' in html


@pytest.mark.django_db
def test_outside_the_demo_there_is_no_ledger_link(client, alice, settings):
    settings.DEMO_LEDGERS_URL = ""
    client.force_login(alice)

    assert 'data-testid="nav-ledgers"' not in client.get(reverse("queue")).content.decode()


@pytest.mark.parametrize(("port", "fleet"), [("8000", "8765"), ("8100", "8865")])
def test_the_fleet_port_follows_port(port, fleet):
    out = subprocess.run(
        ["make", "-n", "-s", "run", f"PORT={port}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout

    assert f"--fleet-port {fleet}" in out and f"FLEET_PORT={fleet}" in out
    assert "--port $FLEET_PORT" in (ROOT / "Procfile.dev").read_text()


def test_the_dev_server_logs_posts_and_errors_but_not_successful_gets(settings):
    from console.settings import _is_quiet_get

    def record(line, status):
        return logging.LogRecord("django.server", logging.INFO, "", 0, '"%s" %s %s', (line, status, "512"), None)

    assert _is_quiet_get(record("GET /checkpoints/4/?v=81 HTTP/1.1", "200"))
    assert _is_quiet_get(record("GET / HTTP/1.1", "204"))
    assert not _is_quiet_get(record("POST /checkpoints/4/claim/ HTTP/1.1", "302"))
    assert not _is_quiet_get(record("GET /checkpoints/4/ HTTP/1.1", "500"))
    assert not _is_quiet_get(record("GET /nope/ HTTP/1.1", "404"))
    # The demo fleet's step reports are quiet when they succeed; an agent API error still shows.
    assert _is_quiet_get(record("POST /api/v1/workflows/7/steps HTTP/1.1", "201"))
    assert not _is_quiet_get(record("POST /api/v1/workflows/7/steps HTTP/1.1", "422"))
    assert not _is_quiet_get(record("POST /runbooks/api/ HTTP/1.1", "302"))


def _console_url(**env: str) -> str:
    import os
    import sys

    environment = {k: v for k, v in os.environ.items() if k not in ("CONSOLE_URL", "CONSOLE_PORT")}
    code = "import django; django.setup(); from django.conf import settings; print(settings.CONSOLE_URL)"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**environment, "DJANGO_SETTINGS_MODULE": "console.settings", "SECRET_KEY": "x", **env},
    ).stdout.strip()


def test_notification_links_follow_the_port_make_run_was_given():
    """Issue 28 item 13: with `make run PORT=8200` the emails linked to port 8000."""
    out = subprocess.run(
        ["make", "-n", "-s", "run", "PORT=8200"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "CONSOLE_PORT=8200" in out  # every process of the fleet (the worker sends the emails) gets it

    assert _console_url(CONSOLE_PORT="8200") == "http://127.0.0.1:8200"
    assert _console_url() == "http://127.0.0.1:8000"
    assert _console_url(CONSOLE_PORT="8200", CONSOLE_URL="https://console.example") == "https://console.example"
