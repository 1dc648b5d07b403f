"""Incidents and holds: many checkpoints with one cause, handled as one.

An **Incident** gathers the checkpoints that share a failure signature (agent, workflow kind, reason,
the step they stopped at, and the agent's detail with its variable parts normalised away) once at
least ``Agent.incident_threshold`` of them opened within ``Agent.incident_window_minutes``; later ones
join while it is unresolved. Grouping happens in the transaction that opens the checkpoint
(``Checkpoint.open_for`` calls ``gather``): on PostgreSQL a transaction-scoped advisory lock per
signature serialises the count-and-create, and a partial unique constraint (one unresolved incident
per signature) backs it up, so two checkpoints opening at once never make two incidents.

A **Hold** tells an agent (or one workflow kind of it) to pause: its running workflows are paused at
their next step report (the API answers with an instruction, and the console opens a checkpoint with
reason ``held`` and the full resume state), and new workflows are refused or paused at their first
report, as the hold says.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ..identifiers import normalized
from .agents import Agent
from .base import Conflict, Stateful
from .clocks import SlaClock
from .events import Event
from .notifications import Notification
from .runbooks import Reason

if TYPE_CHECKING:
    from ..shapes import StepInstruction
    from .base import Operator
    from .checkpoints import Checkpoint
    from .workflows import Workflow

User = settings.AUTH_USER_MODEL

# --- the fingerprint of an agent's detail -------------------------------------------------------

# Order matters: the specific shapes first, so that a UUID is not read as five numbers.
_NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    # ISO 8601 and common log stamps: 2026-12-01T13:09:57.123Z, 2026-12-01 13:09:57+01:00, 13:09:57
    (
        re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b", re.I),
        "<time>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\b"), "<time>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<id>"),
    # Hex runs long enough to be a hash or a request id (and holding a digit: "deadbeef" alone is a word);
    # an id, like "C1234567" that happens to read as hex and "C123" that does not.
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b", re.I), "<id>"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
    # An amount: a number with a currency mark or code beside it (€42.00, 1,234.56 EUR, USD <n>).
    (re.compile(r"[€$£¥]\s?<n>|<n>\s?[€$£¥]|\b[A-Z]{3}\s?<n>|<n>\s?[A-Z]{3}\b"), "<amount>"),
)
# What is left of an id once its digits went: "T-<n>", "ord_<n>", "30s", "req<n>x" are all one token, and so is
# an id whose letters and digits interleave ("req_<n>a<n>b<n>c", "<id>" runs included): the whole run of id
# characters and placeholders is one token, however many digit groups it had.
_ID_CHAR = r"(?:[^\s()\[\]{}<>,;:=\"']|<n>|<id>)"
_ID_TOKEN = re.compile(rf"{_ID_CHAR}*(?:<n>|<id>){_ID_CHAR}*")
_SPACES = re.compile(r"\s+")
FINGERPRINT_TEXT_MAX = 300


def normalised_detail(detail: str) -> str:
    """The agent's detail with numbers, ids, amounts, timestamps, UUIDs and hex normalised away."""
    text = detail[:4000]
    for pattern, token in _NORMALISERS:
        text = pattern.sub(token, text)
    text = _ID_TOKEN.sub(lambda m: m[0] if m[0] in ("<n>", "<id>") else "<id>", text)
    return _SPACES.sub(" ", text).strip().lower()[:FINGERPRINT_TEXT_MAX]


def fingerprint(detail: str) -> str:
    """A short stable hash of ``normalised_detail``: equal for details that differ only in their variables."""
    return hashlib.sha256(normalised_detail(detail).encode()).hexdigest()[:16]


