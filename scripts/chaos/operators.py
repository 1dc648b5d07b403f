"""The scripted operators: a person's browser and a person working the queue through the console's forms."""

from __future__ import annotations

import http.cookiejar
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .common import say

if TYPE_CHECKING:
    from .incident import Outage
    from .world import World

APPROVE_FORM = re.compile(r'action="/decisions/(\d+)/approve/"')


class Down(Exception):
    """The console did not answer (killed mid-request, restarting): try again shortly."""


@dataclass
class Answer:
    status: int
    location: str
    body: str


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a person sees where the 302 points; so do we


class Browser:
    """A person's browser: cookies (session, CSRF), forms posted as forms, redirects not followed."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, method: str, path: str, fields: dict | None = None) -> Answer:
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)  # noqa: S310
        try:
            with self.opener.open(request, timeout=20) as response:
                return Answer(
                    response.status, response.headers.get("Location", ""), response.read().decode(errors="replace")
                )
        except urllib.error.HTTPError as exc:
            answer = Answer(exc.code, exc.headers.get("Location", ""), exc.read().decode(errors="replace"))
            if answer.status >= 500:
                raise Down(f"{method} {path}: {answer.status}") from None
            return answer
        except (urllib.error.URLError, OSError, ConnectionError, TimeoutError) as exc:
            raise Down(f"{method} {path}: {exc}") from None

    def csrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def login(self, username: str, password: str) -> None:
        self.request("GET", "/login/")
        answer = self.request(
            "POST", "/login/", {"username": username, "password": password, "csrfmiddlewaretoken": self.csrf()}
        )
        if answer.status != 302:
            raise RuntimeError(f"login of {username} failed: {answer.status}")

    def post(self, path: str, fields: dict) -> Answer:
        return self.request("POST", path, {**fields, "csrfmiddlewaretoken": self.csrf()})


@dataclass
class Logbook:
    """What the operators saw and did, for the report."""

    acknowledged: list[tuple[int, str, str]] = field(default_factory=list)  # (checkpoint, operator, action)
    counts: Counter[str] = field(default_factory=Counter)
    invalid: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    long_leases: set[int] = field(default_factory=set)  # decisions seen with a lease longer than configured
    memory: list[dict[str, Any]] = field(default_factory=list)  # MemorySampler.report() of the run
    exits: list[str] = field(default_factory=list)  # processes that exited by themselves (Supervisor)
    watchdog: list[str] = field(default_factory=list)  # workers restarted by their consumer watchdog

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def sample_leases(self) -> None:
        """A delivery lease must end DELIVERY_LEASE_SECONDS after it was taken, on the database's clock: one
        longer than that was taken on a clock that runs ahead (a killed holder would block its decision)."""
        from datetime import timedelta

        from django.conf import settings
        from django.db.models.functions import Now

        from workflows.models import Decision

        limit = Now() + timedelta(seconds=settings.DELIVERY_LEASE_SECONDS + 2)
        self.long_leases.update(
            Decision.objects.filter(status="running", lease_expires_at__gt=limit).values_list("pk", flat=True)
        )


class Operator(threading.Thread):
    """A scripted person working the queue through the console's forms."""

    RETRY_FOR = 90.0  # seconds a person keeps trying while the console restarts

    def __init__(
        self,
        username: str,
        password: str,
        world: World,
        others: list[str],
        rng: random.Random,
        record: Logbook,
        stop: threading.Event,
        outage: Outage | None = None,
    ) -> None:
        super().__init__(name=f"operator-{username}", daemon=True)
        self.username, self.password, self.others, self.rng = username, password, others, rng
        self.record, self.stop = record, stop
        self.outage = outage  # the incident scenario's: its checkpoints are the commander's (incident.py)
        self.think = world.args.think
        self.browser = Browser(world.console_url)
        from demo.systems import Ledgers

        self.ledgers = Ledgers(world.var_dir / "demo" / "ledgers.sqlite3")
        self.user: Any = None

    def run(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db import connection

        self.user = get_user_model().objects.get(username=self.username)
        self.persist(lambda: self.browser.login(self.username, self.password), "login")
        while not self.stop.is_set():
            try:
                busy = self.approve_one() or self.work_one()
            except Exception as exc:  # a person shrugs and goes on with the next one
                self.record.count("operator_errors")
                say(f"  ! {self.username}: {type(exc).__name__}: {exc}")
                connection.close()
                busy = False
            if not busy:
                self.stop.wait(0.3)
        connection.close()

    def persist(self, attempt: Callable[[], Any], what: str, done: Callable[[], bool] = lambda: False) -> Any:
        """Try until the console answers; ``done`` tells when an attempt whose answer was lost did apply."""
        deadline = time.monotonic() + self.RETRY_FOR
        while True:
            try:
                return attempt()
            except Down:
                self.record.count(f"retried_{what}")
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                time.sleep(self.rng.uniform(0.5, 1.5))
                if done():
                    self.record.count(f"applied_unanswered_{what}")
                    return None

    def post(self, path: str, fields: dict, what: str, done: Callable[[], bool] = lambda: False) -> Answer | None:
        def attempt() -> Answer:
            answer = self.browser.post(path, fields)
            if answer.status == 403 or (answer.status == 302 and answer.location.startswith("/login/")):
                self.browser.login(self.username, self.password)  # session or CSRF cookie gone: log in again
                answer = self.browser.post(path, fields)
            return answer

        return self.persist(attempt, what, done)

    # --- four eyes --------------------------------------------------------------------------------
    def approve_one(self) -> bool:
        """Open the queue's Awaiting approval tab, as a person does, and approve the first proposal listed
        (the tab never lists one's own proposals)."""
        from workflows.models import Checkpoint, Decision

        # The tab's count, as a person glances at it: the page itself is opened only when it is not zero.
        if not Checkpoint.objects.awaiting_approval(by=self.user).exists():
            return False
        tab = "/?scope=approval"

        def look() -> Answer:
            page = self.browser.request("GET", tab)
            if page.status == 302 and page.location.startswith("/login/"):  # the session is gone: log in again
                self.browser.login(self.username, self.password)
                page = self.browser.request("GET", tab)
            return page

        page = self.persist(look, "approvals_tab")
        listed = [int(pk) for pk in APPROVE_FORM.findall(page.body if page else "")]
        if not listed:
            return False
        self.record.count("approvals_tab_listed")
        pk = listed[0]

        def answered() -> bool:
            return Decision.objects.filter(pk=pk).exclude(status=Decision.Status.PROPOSED).exists()

        answer = self.post(f"/decisions/{pk}/approve/", {"next": tab, "reviewed": "1"}, "approve", done=answered)
        self.record.count("approved" if answer is None or answer.status == 302 else f"approve_{answer.status}")
        return True

    # --- the queue ----------------------------------------------------------------------------------
    def work_one(self) -> bool:
        from workflows.models import Checkpoint

        checkpoint = Checkpoint.objects.filter(status=Checkpoint.Status.CLAIMED, assignee=self.user).first()
        outage_incident = self.outage.incident if self.outage is not None else None
        if checkpoint is not None and outage_incident is not None and checkpoint.incident_id == outage_incident:
            # It joined the outage's incident after this operator claimed it: the rollout decides it, so let it go.
            self.post(f"/checkpoints/{checkpoint.pk}/release/", {}, "release")
            self.record.count("released_to_incident")
            return True
        if checkpoint is None:
            pickable = Checkpoint.objects.filter(status=Checkpoint.Status.OPEN)
            if self.outage is not None:
                pickable = self.outage.spares(pickable)
            first = list(pickable.order_by("due_at", "pk").values_list("pk", flat=True)[:6])
            if not first:
                return False
            pk = self.rng.choice(first)  # two people on one queue do not all pick the top row
            if not self.claim(pk):
                return True
            checkpoint = Checkpoint.objects.get(pk=pk)
        self.decide(checkpoint)
        return True

    def claim(self, pk: int) -> bool:
        from workflows.models import Checkpoint

        def mine() -> bool:
            return Checkpoint.objects.filter(pk=pk, status=Checkpoint.Status.CLAIMED, assignee=self.user).exists()

        self.post(f"/checkpoints/{pk}/claim/", {}, "claim", done=mine)
        if mine():
            self.record.count("claimed")
            return True
        self.record.count("claim_lost")
        return False

    def confirmations(self, checkpoint: Any) -> dict[str, str]:
        """Every unknown effect, as the simulated systems really recorded it."""
        fields = {}
        for i, effect in enumerate(checkpoint.unknown_effects):
            executions = self.ledgers.executions_for(effect["idempotency_key"])
            if executions:
                fields.update({f"confirm_{i}": "happened", f"ref_{i}": executions[0].ref})
                self.record.count("confirmed_happened")
            else:
                fields[f"confirm_{i}"] = "did_not_happen"
                self.record.count("confirmed_did_not_happen")
        return fields

    def choose(self, checkpoint: Any) -> dict[str, str]:
        roll = self.rng.random()
        if roll < 0.80:
            action = "resume"
        elif roll < 0.88:
            action = "retry_step"
        elif roll < 0.97:
            action = "handoff"
        else:
            action = "abort"
        if checkpoint.runbook_version and not checkpoint.runbook_version.allows(action):
            action = "resume"
        fields = {
            "action": action,
            "money_confirmed": "on",
            "instructions": f"chaos: {action} after checking the ledgers",
        }
        if action == "handoff":
            if self.others:
                fields["new_owner"] = self.rng.choice(self.others)
            else:
                fields["handoff_to"] = "Tier-2 support"
        return fields

    def decide(self, checkpoint: Any) -> None:
        from workflows.models import Decision

        self.stop.wait(self.rng.uniform(0.5, 1.5) * self.think)  # reading the resume state and the runbook
        fields = {**self.choose(checkpoint), **self.confirmations(checkpoint)}

        def recorded() -> bool:  # earlier decisions of this checkpoint failed or were rejected: not active
            return Decision.objects.filter(checkpoint=checkpoint, decided_by=self.user).active().exists()

        answer = self.post(f"/checkpoints/{checkpoint.pk}/decide/", fields, "decide", done=recorded)
        action = fields["action"]
        if answer is None:
            self.record.count(f"decided_{action}")  # applied, its answer lost with the web server
        elif answer.status == 302 and answer.location.rstrip("/").endswith(f"/checkpoints/{checkpoint.pk}"):
            with self.record.lock:
                self.record.acknowledged.append((checkpoint.pk, self.username, action))
            self.record.count(f"decided_{action}")
        elif answer.status == 409:
            self.record.count("decide_conflict")
        else:
            self.record.count(f"decide_{answer.status}")
            with self.record.lock:
                self.record.invalid.append(
                    f"checkpoint {checkpoint.pk} {action}: {answer.status} {snippet(answer.body)}"
                )


def snippet(html: str) -> str:
    """The form errors of a re-rendered page, roughly."""
    import re

    errors = re.findall(r'class="[^"]*error[^"]*"[^>]*>([^<]{1,200})<', html)
    return "; ".join(e.strip() for e in errors if e.strip())[:300] or html[:200]
