"""The HTTP client for the Recovery Console agent API v1 (one method per endpoint).

Standard library only. Every call is safe to retry because the API is
idempotent (creates dedupe on ``external_id``, steps on ``seq``), so transient
failures (connection errors, 429, 5xx, an answer cut short) are retried with
exponential backoff and jitter, waiting at least as long as a ``Retry-After``
asks, up to ``max_wait``.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .batching import Batching

if TYPE_CHECKING:
    from .reasons import ReasonMap
    from .workflow import Decision, Workflow

__all__ = ["ApiError", "Json", "RecoveryClient", "Unavailable"]

Json = dict[str, Any]  # a JSON object as the API answers it

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
DEFAULT_BATCHING = Batching()  # model and tool steps buffered: 50 steps or 1 s, flushed before any effect


class ApiError(Exception):
    """The console answered with a 4xx/5xx error body."""

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" ({field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field
        self.retry_after = retry_after

    @property
    def stood_down(self) -> bool:
        """The workflow was failed over to a standby: stop working on it and execute nothing more for it."""
        return self.status == 409 and self.code == "stood_down"


class _Garbled(Exception):
    """A 2xx answer cut short (the server died mid-response): the request may or may not have applied."""


class Unavailable(Exception):
    """The console could not be reached after every retry."""


class RecoveryClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.25,
        max_wait: float = 30.0,
        batching: Batching | None = DEFAULT_BATCHING,
        drill_sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``batching``: how ``workflow(...)`` runs (and both adapters) buffer model and tool steps
        (``recovery_client.Batching``; None reports each step at once, as the client did before batching).
        ``drill_sleep``: how a drill's "go silent for N minutes" waits (a test passes a clock)."""
        self.batching = batching
        self.drill_sleep = drill_sleep
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait  # caps one wait, including a server's Retry-After

    # --- endpoints (API.md) -------------------------------------------------
    def create_workflow(
        self, external_id: str, kind: str, title: str, *, owner: str | None = None, context: Json | None = None
    ) -> Json:
        return self._call(
            "POST",
            "/workflows",
            {"external_id": external_id, "kind": kind, "title": title, "owner": owner, "context": context or {}},
        )

    def get_workflow(self, workflow_id: str) -> Json:
        return self._call("GET", f"/workflows/{workflow_id}")

    def report_step(
        self,
        workflow_id: str,
        seq: int,
        name: str,
        kind: str,
        status: str,
        *,
        input: Any = None,
        output: Any = None,
        verified: bool = False,
        promise: str | None = None,
        idempotency_key: str | None = None,
        external_ref: str | None = None,
    ) -> Json:
        return self._call(
            "POST",
            f"/workflows/{workflow_id}/steps",
            {
                "seq": seq,
                "name": name,
                "kind": kind,
                "status": status,
                "input": input,
                "output": output,
                "verified": verified,
                "promise": promise,
                "idempotency_key": idempotency_key,
                "external_ref": external_ref,
            },
        )

    def report_steps(self, workflow_id: str, steps: list[Json]) -> Json:
        """Report up to 500 steps of one workflow at once (each a dict with ``report_step``'s fields).

        All or none are recorded; the same batch again is a harmless retry. Answers
        ``{"created": [seq, …], "steps": [step, …]}``.
        """
        fields = ("input", "output", "promise", "idempotency_key", "external_ref")
        body = [{**{f: None for f in fields}, "verified": False, **step} for step in steps]
        return self._call("POST", f"/workflows/{workflow_id}/steps/batch", {"steps": body})

    def record_drill_journal(
        self, workflow_id: str, *, committed: list[str], pending: Json | None = None, promises: list[str] | None = None
    ) -> Json:
        """At a drill's fault, before carrying it out: what this runtime holds (the committed effects'
        idempotency keys, the step in flight ``{"seq", "name"}`` or None, the promises made). The console's
        drill report checks the resume state against it ("state intact"). The first journal stands."""
        return self._call(
            "PUT",
            f"/workflows/{workflow_id}/drill-journal",
            {"committed": committed, "pending": pending, "promises": promises or []},
        )

    def open_checkpoint(
        self,
        workflow_id: str,
        reason: str,
        *,
        detail: str = "",
        at_seq: int | None = None,
        state: Json | None = None,
        plan: list[Json] | None = None,
    ) -> Json:
        """Pause the workflow. ``plan``: the steps still to do if resumed, each ``{"name", "kind"}`` and,
        for an effect that moves money, ``"amount"`` and ``"currency"``; without it the console assumes
        the worst about money for kinds of workflow that have moved money before."""
        body: Json = {"reason": reason, "detail": detail, "at_seq": at_seq, "state": state or {}}
        if plan is not None:
            body["plan"] = plan
        return self._call("POST", f"/workflows/{workflow_id}/checkpoints", body)

    def get_checkpoint(self, checkpoint_id: str) -> Json:
        return self._call("GET", f"/checkpoints/{checkpoint_id}")

    def finish(self, workflow_id: str, status: str, summary: str = "") -> Json:
        return self._call("POST", f"/workflows/{workflow_id}/finish", {"status": status, "summary": summary})

    def wait_for_decision(self, checkpoint_id: str, *, interval: float = 2.0, timeout: float = 3600.0) -> Json:
        """Poll a checkpoint until it carries a decision (for agents without a resume endpoint)."""
        deadline = time.monotonic() + timeout
        while True:
            decision = self.get_checkpoint(checkpoint_id).get("decision")
            if isinstance(decision, dict):
                return decision
            if time.monotonic() > deadline:
                raise TimeoutError(f"No decision on checkpoint {checkpoint_id} after {timeout:.0f}s")
            time.sleep(interval)

    # --- replays (additions to v1: docs/API.md, "Replaying a step range") ----------------
    def advertise(
        self,
        capabilities: list[str],
        *,
        runtime_version: str | None = None,
        kinds: list[str] | None = None,
        fork_edits: list[str] | None = None,
    ) -> Json:
        """Tell the console what this runtime supports: ``replay``, ``fork``, ``failover``; ``fork_edits``: the
        step kinds whose edited input it applies when a fork restarts at such a step."""
        body: Json = {"capabilities": capabilities, "runtime_version": runtime_version, "kinds": kinds}
        if fork_edits is not None:
            body["fork_edits"] = fork_edits
        return self._call("POST", "/agent/capabilities", body)

    def get_replay(self, replay_id: str) -> Json:
        """A replay asked of this runtime (check ``status`` for ``cancelled`` during a long one)."""
        return self._call("GET", f"/replays/{replay_id}")

    def post_replay_results(
        self,
        replay_id: str,
        results: list[Json] | None = None,
        *,
        runtime_version: str | None = None,
        error: str | None = None,
    ) -> Json:
        """Results of a replay answered 202: ``[{"seq", "output", "effects"?}]``, or ``error`` saying why not."""
        return self._call(
            "POST",
            f"/replays/{replay_id}/results",
            {"results": results, "runtime_version": runtime_version, "error": error},
        )

    # --- a run, reported as it happens (workflow.py) ---------------------------------
    def workflow(
        self,
        external_id: str,
        kind: str,
        title: str,
        *,
        owner: str | None = None,
        context: Json | None = None,
        reasons: ReasonMap | None = None,
        state: Json | None = None,
        finish: bool = True,
        summary: str = "",
        settle_timeout: float = 60.0,
        poll_interval: float = 0.5,
        decision: Decision | None = None,
        batching: Batching | None | bool = True,
    ) -> Workflow:
        """``with client.workflow("T-1042", "refund", "Refund for T-1042") as wf:`` (see ``Workflow``).
        ``batching``: the client's (True), none (False or None), or this run's own ``Batching``."""
        from .workflow import Workflow

        chosen = self.batching if batching is True else (batching or None)
        return Workflow(
            self,
            external_id,
            kind,
            title,
            owner=owner,
            context=context,
            reasons=reasons,
            state=state,
            finish=finish,
            summary=summary,
            settle_timeout=settle_timeout,
            poll_interval=poll_interval,
            decision=decision,
            batching=chosen,
        )

    # --- transport ------------------------------------------------------------
    def _call(self, method: str, path: str, body: Json | None = None) -> Json:
        data = json.dumps(body).encode() if body is not None else None
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                wait = self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random())
                if isinstance(last, ApiError) and last.retry_after:
                    wait = max(wait, last.retry_after)
                time.sleep(min(wait, self.max_wait))
            try:
                return self._once(method, path, data)
            except ApiError as exc:
                if exc.status not in RETRYABLE_STATUS:
                    raise
                last = exc
            # Resending is safe whatever happened to the first request: the API is idempotent.
            except (
                urllib.error.URLError,
                http.client.HTTPException,
                _Garbled,
                ConnectionError,
                TimeoutError,
                OSError,
            ) as exc:
                last = exc
        if isinstance(last, ApiError):
            raise last
        raise Unavailable(f"{method} {path}: {last}") from last

    def _once(self, method: str, path: str, data: bytes | None) -> Json:
        request = urllib.request.Request(  # noqa: S310 - the URL is the operator-configured console
            self.base_url + "/api/v1" + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            retry_after = _seconds(exc.headers.get("Retry-After"))
            try:
                error = json.loads(raw)["error"]
                raise ApiError(
                    exc.code, error.get("code", "error"), error.get("message", ""), error.get("field"), retry_after
                ) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(
                    exc.code, "http_error", raw[:200].decode(errors="replace"), retry_after=retry_after
                ) from None
        try:
            answer = json.loads(raw or b"{}")
        except ValueError as exc:
            raise _Garbled(f"truncated or malformed answer: {raw[:80]!r}") from exc
        if not isinstance(answer, dict):
            raise _Garbled(f"the answer is not a JSON object: {raw[:80]!r}")
        return answer


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None