def stopped_at(checkpoint: Checkpoint) -> tuple[str, str]:
    """(name, kind) of the step the checkpoint stopped at: the pending step of its resume state, else the
    recorded step at ``at_seq``, else the last step before it; ("", "") when the trajectory is empty."""
    pending = checkpoint.resume_state.get("pending")
    if isinstance(pending, dict) and pending.get("name"):
        return str(pending["name"])[:200], str(pending.get("kind") or "")[:16]
    steps = checkpoint.workflow.steps.order_by("-seq")
    if checkpoint.at_seq is not None:
        steps = steps.filter(seq__lte=checkpoint.at_seq)
    step = steps.values_list("seq", "name", "kind").first()
    if step is None:
        return "", ""
    seq, name, kind = step
    return (name, kind) if seq == checkpoint.at_seq else (f"after {name}", kind)


def signature_of(checkpoint: Checkpoint) -> str:
    """The failure signature: agent, workflow kind, reason, stopped-at step, fingerprint of the detail."""
    workflow = checkpoint.workflow
    name, kind = stopped_at(checkpoint)
    parts = (str(workflow.agent_id), workflow.kind, checkpoint.reason, name, kind, fingerprint(checkpoint.detail))
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _lock_signature(signature: str) -> None:
    """Serialise the count-and-create of one signature until the transaction ends (PostgreSQL; SQLite
    runs one writer at a time anyway)."""
    if connection.vendor == "postgresql":
        key = zlib.crc32(f"incident:{signature}".encode()) - 2**31
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


# --- incidents --------------------------------------------------------------------------------


class IncidentStatus(models.TextChoices):
    OPEN = "open"
    MITIGATING = "mitigating"
    RECOVERING = "recovering"
    RESOLVED = "resolved"


UNRESOLVED = (IncidentStatus.OPEN, IncidentStatus.MITIGATING, IncidentStatus.RECOVERING)


class IncidentQuerySet(models.QuerySet["Incident"]):
    def unresolved(self) -> IncidentQuerySet:
        return self.filter(status__in=UNRESOLVED)

    def matching(self, text: str) -> IncidentQuerySet:
        """The navigation search: "incident 12", "#12", an agent's name, a kind, words of the title."""
        text = text.strip()[:200]
        if not text:
            return self.none()
        number = re.fullmatch(r"(?:incident\s*)?#?(\d{1,9})", text, re.I)
        found = Q(title__icontains=text) | Q(agent__name__iexact=text) | Q(kind__iexact=text)
        if number:
            found |= Q(pk=int(number.group(1)))
        return self.filter(found).select_related("agent").order_by("-opened_at")


