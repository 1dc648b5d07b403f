"""The demo fleet's resume endpoint and its read-only ledgers page.

``POST /agents/<name>/resume`` is what the console's worker calls with a decision
(API.md, "Delivering a decision to the agent"). It verifies the signature, records
the delivery id in the agent's journal (so a delivery the console retries, even
after this process crashed, is acted on once), answers 202 at once and carries
the decision out in a background thread: the console must not wait for the
whole rest of the workflow before it counts the decision as delivered.

``GET /ledgers`` lists what the simulated systems really did, so an operator can
check whether a refund whose outcome is unknown happened. Everything on it is
agent-supplied text and is escaped.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs, quote, urlsplit

from recovery_client import verify_signature

from .journal import Journal
from .plans import ProviderBehaviour
from .slack_workspace import SimulatedSlack
from .systems import Ledgers

if TYPE_CHECKING:
    from workflows.shapes import Json

    from .agent import DemoAgent
    from .shapes import Decision

log = logging.getLogger("workflows.demo")

MAX_BODY = 1024 * 1024
RESUME_PATH = re.compile(r"/agents/([a-z0-9][a-z0-9_-]{0,63})/resume")
REPLAY_PATH = re.compile(r"/agents/([a-z0-9][a-z0-9_-]{0,63})/replay")
# Outcomes that leave the delivery "accepted", to be carried out again when the fleet next starts.
UNFINISHED = {"stopped", "abandoned"}
REQUIRED = ("workflow_id", "external_id", "checkpoint_id", "action", "delivery_id")


class _Refused(Exception):
    """A request this server answers with ``status`` and ``{"error": error}`` without acting on it."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


