"""Workflows (one run of an agent on one job) and the steps of their trajectory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ..clock import database_now
from ..identifiers import normalized
from ..roles import owner_candidates
from ..shapes import Json, JsonObject, PlanStep, ResumeState
from .agents import Agent
from .base import Conflict, Invalid, Stateful
from .drills import Drill
from .events import Event
from .runbooks import Reason
from .sparse_keys import where_set
from .steps import Step

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


def eligible_owner(username: str) -> Operator:
    """The active operator or admin called ``username``; Invalid otherwise.

    Agents are other people's programs: the answer is the same whether nobody has the name or
    its user may not act (a TPM, a superuser without a role, a deactivated account), so it
    neither tells which usernames exist nor hands work to someone who cannot act on it.
    """
    model = get_user_model()
    user: Operator | None = owner_candidates().filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise Invalid("owner must be the username of an active operator or admin.", code="unknown_owner", field="owner")
    return user


class WorkflowQuerySet(models.QuerySet["Workflow"]):
    def start(
        self,
        agent: Agent,
        *,
        external_id: str,
        kind: str,
        title: str,
        owner_name: str | None = None,
        context: JsonObject | None = None,
    ) -> tuple[Workflow, bool]:
        """The agent's workflow for ``external_id``: new (True), or the one an earlier request made (False).

        A resend answers what the first request made, even if its owner was deactivated since;
        a new workflow belongs to ``owner_name`` (Invalid if no active user has it) or the agent's owner.
        """
        external_id = normalized(external_id)  # one spelling per id: compatibility forms fold (NFKC)
        workflow = agent.workflows.filter(external_id=external_id).first()
        if workflow is None:
            owner = agent.owner if owner_name is None else eligible_owner(owner_name)
            try:
                with transaction.atomic():
                    workflow = self.create(
                        agent=agent, external_id=external_id, kind=kind, title=title, owner=owner, context=context or {}
                    )
                    Event.record(workflow, Event.Verb.CREATED, actor=agent, data={"external_id": external_id})
                    Drill.enlist(workflow)
                return workflow, True
            except IntegrityError:  # a concurrent start with the same external_id won
                workflow = agent.workflows.filter(external_id=external_id).first()
                if workflow is None:
                    raise
        workflow.touch()
        return workflow, False

    def owned_by(self, user: Any) -> WorkflowQuerySet:
        return self.filter(owner=user)

    def that_moved_money(self) -> WorkflowQuerySet:
        """Workflows with a committed effect whose input carried money (workflows.money, any spelling)."""
        return self.filter(steps__kind=Step.Kind.EFFECT, steps__status=Step.Status.COMMITTED, steps__carries_money=True)

    def silent(self, now: datetime | None = None) -> WorkflowQuerySet:
        """Running workflows whose agent said nothing for its silence limit (refined per agent in Python)."""
        shortest = timedelta(
            seconds=min(
                [settings.AGENT_SILENCE_SECONDS]
                + list(Agent.objects.exclude(silence_seconds=None).values_list("silence_seconds", flat=True))
            )
        )
        return self.filter(status=Workflow.Status.RUNNING, last_activity_at__lt=(now or database_now()) - shortest)

    def matching(self, text: str) -> WorkflowQuerySet:
        """The navigation search: an id, the external id a customer quotes, a title or an agent's name.

        Exact matches (id, external id, agent) rank first; titles and external ids also match in part.
        """
        text = text.strip()[:200]
        if not text:
            return self.none()
        exact = Q(external_id__iexact=text) | Q(agent__name__iexact=text)
        if (pk := workflow_id_in(text)) is not None:
            exact |= Q(pk=pk)
        loose = Q(external_id__icontains=text) | Q(title__icontains=text)
        return (
            self.filter(exact | loose)
            .select_related("agent", "owner")
            .annotate(exact_match=models.Case(models.When(exact, then=0), default=1))
            .order_by("exact_match", "-last_activity_at", "-pk")
        )


def workflow_id_in(text: str) -> int | None:
    """The workflow id a search names: ``19`` or ``#19`` (how the console writes ids), else None."""
    digits = text.strip().removeprefix("#").strip()
    return int(digits) if digits.isdigit() and digits.isascii() and int(digits) <= 2_147_483_647 else None