class Incident(Stateful):
    Status = IncidentStatus
    UNRESOLVED = UNRESOLVED
    TRANSITIONS = {
        Status.OPEN: {Status.MITIGATING, Status.RECOVERING, Status.RESOLVED},
        Status.MITIGATING: {Status.OPEN, Status.RECOVERING, Status.RESOLVED},
        Status.RECOVERING: {Status.MITIGATING, Status.RESOLVED},
        Status.RESOLVED: set(),
    }

    title = models.CharField(max_length=300)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    # Blank for an incident opened by hand from a selection of mixed signatures.
    signature = models.CharField(max_length=32, blank=True, db_index=True)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="incidents")
    kind = models.CharField(max_length=100, blank=True)
    reason = models.CharField(max_length=32, choices=Reason.choices, blank=True)
    step_name = models.CharField(max_length=200, blank=True)
    detail_pattern = models.CharField(
        max_length=FINGERPRINT_TEXT_MAX,
        blank=True,
        help_text="The agent's detail with its variable parts normalised away.",
    )
    commander = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="The incident commander."
    )
    opened_by = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Empty: grouped by the console.",
    )
    opened_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    objects = IncidentQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            # The backstop of the grouping race: one unresolved incident per signature.
            models.UniqueConstraint(
                fields=["signature"],
                condition=Q(status__in=list(UNRESOLVED)) & ~Q(signature=""),
                name="one_unresolved_incident_per_signature",
            ),
        ]

    def __str__(self) -> str:
        return f"Incident {self.pk}: {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("incident", args=[self.pk])

    @property
    def is_resolved(self) -> bool:
        return self.status == self.Status.RESOLVED

    # --- forming and joining ---

    @classmethod
    def gather(cls, checkpoint: Checkpoint, *, now: datetime | None = None) -> Incident | None:
        """Join the checkpoint to the unresolved incident of its signature, or open one when enough of its
        peers opened within the agent's window. Call inside the transaction that opens it."""
        signature = checkpoint.signature
        if not signature or checkpoint.reason == Reason.HELD:
            return None  # a held checkpoint belongs to the incident whose hold paused it (Hold.pause_if_held)
        now = now or timezone.now()
        agent = checkpoint.workflow.agent
        with transaction.atomic():
            _lock_signature(signature)
            incident = cls.objects.unresolved().filter(signature=signature).first()
            if incident is None:
                since = now - timedelta(minutes=agent.incident_window_minutes)
                # Through the checkpoint's own class: this module sits below checkpoints and imports none.
                peers = (
                    type(checkpoint)
                    .objects.unresolved()
                    .filter(signature=signature, incident__isnull=True, opened_at__gte=since)
                )
                if agent.incident_threshold < 1 or peers.count() < agent.incident_threshold:
                    return None
                incident = cls._create_for(checkpoint, now)
                members = peers | type(checkpoint).objects.filter(pk=checkpoint.pk)
            else:
                members = type(checkpoint).objects.filter(pk=checkpoint.pk)
            incident._take(members, actor=None, verb=Event.Verb.INCIDENT_JOINED)
        checkpoint.incident = incident
        return incident

    @classmethod
    def _create_for(cls, checkpoint: Checkpoint, now: datetime) -> Incident:
        workflow = checkpoint.workflow
        name, _ = stopped_at(checkpoint)
        where = f" {name}" if name.startswith("after ") else f" at {name}" if name else ""
        title = f"{checkpoint.get_reason_display()} on {workflow.agent.name} · {workflow.kind}{where}"
        try:
            with transaction.atomic():
                incident = cls.objects.create(
                    title=title[:300],
                    signature=checkpoint.signature,
                    agent=workflow.agent,
                    kind=workflow.kind,
                    reason=checkpoint.reason,
                    step_name=name,
                    detail_pattern=normalised_detail(checkpoint.detail),
                    opened_at=now,
                )
        except IntegrityError:  # another process formed it first (the lock makes this rare): join theirs
            return cls.objects.unresolved().get(signature=checkpoint.signature)
        Event.record(incident, Event.Verb.INCIDENT_OPENED, at=now, data={"title": incident.title})
        incident._announce(checkpoint, now)
        return incident

    def _announce(self, checkpoint: Checkpoint, now: datetime) -> None:
        """Tell the SLA policy's watchers (and their channels) once that the incident opened, through the
        notification outbox in this transaction. Members joining later tell nobody again, and their own
        watcher news folds into the incident's (``SlaClock._tell_watchers``)."""
        users, group = SlaClock(checkpoint).watchers()
        what = f"{self.get_reason_display() or 'Checkpoints'} on {self.agent.name}" if self.agent else "Checkpoints"
        Notification.send(
            kind=Notification.Kind.INCIDENT_OPENED,
            users=users,
            group=group,
            title=f"Incident #{self.pk} opened: {self.title}",
            body=f"{what} with one cause are grouped as one incident: decide them together from its "
            "page (blast radius, hold, rollout in waves). "
            + (f"Pattern: “{self.detail_pattern}”." if self.detail_pattern else ""),
            path=self.get_absolute_url(),
            at=now,
            now=now,
            key=f"incident{self.pk}:opened",
        )

    @classmethod
    def open_from(cls, checkpoints: Iterable[Checkpoint], *, by: Operator, title: str = "") -> Incident:
        """An incident opened by an operator from a selection on the queue; members of another incident
        move here (recorded on both). Shares the selection's signature when they all have one and no
        unresolved incident holds it, so later arrivals join it too."""
        chosen = [c for c in checkpoints if c.status != c.Status.RESOLVED]
        if not chosen:
            raise Conflict("Select checkpoints that are still unresolved.")
        signatures = {c.signature for c in chosen}
        first = min(chosen, key=lambda c: c.opened_at)
        signature = signatures.pop() if len(signatures) == 1 else ""
        with transaction.atomic():
            if signature:
                _lock_signature(signature)
                if cls.objects.unresolved().filter(signature=signature).exists():
                    signature = ""
            agents = {c.workflow.agent_id for c in chosen}
            kinds = {c.workflow.kind for c in chosen}
            reasons = {c.reason for c in chosen}
            incident = cls.objects.create(
                title=(title.strip() or f"{len(chosen)} checkpoints selected by {by.get_username()}")[:300],
                signature=signature,
                agent=first.workflow.agent if len(agents) == 1 else None,
                kind=kinds.pop() if len(kinds) == 1 else "",
                reason=reasons.pop() if len(reasons) == 1 else "",
                detail_pattern=normalised_detail(first.detail) if signature else "",
                opened_by=by,
            )
            Event.record(
                incident, Event.Verb.INCIDENT_OPENED, actor=by, data={"title": incident.title, "by_hand": True}
            )
            incident._announce(first, incident.opened_at)
            incident._take(
                type(first).objects.filter(pk__in=[c.pk for c in chosen]), actor=by, verb=Event.Verb.INCIDENT_JOINED
            )
        return incident

    def _take(self, checkpoints: models.QuerySet[Checkpoint], *, actor: Operator | None, verb: Event.Verb) -> None:
        """Make these checkpoints members, taking them from any other incident (recorded on both)."""
        rows = list(checkpoints.exclude(incident=self).select_related("workflow"))
        previous: dict[int, list[int]] = {}
        for c in rows:
            if c.incident_id is not None:
                previous.setdefault(c.incident_id, []).append(c.pk)
        checkpoints.filter(pk__in=[c.pk for c in rows]).update(incident=self)
        for incident_id, moved in previous.items():
            Event.record(
                Incident(pk=incident_id),
                Event.Verb.INCIDENT_REMOVED,
                actor=actor,
                data={"checkpoints": moved, "to_incident": self.pk},
            )
        Event.objects.bulk_create([Event.about(c, verb, actor=actor, data={"incident": self.pk}) for c in rows])

    def merge(self, other: Incident, *, by: Operator) -> bool:
        """Take ``other``'s members; ``other`` is resolved as merged into this one. False when either is
        resolved or changed meanwhile."""
        if other.pk == self.pk or self.is_resolved or other.is_resolved:
            return False
        with transaction.atomic():
            pks = list(other.members.values_list("pk", flat=True))
            moving = other.members.filter(pk__in=pks)  # read before the move: the members as they were
            won = other.move(
                self.Status.RESOLVED,
                from_=UNRESOLVED,
                actor=by,
                verb=Event.Verb.INCIDENT_MERGED,
                data={"into": self.pk, "members": len(pks)},
                merged_into=self,
                resolved_at=timezone.now(),
            )
            if not won:
                return False
            self._take(moving, actor=by, verb=Event.Verb.INCIDENT_JOINED)
            Event.record(self, Event.Verb.INCIDENT_MERGED, actor=by, data={"from": other.pk, "members": len(pks)})
        return True

    def remove(self, checkpoint: Checkpoint, *, by: Operator) -> bool:
        """Take one checkpoint out of the incident (it goes on alone). False when it is not a member."""
        with transaction.atomic():
            won = self.members.filter(pk=checkpoint.pk).update(incident=None)
            if won:
                Event.record(self, Event.Verb.INCIDENT_REMOVED, actor=by, data={"checkpoints": [checkpoint.pk]})
                Event.record(checkpoint, Event.Verb.INCIDENT_REMOVED, actor=by, data={"incident": self.pk})
        checkpoint.refresh_from_db()
        return bool(won)

    def set_status(self, to: str, *, by: Operator) -> bool:
        """A step along the transition table; False when it is not one from the status it has now."""
        if to not in self.TRANSITIONS.get(self.status, set()):
            return False
        fields: dict[str, Any] = {"resolved_at": timezone.now()} if to == self.Status.RESOLVED else {}
        return self.move(to, actor=by, verb=Event.Verb.INCIDENT_STATUS, **fields)

    def take_command(self, user: Operator | None, *, by: Operator) -> bool:
        """Name the incident commander (None: nobody); False when it is resolved or changed hands meanwhile."""
        with transaction.atomic():
            won = Incident.objects.filter(pk=self.pk, commander_id=self.commander_id, status__in=UNRESOLVED).update(
                commander=user
            )
            if won:
                Event.record(
                    self, Event.Verb.INCIDENT_COMMANDER, actor=by, data={"to": user.get_username() if user else None}
                )
        self.refresh_from_db()
        return bool(won)

    def add_note(self, text: str, *, by: Operator) -> Event:
        return Event.record(self, Event.Verb.INCIDENT_NOTE, actor=by, data={"note": text[:2000]})

    def events(self) -> models.QuerySet[Event]:
        """The incident's own trail (opened, joined, removed, merged, status, commander, notes, holds)."""
        return Event.objects.filter(subject=f"incident:{self.pk}")

    # --- holds ---

    def hold(self, *, by: Operator, kind: str = "", new_workflows: str = "refuse", note: str = "") -> Hold:
        """Put the incident's agent (or one kind of it) on hold; Conflict when it already is, or when
        the incident has no single agent."""
        if self.agent is None:
            raise Conflict("This incident spans several agents: hold each one from its own incident.")
        return Hold.place(self.agent, kind=kind, incident=self, by=by, new_workflows=new_workflows, note=note)