class ResumeServer:
    """A threaded HTTP server for the fleet's agents; ``agents`` maps a name to an object with
    ``signing_secret`` and ``on_delivery(payload)`` (a ``DemoAgent``)."""

    def __init__(
        self,
        agents: dict[str, DemoAgent],
        *,
        journal: Journal,
        ledgers: Ledgers,
        host: str = "127.0.0.1",
        port: int = 0,
        provider: ProviderBehaviour | None = None,
    ) -> None:
        self.agents = agents
        self.provider = provider or ProviderBehaviour()
        self.journal = journal
        self.ledgers = ledgers
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.httpd.app = self  # type: ignore[attr-defined]
        self.workers: set[threading.Thread] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.replay_fault = ""  # tests: "garbage" | "hang"
        self.slack: SimulatedSlack | None = None  # the simulated Slack workspace, when the demo connected one
        self.unhang = threading.Event()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="resume-server", daemon=True
        )
        self.thread.start()

    def stop(self, *, wait: float = 10.0) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.join(timeout=wait)

    def join(self, timeout: float = 10.0) -> bool:
        """Wait for the decisions being carried out; True when none is left."""
        with self.lock:
            workers = list(self.workers)
        for worker in workers:
            worker.join(timeout)
        return not any(w.is_alive() for w in workers)

    # --- deliveries ------------------------------------------------------------------
    def _signed_json(self, name: str, body: bytes, signature: str | None, what: str) -> tuple[DemoAgent, Json]:
        """The agent a signed request is for, and its body parsed; _Refused (404, 401 or 400) otherwise."""
        agent = self.agents.get(name)
        if agent is None or not agent.signing_secret:
            raise _Refused(404, "no such agent here")
        if not verify_signature(agent.signing_secret, body, signature):
            log.warning("%s: %s refused: bad signature", name, what)
            raise _Refused(401, "bad signature")
        try:
            parsed: Json = json.loads(body)
            return agent, parsed
        except ValueError:
            raise _Refused(400, "the body is not JSON") from None

    def receive(
        self, name: str, body: bytes, signature: str | None, delivery_header: str | None
    ) -> tuple[int, dict[str, str]]:
        try:
            _agent, payload = self._signed_json(name, body, signature, "delivery")
        except _Refused as refused:
            return refused.status, {"error": refused.error}
        if not isinstance(payload, dict) or not all(isinstance(payload.get(f), str) for f in REQUIRED):
            return 400, {"error": f"the body needs the string fields {', '.join(REQUIRED)}"}
        delivery = cast("Decision", payload)  # the fields it needs are there, and strings: checked above
        delivery_id = delivery_header or delivery["delivery_id"]
        if delivery_id != delivery["delivery_id"]:
            return 400, {"error": "X-Recovery-Delivery does not match the body's delivery_id"}
        if not self.journal.accept_delivery(delivery_id, agent=name, payload=delivery):
            log.info("%s %s: delivery %s seen before; not acting again", name, payload["external_id"], delivery_id)
            return 200, {"status": "duplicate", "delivery_id": delivery_id}
        self.journal.acted(delivery_id)
        self.dispatch(name, delivery_id, delivery)
        return 202, {"status": "accepted", "delivery_id": delivery_id}

    def receive_replay(self, name: str, body: bytes, signature: str | None) -> tuple[int, Mapping[str, object] | bytes]:
        """A signed replay request: answered inline (200) with the results. ``replay_fault`` lets tests
        make this runtime misbehave as a broken one would: ``garbage`` (not JSON) or ``hang`` (too slow)."""
        try:
            agent, request = self._signed_json(name, body, signature, "replay")
        except _Refused as refused:
            return refused.status, {"error": refused.error}
        if not isinstance(request, dict) or not isinstance(request.get("steps"), list):
            return 400, {"error": "the body needs a list of steps"}
        if self.replay_fault == "hang":
            self.unhang.wait(60)
        if self.replay_fault == "garbage":
            return 200, b"<html><body>502 Bad Gateway</body></html>"
        log.info(
            "%s %s: replaying steps %s..%s",
            name,
            request.get("external_id"),
            request.get("from_seq"),
            request.get("to_seq"),
        )
        return 200, agent.replay(request)

    def dispatch(self, name: str, delivery_id: str, payload: Decision) -> None:
        agent = self.agents[name]

        def work() -> None:
            try:
                outcome = agent.on_delivery(payload)
                if outcome not in UNFINISHED:
                    self.journal.finish_delivery(delivery_id)
            except Exception:
                # Left "accepted": the next start of the fleet carries it out again.
                log.exception("%s %s: carrying out delivery %s failed", name, payload.get("external_id"), delivery_id)
            finally:
                with self.lock:
                    self.workers.discard(threading.current_thread())

        thread = threading.Thread(target=work, name=f"resume-{payload['external_id']}", daemon=True)
        with self.lock:
            self.workers.add(thread)
        thread.start()

    def recover(self) -> int:
        """Carry out deliveries accepted before a crash but never finished."""
        recovered = 0
        for delivery in self.journal.unfinished_deliveries():
            if delivery["agent"] in self.agents:
                log.info(
                    "%s %s: carrying out delivery %s accepted before a restart",
                    delivery["agent"],
                    delivery["payload"].get("external_id"),
                    delivery["delivery_id"],
                )
                self.dispatch(delivery["agent"], delivery["delivery_id"], delivery["payload"])
                recovered += 1
        return recovered

    # --- the ledgers page -------------------------------------------------------------------
    def ledgers_page(self, search: str) -> str:
        totals = self.ledgers.totals()
        duplicates = self.ledgers.duplicates()
        rows = self.ledgers.recent(limit=300, search=search)
        cells = "".join(
            f"<tr{' class=dup' if e.idempotency_key in duplicates else ''}>"
            + "".join(
                f"<td>{escape(str(v))}</td>"
                for v in (
                    e.executed_at,
                    e.system,
                    e.operation,
                    e.idempotency_key,
                    e.ref,
                    e.subject,
                    f"{e.amount} {e.currency}" if e.amount else "",
                    e.body,
                    e.agent,
                )
            )
            + "</tr>"
            for e in rows
        )
        dup_list = "".join(f"<li><code>{escape(k)}</code> × {n}</li>" for k, n in duplicates.items())
        money = ", ".join(f"{escape(v)} {escape(c)}" for c, v in totals["money"].items()) or "nothing"
        counts = ", ".join(f"{escape(str(n))} {escape(op)}" for op, n in totals["by_operation"].items()) or "none"
        changed = self.provider.changed
        provider = (
            f"<p class={'bad' if changed else 'ok'}>The provider "
            + (
                "<strong>changed behaviour</strong>: the model answers amounts in cents (replays of earlier "
                "workflows now drift at their model step)."
                if changed
                else "behaves as recorded."
            )
            + f"</p><form method=post action=/faults/provider><input type=hidden name=changed "
            f"value={'0' if changed else '1'}><button>"
            f"{'Restore the provider' if changed else 'Make the provider change behaviour'}"
            "</button></form>"
        )
        outage = self.provider.outage
        whose = f" for {escape(self.provider.outage_agent)}" if self.provider.outage_agent else ""
        provider += (
            f"<p class={'bad' if outage else 'ok'} id=outage>"
            + (
                f"<strong>Provider outage</strong>{whose}: every model call fails (503), so every new workflow stops "
                "at its model step and the console groups them into an incident. Hold the agent from the "
                "incident, switch the outage off, then recover the incident in waves."
                if outage
                else "The model provider is up. An outage makes every new workflow fail at its model step: "
                "within a minute the console opens an incident."
            )
            + f"</p><form method=post action=/faults/outage><input type=hidden name=outage "
            f"value={'0' if outage else '1'}><button>"
            f"{'End the provider outage' if outage else 'Start a provider outage'}"
            "</button></form>"
        )
        return PAGE.format(
            provider=provider,
            search=escape(search, quote=True),
            counts=counts,
            money=money,
            duplicates=f"<ul class=bad>{dup_list}</ul>" if duplicates else "<p class=ok>No key was executed twice.</p>",
            found=f"{len(rows)} execution(s) matching <code>{escape(search)}</code>"
            if search
            else f"The latest {len(rows)} execution(s)",
            rows=cells or "<tr><td colspan=9>Nothing recorded.</td></tr>",
        )


PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Demo ledgers</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #222; }}
table {{ border-collapse: collapse; width: 100%; }} td, th {{ border-bottom: 1px solid #ddd; padding: .25rem .5rem;
text-align: left; vertical-align: top; }} tr.dup td {{ background: #fde2e1; }} .bad {{ color: #a40000; }}
.ok {{ color: #1a6b1a; }} code {{ background: #f3f3f3; padding: 0 .2rem; }}
</style></head><body>
<h1>Demo ledgers</h1>
<p>What the simulated payments, tickets and messaging systems really executed. They do not dedupe:
a key listed twice is a duplicated effect. To settle an unknown refund, search for its idempotency key
(e.g. <code>T-1042:refund</code>): a row means it happened (note its reference), none means it did not.</p>
<form method=get action=/ledgers><label>Idempotency key, reference or ticket
<input name=q value="{search}" size=32></label> <button>Search</button> <a href=/ledgers>all</a></form>
<p>Totals: {counts}; money moved: {money}.</p>
<h2>Model provider</h2>{provider}
<h2>Duplicated keys</h2>{duplicates}
<h2>{found}</h2>
<table><thead><tr><th>When (UTC)<th>System<th>Operation<th>Idempotency key<th>Reference<th>Ticket<th>Amount
<th>Text<th>Agent</tr></thead><tbody>{rows}</tbody></table>
</body></html>
"""


class Handler(BaseHTTPRequestHandler):
    server_version = "demo-fleet/1"
    protocol_version = "HTTP/1.1"

    @property
    def app(self) -> ResumeServer:
        app: ResumeServer = self.server.app  # type: ignore[attr-defined]  # set where the server is made
        return app

    def do_POST(self) -> None:  # http.server's naming
        path = urlsplit(self.path).path
        if path == "/faults/provider":
            return self.toggle_provider()
        if path == "/faults/outage":
            return self.toggle_outage()
        if path.startswith("/slack/") and self.app.slack is not None:
            return self.slack_post(self.app.slack, path)
        replaying = REPLAY_PATH.fullmatch(path)
        match = RESUME_PATH.fullmatch(path) or replaying
        if not match:
            return self.reply(404, {"error": "not found"})
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self.reply(411, {"error": "Content-Length required"})
        if not 0 <= length <= MAX_BODY:
            return self.reply(413, {"error": "body too large"})
        body = self.rfile.read(length)
        if replaying:
            status, answer = self.app.receive_replay(match.group(1), body, self.headers.get("X-Recovery-Signature"))
            if isinstance(answer, bytes):
                return self.send(status, answer, "text/html")
            return self.reply(status, answer)
        status, answer = self.app.receive(
            match.group(1), body, self.headers.get("X-Recovery-Signature"), self.headers.get("X-Recovery-Delivery")
        )
        self.reply(status, answer)

    def toggle_provider(self) -> None:
        """The ledgers page's switch for the "provider changed behaviour" fault (a form post, no body needed)."""
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(min(length, 1000)).decode(errors="replace"))
        self.app.provider.changed = (form.get("changed") or ["0"])[0] == "1"
        log.warning(
            "provider behaviour %s",
            "CHANGED: the model answers amounts in cents" if self.app.provider.changed else "back to normal",
        )
        self.send_response(303)
        self.send_header("Location", "/ledgers")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def toggle_outage(self) -> None:
        """The ledgers page's "provider outage" switch (the incident demo): every model call fails while on."""
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(min(length, 1000)).decode(errors="replace"))
        provider = self.app.provider
        provider.outage = (form.get("outage") or ["0"])[0] == "1"
        # ``agent`` (not on the page's form; the chaos run posts it): only that agent's calls fail.
        provider.outage_agent = (form.get("agent") or [""])[0][:100] if provider.outage else ""
        scope = f" for {provider.outage_agent}" if provider.outage_agent else ""
        log.warning("provider outage %s", f"STARTED{scope}: every model call fails" if provider.outage else "over")
        self.send_response(303)
        self.send_header("Location", "/ledgers")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def slack_post(self, slack: SimulatedSlack, path: str) -> None:
        """The console's Web API calls (JSON), and the simulated workspace's forms (then back to the page)."""
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        body = self.rfile.read(length)
        if path.startswith("/slack/api/"):
            try:
                arguments = json.loads(body or b"{}")
            except ValueError:
                return self.reply(400, {"ok": False, "error": "invalid_json"})
            return self.reply(200, slack.api(path.rsplit("/", 1)[-1], arguments if isinstance(arguments, dict) else {}))
        form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        user = form.pop("as", "")
        if path == "/slack/press":
            slack.press(user, form.get("action_id", ""), form.get("value", ""))
        elif path == "/slack/submit":
            slack.submit(user, form)
        elif path == "/slack/close":
            slack.close(user)
        self.send_response(303)
        self.send_header("Location", f"/slack?as={quote(user)}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/slack" and self.app.slack is not None:
            user = (parse_qs(url.query).get("as") or [""])[0]
            return self.send(200, self.app.slack.page(user).encode(), "text/html; charset=utf-8")
        if url.path == "/healthz":
            return self.send(200, b"ok\n", "text/plain; charset=utf-8")
        if url.path in ("/", "/ledgers"):
            search = (parse_qs(url.query).get("q") or [""])[0].strip()[:200]
            return self.send(200, self.app.ledgers_page(search).encode(), "text/html; charset=utf-8")
        self.reply(404, {"error": "not found"})

    def reply(self, status: int, body: Mapping[str, object]) -> None:
        self.send(status, json.dumps(body).encode(), "application/json")

    def send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # http.server's signature
        log.debug("resume server: " + format, *args)