class Workflow(Stateful):
    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        RESUMING = "resuming"
        COMPLETED = "completed"
        FAILED = "failed"
        HANDED_OFF = "handed_off"
        ABORTED = "aborted"

    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.HANDED_OFF, Status.ABORTED}
    # How an agent may finish its own workflow (the new owner finishes handed-off work the same way).
    FINISHED_BY_AGENT = (Status.COMPLETED, Status.FAILED)
    TRANSITIONS = {
        Status.RUNNING: {Status.PAUSED, Status.COMPLETED, Status.FAILED},
        Status.PAUSED: {Status.RESUMING, Status.HANDED_OFF, Status.ABORTED},
        # A resuming workflow may be paused again before the agent confirms (it crashed again).
        Status.RESUMING: {Status.RUNNING, Status.PAUSED},
        # Handed-off work is finished by its new (human) owner.
        Status.HANDED_OFF: {Status.COMPLETED, Status.FAILED},
    }

    # No index of its own: it leads one_workflow_per_external_id.
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="workflows", db_index=False)
    external_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)
    title = models.CharField(max_length=300)
    # No index of its own: it leads workflow_by_owner.
    owner = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="workflows", db_index=False
    )
    context = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    summary = models.TextField(blank=True)
    handoff_note = models.TextField(blank=True, help_text="The handoff packet for the new owner.")
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Recovery drills (models/drills.py): the drill that picked this run; kept out of production figures.
    drill = models.ForeignKey(
        "workflows.Drill", on_delete=models.PROTECT, related_name="workflows", null=True, blank=True, db_index=False
    )
    # What the runtime journalled at the drill's fault (docs/API.md "Drill journal"); the report checks the
    # resume state against it ("state intact"). Written once: the first journal of a run stands.
    drill_journal = models.JSONField(null=True, blank=True, editable=False)
    forked_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        related_name="forks",
        help_text="The workflow this one was forked from.",
        null=True,
        blank=True,
        db_index=False,
    )
    forked_at_seq = models.PositiveIntegerField(
        null=True, blank=True, help_text="Steps before this one were copied from the original."
    )

    objects = WorkflowQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "external_id"], name="one_workflow_per_external_id"),
        ]
        indexes = [
            # Keys most rows leave empty, indexed where set (sparse_keys.py).
            *where_set("workflow", "drill", "forked_from", names={"forked_from": "workflow_by_fork_parent"}),
            # By status alone: no index holds last_activity_at, the column every step report touches, so that
            # touch is a HOT update (no index entry; migration 0043). The silence sweep reads the running ones.
            models.Index(fields=["status"], name="workflow_by_status"),
            models.Index(fields=["owner", "status"], name="workflow_by_owner"),
            # The figures of a day: launches (created), failures (finished); the drill-down pages by creation.
            models.Index(fields=["created_at"], name="workflow_by_creation"),
            models.Index(fields=["finished_at"], name="workflow_by_finish"),
        ]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("workflow", args=[self.pk])

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    def touch(self, *, reading: bool = False) -> None:
        """A sign of life from the agent, for the silence sweep. A read (``reading``) counts only while the
        workflow runs: an agent polling its paused workflow for a decision is not activity (issue 8: it
        showed "last activity 0 s ago" for ten minutes), but a running agent that reads is alive."""
        self.last_activity_at = timezone.now()
        rows = Workflow.objects.filter(pk=self.pk)
        if reading:
            rows = rows.filter(status__in=[Workflow.Status.RUNNING, Workflow.Status.RESUMING])
        rows.update(last_activity_at=self.last_activity_at)

    def finish(self, status: str, summary: str, *, actor: Any) -> bool:
        if self.checkpoints.unresolved().exists():
            raise Conflict("The workflow has an open checkpoint; it cannot finish until it is resolved.")
        return self.move(
            status,
            from_=[self.Status.RUNNING, self.Status.HANDED_OFF],
            actor=actor,
            verb=Event.Verb.finished(status),
            data={"summary": summary},
            summary=summary,
            finished_at=timezone.now(),
        )

    def record_step(self, report: Mapping[str, Any], *, actor: Agent) -> tuple[Step, bool]:
        """Record one step of the trajectory, idempotently: ``report`` holds ``seq`` and Step.RECORDED_FIELDS.

        Returns the step and True when it is new; False for an identical resend or a pending step
        moved on to committed or failed. Conflict when the workflow is finished, the idempotency key
        belongs to another step, or the report would change what is recorded.
        """
        if connection.vendor == "postgresql" and not self.is_terminal and self.drill_id is None:
            # The common case in one statement; a taken seq or key, and a drilled run (its money effects are
            # refused: Drill.refuse_money), go the usual way below.
            step = Step.insert_one_touching(self, report, actor=actor)
            if step is not None:
                return step, True
        return self.record_steps([report], actor=actor)[0]

    def record_steps(self, reports: list[Mapping[str, Any]], *, actor: Agent) -> list[tuple[Step, bool]]:
        """Record steps in order, each by ``record_step``'s rules, in one transaction: all or none.

        On PostgreSQL the new steps, their events and the sign of life cost one statement
        (``Step.insert_many_touching``: ``unnest()`` of one array per column); elsewhere one
        ``INSERT … ON CONFLICT DO NOTHING`` for the lot and one insert of their events. Only a report
        whose seq or idempotency key is already taken is looked up and judged against what is
        recorded (a resend, a pending -> committed|failed, or a Conflict).
        """
        if self.is_terminal:
            raise Conflict(f"The workflow is {self.status}; it takes no more steps.", code="workflow_finished")
        seqs = [report["seq"] for report in reports]
        if len(set(seqs)) != len(seqs):
            duplicate = Invalid("Each step of a batch needs its own seq.", code="duplicate_seq", field="seq")
            duplicate.index = next(i for i, seq in enumerate(seqs) if seq in seqs[:i])
            raise duplicate
        try:
            with transaction.atomic():  # one commit: the sign of life, the steps and their events
                if connection.vendor == "postgresql":
                    Drill.refuse_money(self, reports, MoneyTrail())
                    new = Step.insert_many_touching(self, reports, actor=actor)  # touch, steps, events: 1 statement
                else:
                    self.touch()
                    Drill.refuse_money(self, reports, MoneyTrail())
                    new = Step.insert_new(self, reports)
                    Event.objects.bulk_create(
                        [
                            Event.about(
                                new[seq],
                                Event.Verb.step(new[seq].status),
                                actor=actor,
                                data={"seq": seq, "name": new[seq].name, "kind": new[seq].kind},
                            )
                            for seq in seqs
                            if seq in new
                        ]
                    )
                results = []
                for index, report in enumerate(reports):
                    try:
                        results.append(
                            (new[report["seq"]], True)
                            if report["seq"] in new
                            else (self._apply_to_recorded(report, actor), False)
                        )
                    except (Conflict, Invalid) as exc:
                        exc.index = index  # which report of a batch was refused
                        raise
                return results
        except (Conflict, Invalid) as exc:
            self.touch()  # a refused report is a sign of life too
            if exc.code == "idempotency_key_taken":
                self.refuse_duplicate(reports[getattr(exc, "index", 0) or 0], actor=actor)
            raise

    def refuse_duplicate(self, report: Mapping[str, Any], *, actor: Agent) -> None:
        """Record an effect reported again under a key another step holds: a duplicate-effect attempt
        the API refused (409), counted by workflows.metrics. Written after the refused transaction."""
        holder = self._key_holder(report.get("idempotency_key"))
        Event.record(
            self,
            Event.Verb.EFFECT_DUPLICATE_REFUSED,
            actor=actor,
            data={
                "seq": report["seq"],
                "name": str(report.get("name", ""))[:200],
                "idempotency_key": report.get("idempotency_key"),
                "recorded_seq": holder.seq if holder else None,
                "recorded_status": holder.status if holder else None,
            },
        )

    def _apply_to_recorded(self, report: Mapping[str, Any], actor: Agent, *, retry: bool = True) -> Step:
        step = self.steps.filter(seq=report["seq"]).first()
        if step is None:  # the insert met another step's idempotency key, not this seq
            key = report.get("idempotency_key")
            if key is None and report["kind"] == Step.Kind.EFFECT:
                raise Invalid(
                    "An effect step needs an idempotency_key, so that it is never executed twice.",
                    code="idempotency_key_required",
                    field="idempotency_key",
                )
            if holder := self._key_holder(key):
                raise Step.key_taken(holder.seq)
            if not retry:
                raise Conflict(f"Step {report['seq']} could not be recorded; report it again.", code="conflict")
            # The conflicting row is gone again (its transaction rolled back): insert once more.
            if new := Step.insert_new(self, [report]):
                step = new[report["seq"]]
                Event.record(
                    step,
                    Event.Verb.step(step.status),
                    actor=actor,
                    data={"seq": step.seq, "name": step.name, "kind": step.kind},
                )
                return step
            return self._apply_to_recorded(report, actor, retry=False)
        return step.apply_report(report, actor=actor)

    def _key_holder(self, key: str | None) -> Step | None:
        return self.steps.filter(idempotency_key=key).first() if key else None

    def hold_here(self, *, at_seq: int | None, detail: str) -> Checkpoint | None:
        """Its agent is on hold (models/incidents.py): the unresolved ``held`` checkpoint, opened now by the
        console with the full resume state if there is none yet. None when it cannot pause (already paused
        for another reason, or finished)."""
        from .checkpoints import Checkpoint

        held = self.checkpoints.unresolved().filter(reason=Reason.HELD).first()
        if held is not None:
            return held
        try:
            return Checkpoint.open_for(self, reason=Reason.HELD, at_seq=at_seq, by_console=True, detail=detail)
        except Conflict:
            return None

    def resume_state(
        self, *, at_seq: int | None = None, agent_state: Json = None, plan: list[PlanStep] | None = None
    ) -> ResumeState:
        """The minimum that makes the next step safe, computed from the recorded steps.

        ``plan`` is what the agent says it will do if resumed (None: it did not say)."""
        steps = list(self.steps.order_by("seq"))
        committed = [s.as_dict() for s in steps if s.kind == Step.Kind.EFFECT and s.status == Step.Status.COMMITTED]
        unknown = [s.as_dict() for s in steps if s.is_unknown_effect]
        verified = [s for s in steps if s.verified and s.status == Step.Status.COMMITTED]
        pending = next((s for s in steps if s.seq == at_seq and s.status != Step.Status.COMMITTED), None)
        if pending is None:
            pending = next(
                (s for s in reversed(steps) if s.status == Step.Status.PENDING and not s.is_unknown_effect), None
            )
        return {
            "committed": committed,
            "pending": pending.as_dict() if pending else None,
            "last_verified_output": verified[-1].output if verified else None,
            "promises": [s.promise for s in steps if s.promise and s.status != Step.Status.FAILED],
            "unknown_effects": unknown,
            "state": agent_state if agent_state is not None else {},
            "plan": plan,
        }


class MoneyTrail:
    """``money.History`` from the recorded trail: the kinds and effect names that have moved money before."""

    def kind_moved_money(self, kind: str) -> bool:
        return Workflow.objects.filter(kind=kind).that_moved_money().exists()

    def names_that_moved_money(self, names: Iterable[str]) -> set[str]:
        names = sorted(set(names))[:500]
        moved = Step.objects.filter(
            kind=Step.Kind.EFFECT, status=Step.Status.COMMITTED, carries_money=True, name__in=names
        )  # the partial index step_moved_money
        return set(moved.values_list("name", flat=True).distinct())