# --- holds ------------------------------------------------------------------------------------


class HoldQuerySet(models.QuerySet["Hold"]):
    def active(self) -> HoldQuerySet:
        return self.filter(status=Hold.Status.ACTIVE)

    def covering(self, agent: Agent | int, kind: str) -> HoldQuerySet:
        """Active holds on this agent that cover this kind (a hold without a kind covers every kind)."""
        return self.active().filter(Q(kind="") | Q(kind=kind), agent=agent)


class Hold(Stateful):
    class Status(models.TextChoices):
        ACTIVE = "active"
        LIFTED = "lifted"

    class NewWorkflows(models.TextChoices):
        REFUSE = "refuse", "Refuse new workflows (409 agent_on_hold)"
        PAUSE = "pause", "Accept them and pause each at its first step report"

    TRANSITIONS = {Status.ACTIVE: {Status.LIFTED}, Status.LIFTED: set()}

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="holds")
    kind = models.CharField(max_length=100, blank=True, help_text="Empty: every kind of the agent.")
    incident = models.ForeignKey(Incident, null=True, blank=True, on_delete=models.SET_NULL, related_name="holds")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    new_workflows = models.CharField(max_length=16, choices=NewWorkflows.choices, default=NewWorkflows.REFUSE)
    note = models.TextField(blank=True)
    placed_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    placed_at = models.DateTimeField(default=timezone.now)
    lifted_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    lifted_at = models.DateTimeField(null=True, blank=True)

    objects = HoldQuerySet.as_manager()

    class Meta:
        ordering = ["-placed_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "kind"], condition=Q(status="active"), name="one_active_hold_per_agent_kind"
            ),
        ]

    def __str__(self) -> str:
        return f"Hold on {self.agent.name}" + (f" · {self.kind}" if self.kind else "")

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE

    @property
    def scope(self) -> str:
        return f"{self.agent.name}" + (f" ({self.kind} workflows)" if self.kind else " (every kind)")

    def _trail(self, verb: Event.Verb, actor: Operator | None, **data: object) -> None:
        facts = {"hold": self.pk, "agent": self.agent.name, "kind": self.kind, **data}
        Event.record(self.agent, verb, actor=actor, data=facts)
        if self.incident_id is not None:
            Event.record(Incident(pk=self.incident_id), verb, actor=actor, data=facts)

    @classmethod
    def place(
        cls,
        agent: Agent,
        *,
        by: Operator,
        kind: str = "",
        incident: Incident | None = None,
        new_workflows: str = "refuse",
        note: str = "",
    ) -> Hold:
        if new_workflows not in cls.NewWorkflows.values:
            raise ValueError(f"Unknown choice for new workflows: {new_workflows!r}.")
        try:
            with transaction.atomic():
                hold = cls.objects.create(
                    agent=agent,
                    kind=kind.strip()[:100],
                    incident=incident,
                    new_workflows=new_workflows,
                    note=note[:2000],
                    placed_by=by,
                )
                hold._trail(Event.Verb.HOLD_PLACED, by, new_workflows=new_workflows, note=note[:500])
        except IntegrityError as exc:
            raise Conflict(f"{agent.name} is already on hold" + (f" for {kind}." if kind else ".")) from exc
        return hold

    def lift(self, *, by: Operator) -> bool:
        with transaction.atomic():
            won = self.move(
                self.Status.LIFTED,
                from_=[self.Status.ACTIVE],
                actor=by,
                verb=Event.Verb.HOLD_LIFTED,
                data={"hold": self.pk, "agent": self.agent.name, "kind": self.kind},
                lifted_by=by,
                lifted_at=timezone.now(),
            )
            if won and self.incident_id is not None:
                Event.record(
                    Incident(pk=self.incident_id),
                    Event.Verb.HOLD_LIFTED,
                    actor=by,
                    data={"hold": self.pk, "agent": self.agent.name, "kind": self.kind},
                )
        return won

    def instruction(self, checkpoint: Checkpoint) -> StepInstruction:
        """What the step-report answer tells the agent (docs/API.md, "Holds")."""
        return {
            "pause": {
                "checkpoint_id": str(checkpoint.pk),
                "reason": "held",
                "hold_id": str(self.pk),
                "message": f"{self.scope} is on hold: stop here and wait for the checkpoint's decision.",
            }
        }

    @classmethod
    def refuse_new(cls, agent: Agent, *, kind: str, external_id: str) -> None:
        """Conflict (``agent_on_hold``, the API's 409) when an active hold refuses new workflows of this
        kind; the refusal is on the agent's trail."""
        hold = cls.objects.covering(agent, kind).filter(new_workflows=cls.NewWorkflows.REFUSE).first()
        if hold is None or agent.workflows.filter(external_id=normalized(external_id)).exists():
            return  # not held, or a resend of a workflow it already has (answered 200 as always)
        Event.record(
            agent,
            Event.Verb.WORKFLOW_REFUSED_ON_HOLD,
            actor=agent,
            data={"hold": hold.pk, "kind": kind[:100], "external_id": external_id[:200]},
        )
        raise Conflict(
            f"{hold.scope} is on hold during an incident: no new workflows until an operator lifts it.",
            code="agent_on_hold",
            field="kind",
        )

    @classmethod
    def pause_if_held(cls, workflow: Workflow, *, at_seq: int | None) -> StepInstruction | None:
        """After a step report: open a ``held`` checkpoint on a running workflow under an active hold and
        answer the instruction; the same instruction again while that checkpoint is unresolved (a resent
        report whose answer was lost). None when no hold covers it."""
        hold = cls.objects.covering(workflow.agent_id, workflow.kind).select_related("agent").first()
        if hold is None:
            return None
        held = workflow.hold_here(
            at_seq=at_seq,
            detail=f"Held by the console: {hold.scope} is on hold." + (f" {hold.note[:300]}" if hold.note else ""),
        )
        if held is None:
            return None
        incident = hold.incident
        if held.incident_id is None and incident is not None and not incident.is_resolved:
            incident._take(type(held).objects.filter(pk=held.pk), actor=None, verb=Event.Verb.INCIDENT_JOINED)
        return hold.instruction(held)
