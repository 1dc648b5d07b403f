"""Replays: re-running a step range with the recorded inputs to find where drift started.

A ``ReplayRun`` is asked for by an operator, carried out by the ``run_replay``
Celery task (which asks the agent runtime through ``workflows.runtime``), and
ends ``succeeded`` (with the comparison), ``failed`` (with the reason: the
runtime timed out, answered garbage, or broke the safety rule) or
``cancelled``. It never stays running: every run has a deadline that the sweep
enforces. Replay never executes an effect: effect steps carry their recorded
output, and a runtime that answers anything else for them, or reports a new
effect, is recorded as a safety violation.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from .. import drift
from ..clock import database_now
from .agents import Agent
from .base import Conflict, Stateful
from .events import Event
from .steps import Step
from .workflows import Workflow

if TYPE_CHECKING:
    from ..shapes import JsonObject, ReplayRequest, ReplayStep
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


class DriftIgnoreRule(models.Model):
    """Admin-set: a difference at a matching path is not drift (timestamps, generated ids)."""

    step_kind = models.CharField(
        max_length=16, choices=Step.Kind.choices, blank=True, help_text="Empty: every kind of step."
    )
    workflow_kind = models.CharField(max_length=100, blank=True, help_text="Empty: every workflow kind.")
    path = models.CharField(max_length=200, help_text="A glob over the dotted path, e.g. output.*_at or *.request_id")
    note = models.CharField(max_length=200, blank=True, help_text="Why this difference does not matter.")

    class Meta:
        ordering = ["workflow_kind", "step_kind", "path"]

    def __str__(self) -> str:
        return f"{self.path} ({self.step_kind or 'any step'}, {self.workflow_kind or 'any workflow'})"

    @classmethod
    def patterns_for(cls, workflow_kind: str) -> dict[str, list[str]]:
        """Step kind (``"*"`` for any) -> globs, for the drift finder."""
        rules: dict[str, list[str]] = {}
        for rule in cls.objects.filter(workflow_kind__in=["", workflow_kind]):
            rules.setdefault(rule.step_kind or "*", []).append(rule.path)
        return rules


class ReplayRunQuerySet(models.QuerySet["ReplayRun"]):
    def active(self) -> ReplayRunQuerySet:
        return self.filter(status__in=ReplayRun.ACTIVE)

    def expired(self, now: datetime | None = None) -> ReplayRunQuerySet:
        return self.active().filter(deadline_at__lt=now or database_now())


class ReplayRun(Stateful):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)
    TRANSITIONS = {
        Status.QUEUED: {Status.RUNNING, Status.FAILED, Status.CANCELLED},
        Status.RUNNING: {Status.SUCCEEDED, Status.FAILED, Status.CANCELLED},
    }

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="replays")
    checkpoint = models.ForeignKey(
        "workflows.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
        help_text="Asked for from this checkpoint.",
    )
    # No index of its own: it leads replay_by_agent.
    agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="replays",
        help_text="The runtime asked to replay (the workflow's agent at the time).",
        db_index=False,
    )
    from_seq = models.PositiveIntegerField()
    to_seq = models.PositiveIntegerField()
    replay_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField()
    reason = models.TextField(blank=True, help_text="Why it failed or was cancelled.")
    runtime_version = models.CharField(max_length=200, blank=True)
    results = models.JSONField(null=True, blank=True, help_text="What the runtime returned, as sent.")
    comparison = models.JSONField(default=list, blank=True, help_text="Per step: recorded vs replayed.")
    first_divergent_seq = models.PositiveIntegerField(null=True, blank=True)
    explanation = models.TextField(blank=True)
    safety_violations = models.JSONField(default=list, blank=True)

    objects = ReplayRunQuerySet.as_manager()

    class Meta:
        ordering = ["-requested_at", "-pk"]
        indexes = [
            models.Index(fields=["status", "deadline_at"], name="replay_deadlines"),
            models.Index(fields=["agent", "status"], name="replay_by_agent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(from_seq__lte=models.F("to_seq"), from_seq__gte=1), name="replay_range_ordered"
            )
        ]

    def __str__(self) -> str:
        return f"Replay {self.from_seq}..{self.to_seq} of {self.workflow}"

    @property
    def is_finished(self) -> bool:
        return self.status not in self.ACTIVE

    @property
    def succeeded(self) -> bool:
        """The runtime replayed every step and answered (drift or not)."""
        return self.status == self.Status.SUCCEEDED

    @property
    def drifted(self) -> bool:
        return self.first_divergent_seq is not None

    # --- asking for one ------------------------------------------------------------------
    @classmethod
    def request(
        cls, workflow: Workflow, *, from_seq: int, to_seq: int, by: Any, checkpoint: Checkpoint | None = None
    ) -> ReplayRun:
        """Record a replay of ``from_seq..to_seq`` and queue it. ValueError when it cannot be done (says why)."""
        agent = workflow.agent
        if why := agent.cannot(Agent.Capability.REPLAY):
            raise ValueError(why)
        if not 1 <= from_seq <= to_seq:
            raise ValueError("The range must start at step 1 or later and end at or after its start.")
        if to_seq - from_seq + 1 > settings.REPLAY_MAX_STEPS:
            raise ValueError(f"At most {settings.REPLAY_MAX_STEPS} steps are replayed at once.")
        steps = list(workflow.steps.filter(seq__gte=from_seq, seq__lte=to_seq).order_by("seq"))
        if [s.seq for s in steps] != list(range(from_seq, to_seq + 1)):
            raise ValueError(f"Steps {from_seq}..{to_seq} are not all recorded; replay recorded steps only.")
        if unfinished := [s.seq for s in steps if s.status == Step.Status.PENDING]:
            raise ValueError(f"Step {unfinished[0]} is still pending: there is no recorded output to compare with.")
        with transaction.atomic():
            # The agent row serialises the concurrency check: two operators cannot both take the last slot.
            Agent.objects.select_for_update().get(pk=agent.pk)
            if cls.objects.filter(agent=agent).active().count() >= settings.REPLAY_MAX_CONCURRENT_PER_AGENT:
                raise Conflict(
                    f"{agent.name} is already running {settings.REPLAY_MAX_CONCURRENT_PER_AGENT} "
                    "replays; wait for one to finish or cancel one."
                )
            run = cls.objects.create(
                workflow=workflow,
                checkpoint=checkpoint,
                agent=agent,
                from_seq=from_seq,
                to_seq=to_seq,
                requested_by=by,
                deadline_at=timezone.now() + timedelta(seconds=settings.REPLAY_DEADLINE_SECONDS),
            )
            size = len(json.dumps(run.request_payload(steps)).encode())
            if size > settings.REPLAY_MAX_REQUEST_BYTES:
                raise ValueError(
                    f"Steps {from_seq}..{to_seq} weigh {size} bytes with their recorded data; the "
                    f"limit is {settings.REPLAY_MAX_REQUEST_BYTES}. Replay a shorter range."
                )
            Event.record(
                workflow,
                Event.Verb.REPLAY_REQUESTED,
                actor=by,
                data={"replay": run.pk, "from_seq": from_seq, "to_seq": to_seq},
            )
            transaction.on_commit(run.dispatch)
        return run

    def dispatch(self) -> None:
        """Hand the run to a worker. A broker outage leaves it queued: the sweep sends it again."""
        from ..tasks import run_replay

        try:
            run_replay.apply_async((self.pk,), retry=False)
        except Exception:  # the run stays queued and visible; the sweep retries
            import logging

            logging.getLogger(__name__).warning("replay %s: broker unavailable, left queued", self.pk, exc_info=True)

    def request_payload(self, steps: list[Step] | None = None) -> ReplayRequest:
        """What the runtime's replay endpoint receives (docs/API.md, "Replaying a step range")."""
        if steps is None:
            steps = list(self.workflow.steps.filter(seq__gte=self.from_seq, seq__lte=self.to_seq).order_by("seq"))
        workflow = self.workflow
        return {
            "replay_id": str(self.replay_id),
            "workflow_id": str(workflow.pk),
            "external_id": workflow.external_id,
            "kind": workflow.kind,
            "from_seq": self.from_seq,
            "to_seq": self.to_seq,
            "deadline": self.deadline_at.isoformat(),
            "results_path": f"/api/v1/replays/{self.replay_id}/results",
            "steps": [self._step_payload(step) for step in steps],
        }

    @staticmethod
    def _step_payload(step: Step) -> ReplayStep:
        entry: ReplayStep = {"seq": step.seq, "name": step.name, "kind": step.kind, "input": step.input}
        if step.kind == Step.Kind.EFFECT:
            # The runtime must answer with this instead of executing the effect.
            entry["recorded_output"] = step.output
            entry["idempotency_key"] = step.idempotency_key
            entry["external_ref"] = step.external_ref
        return entry

    # --- its life --------------------------------------------------------------------------
    def start(self) -> bool:
        if self.status != self.Status.QUEUED:
            return False
        return self.move(
            self.Status.RUNNING, verb=Event.Verb.REPLAY_STARTED, data={"replay": self.pk}, started_at=timezone.now()
        )

    def fail(self, reason: str) -> bool:
        """Any active run -> FAILED with the reason (timeouts, garbage, a broken safety rule)."""
        self.refresh_from_db()
        if self.is_finished:
            return False
        return self.move(
            self.Status.FAILED,
            verb=Event.Verb.REPLAY_FAILED,
            data={"replay": self.pk, "reason": reason[:500]},
            reason=reason[:4000],
            finished_at=timezone.now(),
        )

    def cancel(self, *, by: Any) -> bool:
        self.refresh_from_db()
        if self.is_finished:
            return False
        return self.move(
            self.Status.CANCELLED,
            actor=by,
            verb=Event.Verb.REPLAY_CANCELLED,
            data={"replay": self.pk},
            reason=f"Cancelled by {by.get_username()}.",
            finished_at=timezone.now(),
        )

    def record_results(self, answer: object, *, actor: Agent | None = None) -> bool:
        """The runtime's answer: check its shape, compare it, and finish. False when the run had ended."""
        self.refresh_from_db()
        if self.status != self.Status.RUNNING:
            return False
        try:
            results, version = parse_results(answer)
        except ValueError as exc:
            return self.fail(f"The runtime answered something that is not a replay result: {exc}")
        steps = [
            dict(s.as_dict())  # drift compares any fields by name
            for s in self.workflow.steps.filter(seq__gte=self.from_seq, seq__lte=self.to_seq).order_by("seq")
        ]
        found = drift.compare(
            steps,
            results,
            rules=DriftIgnoreRule.patterns_for(self.workflow.kind),
            from_seq=self.from_seq,
            to_seq=self.to_seq,
        )
        fields: dict[str, Any] = {
            "results": results,
            "runtime_version": version[:200],
            "comparison": found.as_json(),
            "first_divergent_seq": found.first_divergent_seq,
            "explanation": found.explanation,
            "safety_violations": found.violations,
            "finished_at": timezone.now(),
        }
        if found.violations:
            return self.move(
                self.Status.FAILED,
                actor=actor,
                verb=Event.Verb.REPLAY_SAFETY_VIOLATION,
                data={"replay": self.pk, "violations": found.violations[:5]},
                reason="Safety violation: " + " ".join(found.violations)[:3000],
                **fields,
            )
        if found.missing:
            return self.move(
                self.Status.FAILED,
                actor=actor,
                verb=Event.Verb.REPLAY_FAILED,
                data={"replay": self.pk, "reason": "incomplete"},
                reason="The runtime returned no result for step(s) " + ", ".join(map(str, found.missing)) + ".",
                **fields,
            )
        return self.move(
            self.Status.SUCCEEDED,
            actor=actor,
            verb=Event.Verb.REPLAY_SUCCEEDED,
            data={
                "replay": self.pk,
                "first_divergent_seq": found.first_divergent_seq,
                "explanation": found.explanation[:500],
            },
            **fields,
        )


def parse_results(answer: object) -> tuple[list[JsonObject], str]:
    """``{"results": [{"seq": int, "output": any, "effects": [..]?}], "runtime_version": str?}``, or ValueError."""
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
        raise ValueError('expected a JSON object with a list under "results"')
    results = []
    for i, item in enumerate(answer["results"]):
        if not isinstance(item, dict) or type(item.get("seq")) is not int or "output" not in item:
            raise ValueError(f'results.{i} needs an integer "seq" and an "output"')
        effects = item.get("effects") or []
        if not isinstance(effects, list):
            raise ValueError(f"results.{i}.effects must be a list")
        results.append({"seq": item["seq"], "output": item["output"], "effects": effects})
    seqs = [r["seq"] for r in results]
    if len(seqs) != len(set(seqs)):
        raise ValueError("a step is reported twice")
    version = answer.get("runtime_version")
    return results, version if isinstance(version, str) else ""
