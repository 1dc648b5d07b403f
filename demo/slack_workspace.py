"""A simulated Slack workspace for ``make run``: the Slack flow without a Slack account.

The demo fleet's server answers the console's Slack Web API calls on ``/slack/api/<method>``
(``make run`` points ``SLACK_API_URL`` there) and keeps the messages, thread replies, modals and
ephemeral replies in memory. ``GET /slack`` renders them like a channel, as one of the simulated
Slack users (linked to the demo's operator, admin and TPM, and one nobody linked); its buttons and
modal forms are turned into interaction payloads signed with the workspace's signing secret, exactly
as Slack would send them, and posted to the console's ``/slack/interactivity/``. Everything shown is
escaped: message text quotes agent-supplied text.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import threading
import time
import urllib.request
from html import escape, unescape
from typing import Any
from urllib.parse import urlencode

TEAM = "T0DEMO"
CHANNEL = "C0RECOVERY"
BOT_TOKEN = "xoxb-demo-simulated"  # noqa: S105 - the simulated workspace's token, not a real one
# Simulated Slack user -> the demo's console user it is linked to (None: not linked yet).
PEOPLE = {"U0OPERATOR": "operator", "U0ADMIN": "admin", "U0TPM": "tpm", "U0GUEST": None}
_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")


class SimulatedSlack:
    def __init__(self, *, console_url: str, signing_secret: str) -> None:
        self.console_url = console_url.rstrip("/")
        self.signing_secret = signing_secret
        self.lock = threading.Lock()
        self.messages: dict[str, dict[str, Any]] = {}  # ts -> the posted message (chat.update edits it)
        self.modals: dict[str, dict[str, Any]] = {}  # Slack user -> the modal open for them
        self.errors: dict[str, dict[str, str]] = {}  # Slack user -> the open modal's errors
        self.ephemeral: dict[str, list[str]] = {}  # Slack user -> replies only they see
        self._ts = itertools.count(1)
        self.trigger_user: dict[str, str] = {}  # trigger id -> who pressed

    # --- the Web API the console calls ------------------------------------------------------
    def api(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if method == "chat.postMessage":
                ts = f"{int(time.time())}.{next(self._ts):06d}"
                self.messages[ts] = {**arguments, "ts": ts}
                return {"ok": True, "ts": ts, "channel": arguments.get("channel")}
            if method == "chat.update":
                ts = str(arguments.get("ts"))
                if ts not in self.messages:
                    return {"ok": False, "error": "message_not_found"}
                self.messages[ts].update(text=arguments.get("text"), blocks=arguments.get("blocks"))
                return {"ok": True, "ts": ts, "channel": arguments.get("channel")}
            if method == "chat.postEphemeral":
                self.ephemeral.setdefault(str(arguments.get("user")), []).append(str(arguments.get("text")))
                return {"ok": True}
            if method == "views.open":
                user = self.trigger_user.pop(str(arguments.get("trigger_id")), "")
                self.modals[user] = arguments.get("view") or {}
                self.errors.pop(user, None)
                return {"ok": True}
        return {"ok": False, "error": "unknown_method"}

    # --- what a person does in the simulated Slack --------------------------------------------
    def press(self, user: str, action_id: str, value: str) -> None:
        trigger = f"trigger-{next(self._ts)}"
        with self.lock:
            self.trigger_user[trigger] = user
            self.ephemeral.pop(user, None)
        self._send(
            {
                "type": "block_actions",
                "team": {"id": TEAM},
                "user": {"id": user},
                "channel": {"id": CHANNEL},
                "trigger_id": trigger,
                "actions": [{"action_id": action_id, "value": value, "type": "button"}],
            }
        )

    def submit(self, user: str, form: dict[str, str]) -> None:
        with self.lock:
            view = self.modals.get(user)
        if view is None:
            return
        selects = {
            b.get("block_id")
            for b in view.get("blocks", [])
            if b.get("type") == "input" and b.get("element", {}).get("type") == "static_select"
        }
        values: dict[str, dict[str, Any]] = {
            block: {"value": {"selected_option": {"value": v}} if block in selects else {"value": v}}
            for block, v in form.items()
            if v
        }
        answer = self._send(
            {
                "type": "view_submission",
                "team": {"id": TEAM},
                "user": {"id": user},
                "trigger_id": f"trigger-{next(self._ts)}",  # as Slack sends: no two requests are alike
                "view": {**view, "state": {"values": values}},
            }
        )
        with self.lock:
            if answer.get("response_action") == "errors":
                self.errors[user] = answer.get("errors") or {}
            else:
                self.modals.pop(user, None)
                self.errors.pop(user, None)

    def close(self, user: str) -> None:
        with self.lock:
            self.modals.pop(user, None)

    def _send(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST the payload to the console, signed as Slack signs it (v0, HMAC-SHA256 of the timestamp and body)."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        timestamp = str(int(time.time()))
        digest = hmac.new(self.signing_secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(  # noqa: S310 - the console's own URL
            f"{self.console_url}/slack/interactivity/",
            data=body,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": timestamp,
                "X-Slack-Signature": f"v0={digest}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310 - the console's own URL
                text = response.read().decode()
        except OSError as exc:
            return {"error": str(exc)}
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            return {}
        return answer if isinstance(answer, dict) else {}

    # --- the page --------------------------------------------------------------------------------
    def page(self, user: str) -> str:
        user = user if user in PEOPLE else "U0OPERATOR"
        with self.lock:
            messages = sorted(self.messages.values(), key=lambda m: m["ts"])
            modal, errors = self.modals.get(user), dict(self.errors.get(user, {}))
            told = list(self.ephemeral.get(user, []))
        who = " · ".join(
            f'<a href="/slack?as={u}"{" class=me" if u == user else ""}>{u} ({escape(c or "not linked")})</a>'
            for u, c in PEOPLE.items()
        )
        top = [m for m in messages if not m.get("thread_ts")]
        html = [
            f"<!doctype html><title>Simulated Slack · #recovery</title><style>{_STYLE}</style>",
            "<h1>#recovery <small>simulated Slack workspace</small></h1>",
            f"<p>You are {who}</p>",
        ]
        html += [f'<p class="ephemeral" data-testid="ephemeral">Only visible to you: {_mrkdwn(t)}</p>' for t in told]
        if modal is not None:
            html.append(_modal(user, modal, errors))
        for message in reversed(top):
            html.append(_message(user, message))
            replies = [m for m in messages if m.get("thread_ts") == message["ts"]]
            html += [f'<div class="thread">{_message(user, r)}</div>' for r in replies]
        if not top:
            html.append("<p>No message yet: checkpoints the console opens appear here.</p>")
        return "\n".join(html)


def _mrkdwn(text: str) -> str:
    """Slack's escaped mrkdwn as HTML: entities undone, then everything escaped; links kept as links."""
    plain = unescape(str(text))
    parts, last = [], 0
    for match in _LINK.finditer(plain):
        parts.append(escape(plain[last : match.start()]))
        parts.append(f'<a href="{escape(match.group(1))}">{escape(match.group(2))}</a>')
        last = match.end()
    parts.append(escape(plain[last:]))
    return "".join(parts).replace("\n", "<br>").replace("*", "")


