"""The append-only audit trail."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import Signal
from django.utils import timezone

from .. import via
from ..shapes import Json
from .agents import Agent
from .base import IllegalTransition
from .sparse_keys import where_set

if TYPE_CHECKING:
    from .base import Actor

User = settings.AUTH_USER_MODEL
# What the SLA sweep does to a claim or past a breach, counted by the breach review per period (Event.Verb values).
SWEEP_VERBS = ("escalated", "claim_reminder", "released")
# The partial indexes of the actor keys, by the names migration 0042 gave them.
EVENT_KEY_NAMES = {"actor_user": "event_by_user", "actor_agent": "event_by_agent"}


# Sent for events written together (``events``: the list), where ``post_save`` is not: by ``Event.record_many``,
# and by a statement that wrote them (``slack_touched``: the Slack messages it already touched, else None).
inserted_together = Signal()


class AuditEncoder(DjangoJSONEncoder):
    """The one way a value becomes JSON in the trail: Django's encoder (lazy strings, dates, times,
    durations, decimals, UUIDs), a model row as its name, and anything else as its text: whatever
    an admin form or a caller hands in, recording the event never fails on the data's type."""

    def default(self, o: object) -> object:
        if isinstance(o, models.Model):
            return str(o)
        if isinstance(o, models.QuerySet):
            return list(o)
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def plain(value: object) -> Json:
    """``value`` as the JSON the trail stores (keys as text, sets sorted), through ``AuditEncoder``."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return str(value)  # a SafeString or another subclass: the text only
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=str)
    return plain(AuditEncoder().default(value))


class EventQuerySet(models.QuerySet["Event"]):
    """No bulk rewriting of the trail from Python; on PostgreSQL a trigger refuses it below Django too."""

    def update(self, **kwargs: Any) -> int:
        raise IllegalTransition("Events are append-only: they are never updated.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise IllegalTransition("Events are append-only: they are never deleted.")


class Event(models.Model):
    """The append-only audit trail."""

    class Verb(models.TextChoices):
        """Every kind of entry in the trail; console.event_text gives each one its sentence."""

        CREATED = "created"
        STEP_PENDING = "step_pending"
        STEP_COMMITTED = "step_committed"
        STEP_FAILED = "step_failed"
        STEP_RETRIED = "step_retried"
        # An effect reported again under an idempotency key another step of the workflow holds (409).
        EFFECT_DUPLICATE_REFUSED = "effect_duplicate_refused"
        FINISHED_COMPLETED = "finished_completed"
        FINISHED_FAILED = "finished_failed"
        OPENED = "opened"
        PAUSED = "paused"
        CLAIMED = "claimed"
        RELEASED = "released"
        ASSIGNED = "assigned"
        DECIDED = "decided"
        APPROVED = "approved"
        REJECTED = "rejected"
        REOPENED = "reopened"
        RESUMING = "resuming"
        DELIVERY_STARTED = "delivery_started"
        DELIVERY_RETRY = "delivery_retry"
        DELIVERY_FAILED = "delivery_failed"
        RETURNED_TO_QUEUE = "returned_to_queue"
        DELIVERED = "delivered"
        FETCHED_BY_AGENT = "fetched_by_agent"
        RESOLVED = "resolved"
        RESUMED = "resumed"
        HANDED_OFF = "handed_off"
        ABORTED = "aborted"
        SLA_WARNING = "sla_warning"
        SLA_BREACHED = "sla_breached"
        REPLAY_REQUESTED = "replay_requested"
        REPLAY_STARTED = "replay_started"
        REPLAY_SUCCEEDED = "replay_succeeded"
        REPLAY_FAILED = "replay_failed"
        REPLAY_CANCELLED = "replay_cancelled"
        REPLAY_SAFETY_VIOLATION = "replay_safety_violation"
        FORKED = "forked"
        FORKED_FROM = "forked_from"
        FAILED_OVER = "failed_over"
        FAILOVER_UNDONE = "failover_undone"
        STAND_DOWN_SENT = "stand_down_sent"
        STAND_DOWN_FAILED = "stand_down_failed"
        STOOD_DOWN_REFUSED = "stood_down_refused"  # the replaced agent wrote on the workflow again: 409
        # Sign-in and configuration: no workflow, the subject is named in ``Event.subject``.
        LOGGED_IN = "logged_in"
        LOGIN_FAILED = "login_failed"
        LOCKED_OUT = "locked_out"
        PASSWORD_CHANGED = "password_changed"  # noqa: S105 - a verb, not a secret
        ADMIN_CREATED = "admin_created"
        ADMIN_CHANGED = "admin_changed"
        ADMIN_DELETED = "admin_deleted"
        TOKEN_ROTATED = "token_rotated"  # noqa: S105 - a verb, not a secret
        CLAIM_WARNING = "claim_warning"
        CLAIM_BREACHED = "claim_breached"
        ESCALATED = "escalated"
        ESCALATION_SKIPPED = "escalation_skipped"
        CLAIM_REMINDER = "claim_reminder"
        BREACH_EXPLAINED = "breach_explained"
        COMMENTED = "commented"
        SLACK_LINKED = "slack_linked"  # a console user confirmed a Slack user is them
        PUSH_SUBSCRIBED = "push_subscribed"  # a person turned on notifications on a device (Web Push)
        PUSH_UNSUBSCRIBED = "push_unsubscribed"  # turned off, by the person, an admin, or a push service's 404/410
        TEAM_TRANSFERRED = "team_transferred"
        # A sign-in through the identity provider changed the user's roles or teams (the claim that did).
        SSO_ACCESS_CHANGED = "sso_access_changed"
        # The provider said the person signed out there (back-channel logout): their sessions here ended.
        SSO_LOGGED_OUT = "sso_logged_out"
        # Incidents and holds (models/incidents.py): on the incident's trail, and on each member's.
        INCIDENT_OPENED = "incident_opened"
        INCIDENT_JOINED = "incident_joined"
        INCIDENT_REMOVED = "incident_removed"
        INCIDENT_MERGED = "incident_merged"
        INCIDENT_STATUS = "incident_status"
        INCIDENT_COMMANDER = "incident_commander"
        INCIDENT_NOTE = "incident_note"
        HOLD_PLACED = "hold_placed"
        HOLD_LIFTED = "hold_lifted"
        WORKFLOW_REFUSED_ON_HOLD = "workflow_refused_on_hold"
        ROLLOUT_STARTED = "rollout_started"
        ROLLOUT_WAVE = "rollout_wave"
        ROLLOUT_HALTED = "rollout_halted"
        ROLLOUT_COMPLETED = "rollout_completed"
        ROLLOUT_CANCELLED = "rollout_cancelled"
        # The rollout's gates (models/rollouts.py) and bulk confirmation against evidence (models/evidence.py).
        ROLLOUT_PROPOSED = "rollout_proposed"
        ROLLOUT_APPROVED = "rollout_approved"
        ROLLOUT_REJECTED = "rollout_rejected"
        EVIDENCE_APPLIED = "evidence_applied"
        EFFECTS_CONFIRMED = "effects_confirmed"
        # Recovery drills (models/drills.py): the drill is the subject; a picked workflow records its enlisting.
        DRILL_SCHEDULED = "drill_scheduled"
        DRILL_STARTED = "drill_started"
        DRILL_ENDED = "drill_ended"
        DRILL_REFUSED = "drill_refused"
        DRILL_ENLISTED = "drill_enlisted"
        DRILL_JOURNALLED = "drill_journalled"

        @classmethod
        def step(cls, status: str) -> Event.Verb:
            """A step recorded or moved to ``status`` (pending, committed, failed)."""
            return cls(f"step_{status}")

        @classmethod
        def finished(cls, status: str) -> Event.Verb:
            """A workflow finished as ``status`` (completed, failed)."""
            return cls(f"finished_{status}")

    class ActorType(models.TextChoices):
        OPERATOR = "operator"
        AGENT = "agent"
        SYSTEM = "system"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    # PROTECT: someone who acted is deactivated, never deleted (PostgreSQL refuses the UPDATE anyway).
    # The keys are sparse (sparse_keys.py): a step's event, the row written most, has no user, checkpoint or
    # decision, and writes no entry in their indexes.
    actor_user = models.ForeignKey(
        User, on_delete=models.PROTECT, related_name="+", null=True, blank=True, db_index=False
    )
    actor_agent = models.ForeignKey(
        "workflows.Agent", on_delete=models.PROTECT, related_name="+", null=True, blank=True, db_index=False
    )
    # Who acted, as text: the trail reads the same whatever happens to the account later.
    actor_name = models.CharField(max_length=150, blank=True)
    # What it is about, as "<model>:<pk>" (workflow, agent, runbook, user…), for filtering and export.
    subject = models.CharField(max_length=100, blank=True)
    # Not choices= on the column: a new verb is a line in Verb, not a migration; record() refuses strays.
    verb = models.CharField(max_length=64)
    # Indexed by event_by_workflow (workflow, at), which serves every lookup by workflow.
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.CASCADE, related_name="events", null=True, blank=True, db_index=False
    )
    checkpoint = models.ForeignKey(
        "workflows.Checkpoint", on_delete=models.CASCADE, related_name="events", null=True, blank=True, db_index=False
    )
    decision = models.ForeignKey(
        "workflows.Decision", on_delete=models.CASCADE, related_name="events", null=True, blank=True, db_index=False
    )
    data = models.JSONField(default=dict, blank=True)

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["at", "pk"]
        indexes = [
            models.Index(fields=["workflow", "at"], name="event_by_workflow"),
            # Equality lookups only (the admin's search is `icontains`, which no b-tree serves): plain indexes,
            # without the `varchar_pattern_ops` twins `db_index=True` adds on PostgreSQL. Every step report
            # writes an event, so each index here is paid once a step (issue 25).
            models.Index(fields=["actor_name"], name="event_actor_name"),
            models.Index(fields=["subject"], name="event_subject"),
            # Keys most rows leave empty, indexed where set (sparse_keys.py).
            *where_set("event", "actor_user", "actor_agent", "checkpoint", "decision", names=EVENT_KEY_NAMES),
            # Small: only the sweep's escalations, reminders and releases, by time.
            models.Index(fields=["at"], condition=models.Q(verb__in=SWEEP_VERBS), name="event_sweep_activity"),
            # The queue's version (console.views.queue._queue_version): the latest event about a checkpoint,
            # one index entry away however many step events came after it.
            models.Index(fields=["id"], condition=models.Q(checkpoint__isnull=False), name="event_about_a_checkpoint"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.verb}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk and not kwargs.get("force_insert"):
            raise IllegalTransition("Events are append-only.")
        super().save(*args, **kwargs)

    @property
    def actor(self) -> str:
        if self.actor_name:
            return self.actor_name if self.actor_type != self.ActorType.AGENT else f"agent {self.actor_name}"
        if self.actor_user is not None:
            return self.actor_user.get_username()
        if self.actor_agent is not None:
            return f"agent {self.actor_agent.name}"
        return "system"

    @classmethod
    def record(
        cls,
        subject: models.Model | None,
        verb: Event.Verb,
        *,
        actor: Actor | None = None,
        data: Mapping[str, object] | None = None,
        at: datetime | None = None,
    ) -> Event:
        event = cls.about(subject, verb, actor=actor, data=data, at=at)
        event.save()
        return event

    @classmethod
    def about(
        cls,
        subject: models.Model | None,
        verb: Event.Verb,
        *,
        actor: Actor | None = None,
        data: Mapping[str, object] | None = None,
        at: datetime | None = None,
    ) -> Event:
        """The event ``record`` would write, unsaved: for writing many with one ``bulk_create``."""
        # Imported here: this module sits below every model it records.
        from .checkpoints import Checkpoint
        from .decisions import Decision
        from .replays import ReplayRun
        from .steps import Step
        from .workflows import Workflow

        # ``at``: when it truly happened (a deadline applied late by the sweep), by default now.
        if (channel := via.current()) != via.Via.CONSOLE:
            data = {**(data or {}), "via": channel}  # acted from Slack or an email link (workflows/via.py)
        event = cls(verb=cls.Verb(verb), data=plain(data or {}), at=at or timezone.now())  # ValueError on a stray verb
        if isinstance(actor, Agent):
            event.actor_type, event.actor_agent, event.actor_name = cls.ActorType.AGENT, actor, actor.name
        elif actor is not None:
            event.actor_type, event.actor_user = cls.ActorType.OPERATOR, actor
            event.actor_name = actor.get_username()
        else:
            event.actor_type = cls.ActorType.SYSTEM
        if subject is None:
            return event
        event.subject = f"{subject._meta.model_name}:{subject.pk}"
        if isinstance(subject, Decision):
            event.decision, subject = subject, subject.checkpoint
        if isinstance(subject, Checkpoint):
            event.checkpoint, subject = subject, subject.workflow
        if isinstance(subject, Workflow):
            event.workflow = subject
        elif isinstance(subject, Step | ReplayRun):
            event.workflow_id = subject.workflow_id
        return event

    @classmethod
    def record_many(cls, events: list[Event]) -> list[Event]:
        """Events built by ``about``, written by one INSERT (their ids set). ``post_save`` is not sent for each:
        the listeners that follow every event hear them together through ``inserted_together`` (the Slack
        outbox touches all their checkpoints' messages in one statement)."""
        if events:
            Event.objects.bulk_create(events)
            inserted_together.send(sender=cls, events=events)
        return events

    def insert_params(self, db: Any, *, from_row: Collection[str] = ()) -> list[Any]:
        """The values of this unsaved event's columns (all but its id, in field order) as ``save`` would send
        them to ``db``, for a statement that inserts it beside a move; skipped: the columns in ``from_row``,
        which the statement fills from the row it moved, except ``data``, always a parameter (the statement may
        add to it)."""
        return [
            f.get_db_prep_save(f.pre_save(self, True), db)
            for f in self._meta.concrete_fields
            if not f.primary_key and (f.attname == "data" or f.attname not in from_row)
        ]

    @classmethod
    def inserted_together_by_statement(
        cls, inserted: list[tuple[Event, int]], using: str, *, slack_touched: list[int] | None = None
    ) -> None:
        """``inserted_by_statement`` for the events one statement of the caller's own inserted (with their ids),
        heard together through ``inserted_together``: the Slack outbox touches their checkpoint's messages once,
        not once an event; ``slack_touched``: the statement touched them itself, these are the messages."""
        for event, pk in inserted:
            event.pk, event._state.adding, event._state.db = pk, False, using
        if inserted:
            inserted_together.send(sender=cls, events=[event for event, _pk in inserted], slack_touched=slack_touched)

    def inserted_by_statement(self, pk: int, using: str) -> None:
        """This event, built by ``about``, was inserted by a statement of the caller's own (a data-modifying
        CTE beside the move it records): take its id and send ``post_save`` as ``save`` would, for the
        listeners (the Slack outbox) that follow every event."""
        self.pk, self._state.adding, self._state.db = pk, False, using
        post_save.send(sender=type(self), instance=self, created=True, update_fields=None, raw=False, using=using)
