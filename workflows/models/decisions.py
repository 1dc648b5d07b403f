"""Decisions: what an operator approved on a checkpoint; each row is its own outbox entry."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Q
from django.db.models.expressions import Combinable
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from .. import via
from ..clock import database_now
from ..shapes import DecisionPayload, HandoffPacket, JsonObject, RetryTarget, StandDownPayload
from .agents import Agent
from .base import IllegalTransition, Stateful, moves_at_once
from .checkpoints import Checkpoint
from .confirmations import Confirmation
from .decision_queries import INACTIVE_STATUSES, DecisionQuerySet, DecisionStatus
from .events import Event
from .notifications import Notification
from .relay import hand_to_broker, stand_down
from .runbooks import RESUMING_ACTIONS, Action
from .sparse_keys import where_set
from .steps import Step
from .workflows import Workflow

if TYPE_CHECKING:
    from .base import Actor

User = settings.AUTH_USER_MODEL


class Decision(Stateful):
    """What an operator approved on a checkpoint. The row is its own outbox entry."""

    Status = DecisionStatus
    # What an agent sees of its decision: a proposal is not one yet (four eyes), a rejection never was.
    SHOWN_TO_AGENT = (Status.QUEUED, Status.RUNNING, Status.SUCCEEDED, Status.FAILED)

    TRANSITIONS = {
        Status.PROPOSED: {Status.QUEUED, Status.REJECTED},
        Status.QUEUED: {Status.RUNNING, Status.SUCCEEDED},
        # RUNNING -> QUEUED: an attempt failed (or its lease expired) and another one is due.
        Status.RUNNING: {Status.SUCCEEDED, Status.FAILED, Status.QUEUED},
    }

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="decisions")
    action = models.CharField(max_length=16, choices=Action.choices)
    instructions = models.TextField(blank=True)
    confirmations = models.JSONField(
        default=dict, blank=True, help_text="idempotency_key -> " + " | ".join(Confirmation.values)
    )
    confirmation_refs = models.JSONField(
        default=dict, blank=True, help_text="idempotency_key -> external reference an operator saw"
    )
    new_owner = models.ForeignKey(
        User, on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )
    handoff_to = models.CharField(max_length=200, blank=True, help_text="A human process, when not a person.")
    decided_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(default=timezone.now)
    approved_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, related_name="+", null=True, blank=True, db_index=False
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    standby = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Failover: the standby agent that takes the workflow over.",
        null=True,
        blank=True,
        db_index=False,
    )
    replaced_agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Failover: the agent told to stand down.",
        null=True,
        blank=True,
        db_index=False,
    )
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    dispatches = models.PositiveIntegerField(
        default=0,
        help_text="Messages the relay sent since the last attempt started: each one waits longer "
        "for a worker than the one before (see Decision.redispatched).",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    repeats_confirmed = models.JSONField(
        default=list,
        blank=True,
        help_text="Effects committed earlier in the lineage that the operator confirmed "
        "this decision runs again (a fork's money).",
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    # Where it was decided (the console, Slack, an email link): set while drafting, from workflows/via.py.
    channel = models.CharField(max_length=16, choices=via.Via.choices, default=via.current)

    objects = DecisionQuerySet.as_manager()

    class Meta:
        ordering = ["-decided_at"]
        constraints = [
            # One decision per checkpoint: failed and rejected ones stay as history.
            models.UniqueConstraint(
                fields=["checkpoint"],
                condition=~Q(status__in=list(INACTIVE_STATUSES)),
                name="one_active_decision_per_checkpoint",
            ),
        ]
        indexes = [
            # Keys most rows leave empty, indexed where set (sparse_keys.py).
            *where_set("decision", "new_owner", "standby", "replaced_agent"),
            *where_set("decision", "approved_by", names={"approved_by": "decision_by_approver"}),
            models.Index(fields=["status", "next_attempt_at"], name="decision_outbox"),
            models.Index(fields=["status", "lease_expires_at"], name="decision_leases"),
            models.Index(fields=["finished_at"], name="decision_by_finish"),  # resumes of a day
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} on {self.checkpoint}"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED, self.Status.REJECTED)

    @property
    def awaits_approval(self) -> bool:
        """Four eyes: proposed, waiting for a second operator."""
        return self.status == self.Status.PROPOSED

    @property
    def was_rejected(self) -> bool:
        return self.status == self.Status.REJECTED

    @property
    def is_in_delivery(self) -> bool:
        """Went out for delivery (approved where four eyes applied): what the agent sees of it."""
        return self.status in self.SHOWN_TO_AGENT

    @property
    def is_queued(self) -> bool:
        return self.status == self.Status.QUEUED

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def was_delivered(self) -> bool:
        return self.status == self.Status.SUCCEEDED

    @property
    def delivery_failed(self) -> bool:
        return self.status == self.Status.FAILED

    @property
    def resumes(self) -> bool:
        return self.action in RESUMING_ACTIONS

    @property
    def aborts(self) -> bool:
        return self.action == Action.ABORT

    @property
    def hands_off(self) -> bool:
        return self.action == Action.HANDOFF

    @property
    def new_owner_name(self) -> str | None:
        """Who takes a handoff over: an operator's username, or the human process named instead."""
        return self.new_owner.get_username() if self.new_owner else (self.handoff_to or None)

    @property
    def agent(self) -> Agent:
        """Who receives the decision: the standby for a failover, else the workflow's agent."""
        return self.standby if self.standby is not None else self.checkpoint.workflow.agent

    def failover_agents(self) -> tuple[Agent, Agent]:
        """A failover's (replaced agent, standby): both are set when it is decided, and PROTECTed after."""
        if self.replaced_agent is None or self.standby is None:
            raise IllegalTransition(f"Decision {self.pk} names no standby and replaced agent: it is not a failover.")
        return self.replaced_agent, self.standby

    @property
    def is_polled(self) -> bool:
        """Agents without a resume endpoint fetch their decision from the API."""
        return not self.agent.resume_url

    def enqueue(self) -> None:
        """Ready for delivery: resuming workflows show it at once; after the commit the decision goes
        to the broker at once, and the row stays due for the relay until a worker takes it."""
        checkpoint = self.checkpoint
        if not Checkpoint._meta.get_field("workflow").is_cached(checkpoint):  # the move dropped it: one read
            checkpoint.workflow = Workflow.objects.select_related("agent").get(pk=checkpoint.workflow_id)
        workflow = checkpoint.workflow
        polled = self.next_attempt_at is None and self.is_polled  # asked before a move drops the cached agent
        if self.action == Action.FAILOVER and workflow.status == Workflow.Status.PAUSED:
            replaced, standby = self.failover_agents()
            # From here on the standby owns the workflow in the API: the original's reports answer 404,
            # so it cannot record an effect twice even before it hears the stand-down notice.
            workflow.move(
                Workflow.Status.RESUMING,
                actor=self.decided_by,
                verb=Event.Verb.RESUMING,
                expect={"agent_id": replaced.pk},
                agent=standby,
            )
            moved = {"from_agent": replaced.name, "to_agent": standby.name}
            Event.record(workflow, Event.Verb.FAILED_OVER, actor=self.decided_by, data=moved)
        elif self.resumes and workflow.status == Workflow.Status.PAUSED:
            workflow.move(Workflow.Status.RESUMING, actor=self.decided_by, verb=Event.Verb.RESUMING)
        if not polled:
            if self.next_attempt_at is None:  # an approved proposal (a decision is stamped due as inserted)
                Decision.objects.filter(pk=self.pk).update(next_attempt_at=timezone.now())
            transaction.on_commit(functools.partial(hand_to_broker, self.pk))

    @staticmethod
    def redispatched(now: datetime) -> dict[str, Combinable]:
        """The fields of a queued row the relay has just sent: due again after one lease, then two, then
        four at the most. A message is rarely lost; a queue behind busy workers is common, and a copy
        sent every lease into a queue longer than a lease would flood it with copies the workers must
        skip, slowing the very deliveries they wait for (a 10,000-workflow chaos soak had three skipped
        copies per delivery). A broker that lost everything (Redis restarted empty) has every decision
        sent again within four leases."""
        lease = timedelta(seconds=settings.DELIVERY_LEASE_SECONDS)
        return {
            "dispatches": models.F("dispatches") + 1,
            "next_attempt_at": models.Case(
                models.When(dispatches=0, then=models.Value(now + lease)),
                models.When(dispatches=1, then=models.Value(now + 2 * lease)),
                default=models.Value(now + 4 * lease),
            ),
        }

    def may_be_approved_by(self, user: Any) -> bool:
        """Four eyes: a proposal waits for an operator other than its proposer."""
        return self.awaits_approval and self.decided_by_id != user.pk

    def approve(self, *, by: Any) -> bool:
        """Four eyes: a second operator lets a money decision go out. False when ``by`` may not (the
        proposer) or the proposal was answered first; ``refusal`` says which."""
        if self.decided_by_id == by.pk:
            return False
        with transaction.atomic():
            if not self.move(
                self.Status.QUEUED, from_=[self.Status.PROPOSED], actor=by, verb=Event.Verb.APPROVED, approved_by=by
            ):
                return False
            # The decision goes out now: the decision clock, running while the proposal waited, stops.
            Checkpoint.objects.filter(pk=self.checkpoint_id, clock_stopped_at__isnull=True).update(
                clock_stopped_at=timezone.now()
            )
            self.enqueue()
        return True

    def reject(self, *, by: Any, note: str = "") -> bool:
        """The second operator says no: the checkpoint goes back to its proposer. False when answered first."""
        with transaction.atomic():
            if not self.move(
                self.Status.REJECTED,
                from_=[self.Status.PROPOSED],
                actor=by,
                verb=Event.Verb.REJECTED,
                data={"note": note[:1000]},
                finished_at=timezone.now(),
                last_error=f"Rejected by {by.get_username()}: {note}"[:2000],
            ):
                return False
            # Back to its proposer, or to the queue when they can no longer take it; the clock continues.
            self.checkpoint.give_back(self.decided_by, actor=by, verb=Event.Verb.REOPENED)
        return True

    def refusal(self, *, by: Any) -> str:
        """Why ``by`` could not approve or reject this decision, as it stands now."""
        self.refresh_from_db()
        if self.status != self.Status.PROPOSED:
            return f"The decision is {self.status}; it no longer waits for approval."
        if self.decided_by_id == by.pk:
            return "The second approval must come from another operator."
        return "Someone else answered this decision first."

    def start_attempt(self, *, lease_seconds: int | None = None) -> bool:
        """QUEUED -> RUNNING under a lease. Only the holder of a live lease may deliver.

        The lease ends on the database's clock (``workflows.clock``): the worker that judges it
        expired (``stuck``) may run on another host with another clock, or a skewed one."""
        lease = timedelta(seconds=lease_seconds or settings.DELIVERY_LEASE_SECONDS)
        # PostgreSQL: computed by the UPDATE itself (Now() is statement_timestamp(), database_now's clock), no
        # round trip to read the clock on the way from the broker to the agent. SQLite's 'now' counts
        # milliseconds: there database_now() rounds it up, as every other deadline there is.
        ends = (
            models.ExpressionWrapper(Now() + models.Value(lease), output_field=models.DateTimeField())
            if connection.vendor == "postgresql"
            else database_now() + lease
        )
        with moves_at_once():  # PostgreSQL: the lease, its event and the row as it left it, one statement
            return self.move(
                self.Status.RUNNING,
                from_=[self.Status.QUEUED],
                verb=Event.Verb.DELIVERY_STARTED,
                data={"attempt": self.attempts + 1},
                attempts=models.F("attempts") + 1,
                lease_expires_at=ends,
                next_attempt_at=None,
                dispatches=0,
            )

    def mark_succeeded(self, *, now: datetime | None = None) -> bool:
        """The agent's resume endpoint accepted the decision. A worker records it, on the database's clock:
        the workflow's last activity, from which its silence is measured, must not be this process's.
        (``now``: a recorded history, such as the demo's, says when it happened.) On PostgreSQL the UPDATE
        stamps it with its own ``Now()`` (database_now's clock), so no round trip reads the clock first."""
        if now is None and connection.vendor == "postgresql":
            return self._succeed(Event.Verb.DELIVERED, now=Now())
        return self._succeed(Event.Verb.DELIVERED, now=now or database_now())

    @property
    def awaits_fetch(self) -> bool:
        """Queued for an agent that polls: its next fetch of the checkpoint is the delivery."""
        return self.is_queued and self.is_polled

    def mark_fetched(self) -> bool:
        """A polling agent fetched its queued decision: that is the delivery. False when none awaited it."""
        return self.awaits_fetch and self._succeed(Event.Verb.FETCHED_BY_AGENT, actor=self.agent)

    def audit_facts(self) -> JsonObject:
        """What the operator decided, in full, for the trail: the row may change later, its event never."""
        return {
            "instructions": self.instructions[:4000],
            "confirmations": self.confirmations,
            "confirmation_refs": self.confirmation_refs,
            "new_owner": self.new_owner.get_username() if self.new_owner is not None else None,
            "handoff_to": self.handoff_to,
            "repeats_confirmed": self.repeats_confirmed,
        }

    def _succeed(self, verb: Event.Verb, *, actor: Actor | None = None, now: datetime | Now | None = None) -> bool:
        """The decision SUCCEEDED and carried out, in one transaction (``now``: ``Now()`` stamps it with the
        UPDATE's own time, which the rest of the record then uses)."""
        # The worker that delivered is "system"; an agent that fetched its decision did it itself.
        with transaction.atomic(), moves_at_once():
            if not self.move(
                self.Status.SUCCEEDED,
                from_=[self.Status.QUEUED, self.Status.RUNNING],
                verb=verb,
                actor=actor,
                finished_at=now or timezone.now(),
                lease_expires_at=None,
                next_attempt_at=None,
                last_error="",
            ):
                return False
            self.carry_out(actor=actor, now=self.finished_at if isinstance(now, Now) else now)
        return True

    def carry_out(self, *, actor: Actor | None = None, now: datetime | None = None) -> None:
        """The decision reached the agent: resolve the checkpoint and move the workflow on (at ``now``)."""
        now = now or timezone.now()
        # One read for the checkpoint, its workflow (the event's, and the one moved on) and its owner. Every
        # move below is a compare-and-set, so reading the workflow before the checkpoint's move rather than
        # after it changes no outcome: a workflow moved meanwhile makes its move lose, as it would then.
        self.checkpoint = checkpoint = Checkpoint.objects.select_related("workflow__owner").get(pk=self.checkpoint_id)
        workflow = checkpoint.workflow
        checkpoint.move(Checkpoint.Status.RESOLVED, actor=actor, verb=Event.Verb.RESOLVED, resolved_at=now)
        if self.resumes:
            if workflow.status == Workflow.Status.RESUMING:
                # Who has the workflow now: "returned to the same owner" compares it with the interruption's.
                owner = workflow.owner.get_username() if workflow.owner else None
                workflow.move(
                    Workflow.Status.RUNNING,
                    actor=actor,
                    verb=Event.Verb.RESUMED,
                    data={"owner": owner},
                    last_activity_at=now,
                )
            if self.action == Action.FAILOVER:
                transaction.on_commit(functools.partial(stand_down, self.pk))
        elif self.action == Action.HANDOFF:
            packet = self.handoff_packet()
            if workflow.move(
                Workflow.Status.HANDED_OFF,
                verb=Event.Verb.HANDED_OFF,
                actor=self.decided_by,
                data={"to": packet["to"], "owner": packet["to"]},
                owner=self.new_owner or workflow.owner,
                handoff_note=packet["note"],
                last_activity_at=now,
            ):
                self.tell_new_owner(workflow, at=now)
        elif self.action == Action.ABORT:
            workflow.move(
                Workflow.Status.ABORTED,
                verb=Event.Verb.ABORTED,
                actor=self.decided_by,
                summary=self.instructions,
                finished_at=now,
                last_activity_at=now,
            )

    def ask_for_approval(self) -> None:
        """Four eyes: the people who may approve hear at once that this proposal waits for them, on their
        channels and devices (must run in the recording transaction). They are the checkpoint's team's
        operators, or every operator when it has no team; never the proposer, who may not approve it."""
        from ..roles import operators

        checkpoint = self.checkpoint
        people = checkpoint.team.operators() if checkpoint.team is not None else list(operators())
        by = self.decided_by.get_username() if self.decided_by is not None else "An operator"
        Notification.send(
            kind=Notification.Kind.APPROVAL_WAITING,
            checkpoint=checkpoint,
            key=f"proposal:{self.pk}",
            users=[u for u in people if u.pk != self.decided_by_id],
            team=True,
            title=f"{by} proposes to {Action(self.action).label.lower()}: waiting for your approval "
            f"({checkpoint.workflow.title})"[:300],
            body=self.instructions[:500],
        )

    def tell_new_owner(self, workflow: Workflow, *, at: datetime) -> None:
        """The operator a workflow was handed to hears it at once, on their channels (the outbox), with the note."""
        if self.new_owner is None or self.new_owner_id == self.decided_by_id:
            return
        by = self.decided_by.get_username() if self.decided_by is not None else "An operator"
        Notification.send(
            kind=Notification.Kind.HANDED_OFF,
            users=[self.new_owner],
            at=at,
            title=f"{by} handed “{workflow.title}” to you"[:300],
            body=self.instructions[:1000] or "No handoff note.",
            key=f"handoff:{self.pk}",
            path=reverse("workflow", args=[workflow.pk]),
        )

    def handoff_packet(self) -> HandoffPacket:
        return {"to": self.new_owner_name or "", "note": self.instructions}

    def mark_attempt_failed(self, error: str, *, now: datetime | None = None) -> bool:
        """An attempt failed: retry with backoff, or after the last one fail and requeue the checkpoint.

        Workers call it: the backoff and a reopened clock start from the database's time (``now``)."""
        self.refresh_from_db()  # the attempt count decides between retrying and failing
        this_attempt = {"attempts": self.attempts}
        now = now or database_now()
        if self.attempts < settings.DELIVERY_MAX_ATTEMPTS:
            delay = settings.DELIVERY_BACKOFF_SECONDS * (2 ** (self.attempts - 1))
            return self.move(
                self.Status.QUEUED,
                from_=[self.Status.RUNNING],
                expect=this_attempt,
                verb=Event.Verb.DELIVERY_RETRY,
                data={"attempt": self.attempts, "error": error[:500]},
                last_error=error[:2000],
                lease_expires_at=None,
                next_attempt_at=now + timedelta(seconds=delay),
            )
        with transaction.atomic():
            if not self.move(
                self.Status.FAILED,
                from_=[self.Status.RUNNING],
                expect=this_attempt,
                verb=Event.Verb.DELIVERY_FAILED,
                data={"attempts": self.attempts, "error": error[:500]},
                last_error=error[:2000],
                lease_expires_at=None,
                finished_at=now,
            ):
                return False
            checkpoint = self.checkpoint
            checkpoint.move(
                Checkpoint.Status.OPEN,
                verb=Event.Verb.RETURNED_TO_QUEUE,
                data={"error": error[:500]},
                assignee=None,
                claimed_at=None,
                **checkpoint.continued_clock(now),
            )
            workflow = self.checkpoint.workflow
            workflow.refresh_from_db()
            if workflow.status == Workflow.Status.RESUMING and self.action == Action.FAILOVER:
                # The standby never got it: the workflow goes back to the agent it came from.
                replaced, _ = self.failover_agents()
                workflow.move(
                    Workflow.Status.PAUSED,
                    verb=Event.Verb.FAILOVER_UNDONE,
                    data={"error": error[:500], "to_agent": replaced.name},
                    agent=replaced,
                )
            elif workflow.status == Workflow.Status.RESUMING:
                workflow.move(Workflow.Status.PAUSED, verb=Event.Verb.PAUSED, data={"error": error[:500]})
        return True

    def payload(self) -> DecisionPayload:
        """What the agent's resume endpoint receives (API.md)."""
        checkpoint = self.checkpoint
        workflow = checkpoint.workflow
        return {
            "workflow_id": str(workflow.pk),
            "external_id": workflow.external_id,
            "checkpoint_id": str(checkpoint.pk),
            "action": self.action,
            "instructions": self.instructions,
            "confirmations": self.confirmations,
            # Beyond API.md: the external reference the operator saw for each effect confirmed as happened.
            "confirmation_refs": self.confirmation_refs,
            "resume_state": checkpoint.resume_state,
            "new_owner": self.new_owner_name,
            "delivery_id": str(self.delivery_id),
            # Beyond API.md v1's first fields: which failed effect a retry_step tries again, under its key.
            "retry": self.retry_target(),
            # A failover names the agent that stood down; a fork's checkpoint state says where it came from.
            "failover": {"from_agent": self.replaced_agent.name} if self.replaced_agent is not None else None,
        }

    def stand_down_message(self) -> str:
        """What the replaced agent is told when it reports on the workflow again (API 409 ``stood_down``)."""
        standby = self.standby.name if self.standby is not None else "a standby"
        return (
            f"Workflow {self.checkpoint.workflow_id} was failed over to {standby} "
            f"at {self.decided_at:%Y-%m-%d %H:%M:%S} UTC: stand down and do not act on it again "
            "(your stand-down notice says the same)."
        )

    def stand_down_payload(self) -> StandDownPayload:
        """What the replaced agent's resume endpoint receives after a failover (docs/API.md)."""
        workflow = self.checkpoint.workflow
        return {
            "workflow_id": str(workflow.pk),
            "external_id": workflow.external_id,
            "checkpoint_id": str(self.checkpoint_id),
            "action": "stand_down",
            "taken_over_by": self.standby.name if self.standby is not None else None,
            "delivery_id": str(uuid.uuid5(self.delivery_id, "stand_down")),
        }

    def retry_target(self) -> RetryTarget | None:
        """For retry_step: the failed effect to attempt again (the one the agent stopped at, else the latest)."""
        if self.action != Action.RETRY_STEP:
            return None
        failed = self.checkpoint.workflow.steps.filter(kind=Step.Kind.EFFECT, status=Step.Status.FAILED).order_by(
            "-seq"
        )
        at_seq = self.checkpoint.at_seq  # None: the agent named no step it stopped at
        step = (failed.filter(seq=at_seq).first() if at_seq is not None else None) or failed.first()
        if step is None:
            return None
        return {
            "seq": step.seq,
            "name": step.name,
            "idempotency_key": step.idempotency_key,
            "attempt": step.attempts + 1,
        }
