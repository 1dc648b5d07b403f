"""A loopback fake of Slack's Web API and a signer of interaction payloads, the way Slack signs them.

``FakeSlack`` is a small threaded HTTP server started by the test: it records every call
(``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``, ``views.open``) with its JSON
arguments and token, answers as Slack does (``{"ok": true, "ts": …}``), and can be told to
answer the next calls with a rate limit (429 and ``Retry-After``) or an outage (503). The read
method ``users.info`` comes as a form, as slack_sdk sends it; it answers from
``users`` (the test's Slack profiles, ``profile()`` builds one) or ``user_not_found``.
slack_sdk's WebClient reaches it through ``settings.SLACK_API_URL``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test-token"
TEAM = "T0001"
CHANNEL = "C0RECOVERY"


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tokens: list[str] = []
        self.failing: list[tuple[int, dict[str, str]]] = []  # the answers of the next calls, in order
        self.down = False
        self.users: dict[str, dict[str, Any]] = {}  # Slack user id -> users.info's "user" object
        self._ts = itertools.count(1)
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # Write methods send JSON; read methods (users.info) a form, as slack_sdk's own users_info does.
                method = self.path.partition("?")[0].rsplit("/", 1)[-1]
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                form = self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded")
                arguments = {k: v[0] for k, v in parse_qs(body.decode()).items()} if form else json.loads(body or b"{}")
                with fake.lock:
                    fake.calls.append((method, arguments))
                    fake.tokens.append(self.headers.get("Authorization", ""))
                    failure = fake.failing.pop(0) if fake.failing else ((503, {}) if fake.down else None)
                    ts = f"1700000000.{next(fake._ts):06d}"
                    user = fake.users.get(str(arguments.get("user", "")))
                if failure is not None:
                    status, headers = failure
                    error = "ratelimited" if status == 429 else "service_unavailable"
                    self._answer(status, {"ok": False, "error": error}, headers)
                    return
                answer: dict[str, Any] = {"ok": True}
                if method == "chat.postMessage":
                    answer.update(ts=ts, channel=arguments.get("channel"))
                elif method == "chat.update":
                    answer.update(ts=arguments.get("ts"), channel=arguments.get("channel"))
                elif method == "users.info":
                    answer = (
                        {"ok": True, "user": user} if user is not None else {"ok": False, "error": "user_not_found"}
                    )
                self._answer(200, answer, {})

            def _answer(self, status: int, data: dict[str, Any], headers: dict[str, str]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def called(self, method: str) -> list[dict[str, Any]]:
        with self.lock:
            return [arguments for name, arguments in self.calls if name == method]

    def rate_limit(self, retry_after: int, times: int = 1) -> None:
        with self.lock:
            self.failing += [(429, {"Retry-After": str(retry_after)})] * times


@pytest.fixture
def slack(settings) -> Iterator[FakeSlack]:
    fake = FakeSlack()
    fake.thread.start()
    settings.SLACK_API_URL = fake.url
    settings.SLACK_TIMEOUT_SECONDS = 30  # a loaded test machine must not turn a slow answer into a timeout
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def profile(slack_user_id: str, email: str, *, confirmed: bool = True, **fields: Any) -> dict[str, Any]:
    """A ``users.info`` user object as Slack returns it (the fields the console reads, and a few more)."""
    return {
        "id": slack_user_id,
        "team_id": TEAM,
        "name": email.split("@")[0],
        "deleted": False,
        "is_bot": False,
        "is_email_confirmed": confirmed,
        "profile": {"email": email, "real_name": email.split("@")[0]},
        **fields,
    }


def signed(payload: dict[str, Any], *, secret: str = SIGNING_SECRET, at: float | None = None) -> dict[str, Any]:
    """The body and headers of an interaction request, signed as Slack signs it (v0, HMAC-SHA256)."""
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(at if at is not None else time.time()))
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "data": body,
        "content_type": "application/x-www-form-urlencoded",
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": f"v0={digest}",
    }


_TRIGGERS = itertools.count(1)


def next_trigger() -> str:
    return f"trigger-{next(_TRIGGERS)}"


def button(action_id: str, value: str, *, user: str, message_ts: str = "") -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": user},
        "channel": {"id": CHANNEL},
        "trigger_id": next_trigger(),  # Slack's own, new for every press: no two requests are alike
        "container": {"message_ts": message_ts},
        "actions": [{"action_id": action_id, "value": value, "type": "button"}],
    }


def submission(view: dict[str, Any], values: dict[str, str], *, user: str) -> dict[str, Any]:
    """A submitted modal: ``values`` maps block ids to typed text, or to a select's value (blocks named so)."""
    selects = {
        b["block_id"] for b in view["blocks"] if b.get("type") == "input" and b["element"]["type"] == "static_select"
    }
    state = {
        block: {
            "value": {"type": "static_select", "selected_option": {"value": v}}
            if block in selects
            else {"type": "plain_text_input", "value": v}
        }
        for block, v in values.items()
    }
    return {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": user},
        "trigger_id": next_trigger(),
        "view": {**view, "state": {"values": state}},
    }


@pytest.fixture
def simulated_slack(tmp_path, live_server, settings, transactional_db):
    """The demo fleet's server with `make run`'s simulated Slack workspace, its users linked, for live_server."""
    from demo import slack_workspace
    from demo.journal import Journal
    from demo.management.commands.seed_demo import Command as SeedDemo
    from demo.server import ResumeServer
    from demo.systems import Ledgers
    from tests.helpers import make_user
    from workflows.models import SlackWorkspace

    server = ResumeServer(
        {}, journal=Journal(tmp_path / "runtime.sqlite3"), ledgers=Ledgers(tmp_path / "ledgers.sqlite3"), port=0
    )
    server.start()
    settings.SLACK_API_URL = server.url("/slack/api/")
    users = {
        name: make_user(name, role=role)
        for name, role in (("operator", "operator"), ("admin", "admin"), ("tpm", "tpm"))
    }
    SeedDemo().seed_slack(users)
    workspace = SlackWorkspace.objects.get(team_id=slack_workspace.TEAM)
    server.slack = slack_workspace.SimulatedSlack(console_url=live_server.url, signing_secret=workspace.signing_secret)
    yield server
    server.stop()


def catch_up() -> list[str]:
    """What a worker does: send every Slack message that is behind its checkpoint (waiting for nothing)."""
    from django.db.models import F

    from workflows.models import SlackMessage
    from workflows.slack import outbox

    return [
        outbox.send(pk)
        for pk in SlackMessage.objects.filter(version__gt=F("sent_version"))
        .order_by("decision_id", "pk")
        .values_list("pk", flat=True)
    ]