def _message(user: str, message: dict[str, Any]) -> str:
    out = ['<div class="message" data-testid="slack-message">']
    for block in message.get("blocks") or []:
        kind = block.get("type")
        if kind == "header":
            out.append(f"<h2>{escape(str(block.get('text', {}).get('text', '')))}</h2>")
        elif kind == "section":
            if block.get("text"):
                out.append(f"<p>{_mrkdwn(block['text'].get('text', ''))}</p>")
            fields = "".join(f"<div>{_mrkdwn(f.get('text', ''))}</div>" for f in block.get("fields") or [])
            if fields:
                out.append(f'<div class="fields">{fields}</div>')
        elif kind == "context":
            out.append(
                "<p class=context>" + " ".join(_mrkdwn(e.get("text", "")) for e in block.get("elements", [])) + "</p>"
            )
        elif kind == "actions":
            out.append(
                '<div class="actions">' + "".join(_button(user, e) for e in block.get("elements", [])) + "</div>"
            )
    out.append("</div>")
    return "".join(out)


def _button(user: str, element: dict[str, Any]) -> str:
    label = escape(str(element.get("text", {}).get("text", "")))
    if element.get("url"):
        return f'<a class="button" href="{escape(str(element["url"]))}">{label}</a>'
    return (
        f'<form method="post" action="/slack/press"><input type="hidden" name="as" value="{escape(user)}">'
        f'<input type="hidden" name="action_id" value="{escape(str(element.get("action_id", "")))}">'
        f'<input type="hidden" name="value" value="{escape(str(element.get("value", "")))}">'
        f'<button type="submit" data-testid="slack-{escape(str(element.get("action_id", "")))}"'
        f' class="{escape(str(element.get("style", "")))}">{label}</button></form>'
    )


def _modal(user: str, view: dict[str, Any], errors: dict[str, str]) -> str:
    title = escape(str(view.get("title", {}).get("text", "")))
    out = [
        f'<div class="modal" data-testid="slack-modal"><h2>{title}</h2>',
        f'<form method="post" action="/slack/submit"><input type="hidden" name="as" value="{escape(user)}">',
    ]
    for block in view.get("blocks") or []:
        if block.get("type") == "section":
            out.append(f"<p>{_mrkdwn(block.get('text', {}).get('text', ''))}</p>")
            continue
        if block.get("type") != "input":
            continue
        name = escape(str(block.get("block_id", "")))
        label = escape(str(block.get("label", {}).get("text", "")))
        element = block.get("element") or {}
        if element.get("type") == "static_select":
            options = "".join(
                f'<option value="{escape(str(o.get("value", "")))}">'
                f"{escape(str(o.get('text', {}).get('text', '')))}</option>"
                for o in element.get("options", [])
            )
            field = f'<select name="{name}"><option value="">—</option>{options}</select>'
        else:
            field = f'<input name="{name}" size="50">'
        error = (
            f'<span class="error" data-testid="slack-error">{escape(errors[block["block_id"]])}</span>'
            if block.get("block_id") in errors
            else ""
        )
        out.append(f"<label>{label}<br>{field}</label>{error}")
    out.append(
        f'<button type="submit" class="primary" data-testid="slack-submit">'
        f"{escape(str(view.get('submit', {}).get('text', 'Submit')))}</button></form>"
        f'<form method="post" action="/slack/close"><input type="hidden" name="as" value="{escape(user)}">'
        '<button type="submit">Cancel</button></form></div>'
    )
    return "".join(out)


_STYLE = """body{font-family:system-ui,sans-serif;max-width:860px;margin:1em auto;color:#1d1c1d}
h1 small{font-weight:normal;color:#616061;font-size:.6em}a.me{font-weight:bold}
.message{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.8em 0}
.thread{margin-left:2.5em}.fields{display:grid;grid-template-columns:1fr 1fr;gap:.4em}
.actions form{display:inline}.actions button,.button{margin:.2em;padding:.3em .8em;border:1px solid #bbb;
border-radius:4px;background:#fff;cursor:pointer;font-size:.9em;text-decoration:none;color:#1d1c1d}
button.primary{background:#007a5a;color:#fff}button.danger{background:#e01e5a;color:#fff}
.ephemeral{background:#f8f8e8;padding:.5em;border-left:4px solid #ecb22e}.context{color:#616061;font-size:.85em}
.modal{border:2px solid #1264a3;border-radius:8px;padding:1em;margin:1em 0;background:#f4f8fb}
.modal label{display:block;margin:.5em 0}.error{color:#e01e5a}"""
