"""Recovery drills (issue 26): a real fault in an agent's runtime, put through the pause surface and scored.

A TPM or admin defines a ``Drill``: which agent (and optionally which kind of its workflows), which runs
take part (the next N new workflows, or a share of the new ones during a window) and the fault. Starting
it marks the new workflows it picks (``Workflow.drill``) and the agent is told in the answer to each step
report (``instruction``, docs/API.md "Drills"): the fault happens in the agent's process, not in the
console. Only an agent that advertises the ``drill`` capability is ever picked.

Drills never move real money. A drill whose fault would come at or after an effect that has moved money
in this agent's workflows of the kind is refused unless the agent declares a sandbox (``drill_sandbox``),
and a drilled workflow's effect that moves money (by the money rule, ``workflows.money``, which fails
safe) is refused by the API with 409 ``drill_refuses_money``.

Drilled workflows are left out of production figures by ``workflows.metrics`` (its ``Filters.drills``).

A drill runs by hand, once at a time (``schedule``), or on a weekly rule ("every Tuesday 10:00 in the
team's calendar": ``repeat_weekday``, ``repeat_at``, ``team``). A recurring definition stays SCHEDULED with
``next_run_at`` on its next occurrence; each occurrence is a Drill row of its own (``series`` = the
definition, ``occurrence_at`` = the time it was for), started by the periodic sweep with a compare-and-set on
the definition's ``next_run_at`` and backed by a unique (series, occurrence_at): racing beats start it once.
The occurrences of one definition are its trend (``workflows.drill_report.trend``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from .. import money
from .agents import Agent
from .base import Conflict, Stateful
from .events import Event

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from ..shapes import JsonObject, StepInstruction
    from .base import Operator
    from .checkpoints import Checkpoint
    from .workflows import Workflow

User = settings.AUTH_USER_MODEL

WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class DrillQuerySet(models.QuerySet["Drill"]):
    def running(self) -> DrillQuerySet:
        return self.filter(status=Drill.Status.RUNNING)

    def due(self, now: datetime | None = None) -> DrillQuerySet:
        """Scheduled drills whose start time has come (the periodic sweep starts them)."""
        return self.filter(status=Drill.Status.SCHEDULED, next_run_at__lte=now or timezone.now())

    def definitions(self) -> DrillQuerySet:
        """What TPMs define: one-off drills and recurring rules, not the occurrences a rule started."""
        return self.filter(series__isnull=True)

    def of_series(self, definition: Drill) -> DrillQuerySet:
        """Every drill run under ``definition``: itself (when it ran as a one-off) and its occurrences."""
        root = definition.series_id or definition.pk
        return self.filter(Q(pk=root) | Q(series_id=root))


class Drill(Stateful):
    class Fault(models.TextChoices):
        CRASH_AFTER_STEP = "crash_after_step", "Crash after step k"
        GO_SILENT = "go_silent", "Go silent for N minutes"
        GARBAGE_AT_STEP = "garbage_at_step", "Answer garbage at step k"
        RATE_LIMIT_STORM = "rate_limit_storm", "Rate-limit storm"
        FAILOVER = "failover", "Fail over to the standby"
        PROVIDER_CHANGE = "provider_change", "Provider change"

    # Faults placed at a step: they come after steps 1..k; the others can come at any step.
    AT_STEP = frozenset({Fault.CRASH_AFTER_STEP, Fault.GARBAGE_AT_STEP})

    class Status(models.TextChoices):
        DRAFT = "draft"
        SCHEDULED = "scheduled"
        RUNNING = "running"
        ENDED = "ended"

    TRANSITIONS = {
        Status.DRAFT: {Status.SCHEDULED, Status.RUNNING, Status.ENDED},
        Status.SCHEDULED: {Status.RUNNING, Status.DRAFT, Status.ENDED},
        Status.RUNNING: {Status.ENDED},
    }

    name = models.CharField(max_length=120)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="drills")
    kind = models.CharField(max_length=100, blank=True, help_text="Only workflows of this kind; empty: any kind.")
    fault = models.CharField(max_length=32, choices=Fault.choices)
    at_seq = models.PositiveIntegerField(
        default=1, help_text="k: the step the fault comes after (crash) or at (garbage)."
    )
    silent_minutes = models.PositiveIntegerField(default=10, help_text="For “go silent”: how long.")
    runs = models.PositiveIntegerField(null=True, blank=True, help_text="The next N new workflows take part…")
    share_percent = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="…or this share (1–100 %) of the new ones during the window."
    )
    window_minutes = models.PositiveIntegerField(default=60, help_text="How long a share-of-runs drill picks.")
    announced = models.BooleanField(
        default=True, help_text="Operators see the drill badge; unannounced: only TPMs do, until it is decided."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    # A timer is data: the periodic sweep starts a scheduled drill with a compare-and-set (start_due).
    next_run_at = models.DateTimeField(null=True, blank=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    picked = models.PositiveIntegerField(default=0, editable=False)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    # A weekly rule: both set, or neither (a one-off). The local time is the team calendar's (else the console's).
    repeat_weekday = models.PositiveSmallIntegerField(
        null=True, blank=True, choices=list(enumerate(WEEKDAY_NAMES)), help_text="Recurring: every this day…"
    )
    repeat_at = models.TimeField(null=True, blank=True, help_text="…at this local time.")
    team = models.ForeignKey(
        "workflows.Team",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Whose business calendar the rule's time is in (its zone; its holidays "
        "are skipped). Empty: the console's time zone.",
    )
    # No index of its own: it leads one_drill_per_occurrence.
    series = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="occurrences",
        editable=False,
        help_text="The recurring definition this occurrence ran under.",
        db_index=False,
    )
    occurrence_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = DrillQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                name="drill_picks_runs_or_a_share",
                condition=(
                    Q(runs__isnull=False, share_percent__isnull=True)
                    | Q(runs__isnull=True, share_percent__isnull=False)
                ),
            ),
            models.CheckConstraint(
                name="drill_share_is_a_percent",
                condition=Q(share_percent__isnull=True) | Q(share_percent__gte=1, share_percent__lte=100),
            ),
            models.CheckConstraint(
                name="drill_rule_has_day_and_time",
                condition=Q(repeat_weekday__isnull=True, repeat_at__isnull=True)
                | Q(repeat_weekday__isnull=False, repeat_at__isnull=False),
            ),
            # The backstop of the sweep's compare-and-set: one occurrence per definition and time.
            models.UniqueConstraint(fields=["series", "occurrence_at"], name="one_drill_per_occurrence"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def can_start(self) -> bool:
        return self.status in (self.Status.DRAFT, self.Status.SCHEDULED)

    @property
    def is_ended(self) -> bool:
        return self.status == self.Status.ENDED

    @property
    def at_step(self) -> bool:
        """The fault is placed at a step (k matters)."""
        return self.fault in self.AT_STEP

    @property
    def goes_silent(self) -> bool:
        return self.fault == self.Fault.GO_SILENT

    @property
    def recurs(self) -> bool:
        return self.repeat_weekday is not None and self.repeat_at is not None

    @property
    def rule_text(self) -> str:
        """ "every Tuesday 10:00 (Europe/Paris)", or "" for a one-off."""
        if not self.recurs or self.repeat_at is None or self.repeat_weekday is None:
            return ""
        return f"every {WEEKDAY_NAMES[self.repeat_weekday]} {self.repeat_at:%H:%M} ({self._zone_and_holidays()[0]})"

    # --- the weekly rule ------------------------------------------------------------------------
    def _zone_and_holidays(self) -> tuple[str, frozenset[date]]:
        calendar = self.team.calendar if self.team_id and self.team and self.team.calendar_id else None
        if calendar is None:
            return settings.TIME_ZONE, frozenset()
        hours = calendar.hours()
        return hours.tz, hours.holidays

    def next_runs(self, after: datetime | None = None, count: int = 3) -> list[datetime]:
        """The rule's next occurrences strictly after ``after`` (UTC), in the calendar's local time: a day on
        which the clocks change keeps 10:00 local, and a holiday of the team's calendar is skipped. A one-off
        lists its scheduled time, if any."""
        if not self.recurs or self.repeat_at is None or self.repeat_weekday is None:
            return [self.next_run_at] if self.next_run_at and self.status == self.Status.SCHEDULED else []
        tz, holidays = self._zone_and_holidays()
        zone = ZoneInfo(tz)
        after = after or timezone.now()
        day = after.astimezone(zone).date()
        day += timedelta(days=(self.repeat_weekday - day.weekday()) % 7)
        found: list[datetime] = []
        for _week in range(520):  # ten years: a calendar whose every such day is a holiday ends the search
            if day not in holidays:
                moment = datetime.combine(
                    day, time(self.repeat_at.hour, self.repeat_at.minute), tzinfo=zone
                ).astimezone(UTC)
                if moment > after:
                    found.append(moment)
                    if len(found) == count:
                        break
            day += timedelta(days=7)
        return found

    # --- definition -------------------------------------------------------------------------
    def clean(self) -> None:
        """The form's and the admin's checks: which runs take part, and whether this drill may run at all."""
        if (self.runs is None) == (self.share_percent is None):
            raise ValidationError({"runs": "Choose either the next N workflows or a share of the new ones."})
        if self.runs == 0:
            raise ValidationError({"runs": "A drill takes part in at least one workflow."})
        if self.share_percent is not None and not 1 <= self.share_percent <= 100:
            raise ValidationError({"share_percent": "A share is 1 to 100 percent."})
        if self.at_seq < 1:
            raise ValidationError({"at_seq": "k is a step number, 1 or more."})
        if (self.repeat_weekday is None) != (self.repeat_at is None):
            raise ValidationError({"repeat_at": "A recurring drill needs both a day and a time."})
        if self.agent_id is not None and (refusal := self.cannot_run()):
            raise ValidationError({"fault": refusal})

    def cannot_run(self) -> str:
        """Why this drill may not run (a sentence for the TPM), or "" when it may."""
        agent = self.agent
        if not agent.is_active:
            return f"{agent.name} is deactivated."
        if not agent.can(Agent.Capability.DRILL):
            return (
                f"{agent.name} does not advertise drill support: its runtime has not said it carries out "
                "drill faults, so it is never picked."
            )
        if agent.can(Agent.Capability.DRILL_SANDBOX):
            return ""
        if moved := self._money_before_fault():
            return (
                f"Refused: this drill would fault at or after an effect that moves money ({moved}) and "
                f"{agent.name} declares no sandbox for drills (capability “drill_sandbox”). Drills never "
                "move real money."
            )
        return ""

    def _money_before_fault(self) -> str:
        """The name of an effect that has moved money in this agent's workflows of the kind at or before the
        fault (any step for faults not placed at a step), or ""."""
        # By the app registry: this module sits below workflows.py, which imports it.
        step = apps.get_model("workflows", "Step")
        where: dict[str, object] = {"workflow__agent": self.agent, "kind": "effect", "carries_money": True}
        if self.kind:
            where["workflow__kind"] = self.kind
        if self.fault in self.AT_STEP:
            where["seq__lte"] = self.at_seq
        name: str | None = step.objects.filter(**where).values_list("name", flat=True).first()
        return name or ""

    # --- starting, by hand or on schedule ---------------------------------------------------
    def start(self, *, by: Operator | None = None) -> bool:
        """DRAFT or SCHEDULED -> RUNNING. False when it already started (a double click, another beat)."""
        if refusal := self.cannot_run():
            raise Conflict(refusal, code="drill_refused")
        now = timezone.now()
        ends = now + timedelta(minutes=self.window_minutes) if self.share_percent else None
        return self.move(
            self.Status.RUNNING,
            from_=[self.Status.DRAFT, self.Status.SCHEDULED],
            expect={"next_run_at": self.next_run_at},
            verb=Event.Verb.DRILL_STARTED,
            actor=by,
            data={"name": self.name},
            started_at=now,
            ends_at=ends,
            next_run_at=None,
        )

    def schedule(self, at: datetime | None = None, *, by: Operator | None = None) -> bool:
        """DRAFT -> SCHEDULED, at ``at`` (a one-off) or at the rule's next occurrence (a recurring drill)."""
        if refusal := self.cannot_run():
            raise Conflict(refusal, code="drill_refused")
        if at is None:
            upcoming = self.next_runs(count=1)
            if not upcoming:
                raise Conflict("Say when: a time, or a weekly rule.", code="drill_unscheduled")
            at = upcoming[0]
        return self.move(
            self.Status.SCHEDULED,
            verb=Event.Verb.DRILL_SCHEDULED,
            actor=by,
            data={"at": at.isoformat(), "rule": self.rule_text},
            next_run_at=at,
        )

    def start_occurrence(self, at: datetime | None = None, *, by: Operator | None = None) -> Drill | None:
        """Run the recurring definition once: a new occurrence (a Drill of its own, under ``series``) starts
        now. Without ``at`` (by hand) the schedule stays as it is. With ``at`` (the sweep, the occurrence it
        read as due) the definition's ``next_run_at`` moves on from ``at`` to the next occurrence with a
        compare-and-set: a racing beat that read the same ``at`` loses and starts nothing. The running
        occurrences of the definition end: a new one takes over."""
        if refusal := self.cannot_run():
            raise Conflict(refusal, code="drill_refused")
        now = timezone.now()
        try:
            with transaction.atomic():
                if at is not None:
                    upcoming = self.next_runs(after=max(at, now), count=1)
                    won = Drill.objects.filter(pk=self.pk, status=self.Status.SCHEDULED, next_run_at=at).update(
                        next_run_at=upcoming[0] if upcoming else None
                    )
                    if not won:
                        return None
                for running in Drill.objects.running().filter(series=self):
                    running.end(by=by)
                occurrence = Drill.objects.create(
                    series=self,
                    occurrence_at=at or now,
                    created_by=by if by is not None else self.created_by,
                    **{f: getattr(self, f) for f in self.COPIED},
                )
                occurrence.start(by=by)
        except IntegrityError:  # the unique (series, occurrence_at): another process started this one
            return None
        self.refresh_from_db()
        return occurrence

    COPIED = (
        "name",
        "agent",
        "kind",
        "fault",
        "at_seq",
        "silent_minutes",
        "runs",
        "share_percent",
        "window_minutes",
        "announced",
        "team",
    )

    def end(self, *, by: Operator | None = None) -> bool:
        return self.move(
            self.Status.ENDED,
            from_=[self.Status.DRAFT, self.Status.SCHEDULED, self.Status.RUNNING],
            verb=Event.Verb.DRILL_ENDED,
            actor=by,
        )

    @classmethod
    def start_due(cls) -> int:
        """Start every scheduled drill whose time has come, once: each start is a compare-and-set on the
        status and the ``next_run_at`` it read, so racing beat processes start an occurrence once."""
        started = 0
        for drill in cls.objects.due():
            try:
                if drill.recurs and drill.next_run_at is not None:
                    started += drill.start_occurrence(drill.next_run_at) is not None
                else:
                    started += drill.start()
            except Conflict as exc:  # the agent stopped supporting drills since: back to draft, saying why
                drill.move(
                    cls.Status.DRAFT, verb=Event.Verb.DRILL_REFUSED, data={"refused": str(exc)}, next_run_at=None
                )
        return started

    # --- picking runs -------------------------------------------------------------------------
    @classmethod
    def enlist(cls, workflow: Workflow) -> Drill | None:
        """Mark a new workflow as drilled when a running drill of its agent picks it (in its create
        transaction). A place among the next N is taken with a conditional UPDATE: concurrent starts
        never take more than N."""
        agent = workflow.agent
        if not agent.can(Agent.Capability.DRILL):
            return None
        now = timezone.now()
        for drill in cls.objects.running().filter(agent=agent).filter(Q(kind="") | Q(kind=workflow.kind)):
            if drill.share_percent:
                if (drill.ends_at and now >= drill.ends_at) or not drill._draws(workflow):
                    continue
                won = cls.objects.filter(pk=drill.pk, status=cls.Status.RUNNING).update(picked=F("picked") + 1)
            else:
                won = cls.objects.filter(pk=drill.pk, status=cls.Status.RUNNING, picked__lt=drill.runs).update(
                    picked=F("picked") + 1
                )
            if won:
                type(workflow).objects.filter(pk=workflow.pk).update(drill=drill)
                workflow.drill = drill
                Event.record(workflow, Event.Verb.DRILL_ENLISTED, data={"drill": drill.pk, "fault": drill.fault})
                return drill
        return None

    def _draws(self, workflow: Workflow) -> bool:
        """A stable draw per (drill, workflow): the same run is in or out however often it is asked."""
        digest = hashlib.sha256(f"{self.pk}:{workflow.pk}".encode()).digest()
        return int.from_bytes(digest[:4], "big") % 100 < (self.share_percent or 0)

    # --- what the agent is told; what it may not do ------------------------------------------
    def instruction(self) -> StepInstruction:
        """docs/API.md, "Drills": the fault for the agent's runtime to carry out (never whether it is
        announced: that is for the console's people)."""
        return {
            "drill": {
                "id": str(self.pk),
                "fault": self.fault,
                "at_seq": self.at_seq,
                "silent_minutes": self.silent_minutes,
            }
        }

    @classmethod
    def instruction_for(cls, workflow: Workflow) -> StepInstruction:
        """The drill instruction for a step report's answer, until the fault has been carried out (the
        workflow's first checkpoint); {} for a workflow no drill picked."""
        if workflow.drill_id is None or workflow.status != workflow.Status.RUNNING or workflow.checkpoints.exists():
            return {}
        drill = workflow.drill
        return drill.instruction() if drill is not None else {}

    @staticmethod
    def refuse_money(workflow: Workflow, reports: Iterable[Mapping[str, Any]], history: money.History) -> None:
        """Conflict (409 ``drill_refuses_money``) for an effect of a drilled workflow that moves money, unless
        its agent declares a drill sandbox. Fails safe like the money rule: an amount anywhere in the input,
        or an effect of a name that has moved money before (``history``: the recorded trail), counts."""
        if workflow.drill_id is None or workflow.agent.can(Agent.Capability.DRILL_SANDBOX):
            return
        effects = [(i, r) for i, r in enumerate(reports) if r.get("kind") == "effect"]
        moved_before = history.names_that_moved_money([str(r.get("name", "")) for _i, r in effects])
        for index, report in effects:
            if money.carries_money(report.get("input")) or report.get("name") in moved_before:
                refused = Conflict(
                    f"Step {report.get('seq')} ({str(report.get('name', ''))[:100]}) would move money in a drill: "
                    "drills never move real money. Declare a sandbox for drills (capability drill_sandbox) to run "
                    "money effects against it.",
                    code="drill_refuses_money",
                    field="input",
                )
                refused.index = index
                raise refused

    @staticmethod
    def record_journal(workflow: Workflow, journal: JsonObject) -> bool:
        """Keep what the runtime journalled at the fault (committed effects' keys, the pending action, the
        promises): the report compares the resume state with it. False when the run already has one (a
        resend: the first stands). Conflict ``not_drilled`` for a run no drill picked."""
        if workflow.drill_id is None:
            raise Conflict("No drill picked this workflow: there is no fault to journal.", code="not_drilled")
        won = type(workflow).objects.filter(pk=workflow.pk, drill_journal__isnull=True).update(drill_journal=journal)
        if won:
            committed = journal.get("committed")  # a list: the API validated the journal
            Event.record(
                workflow,
                Event.Verb.DRILL_JOURNALLED,
                data={
                    "committed": len(committed) if isinstance(committed, list) else 0,
                    "pending": bool(journal.get("pending")),
                },
            )
        return bool(won)

    # --- who sees it ---------------------------------------------------------------------------
    # The events that say a run is drilled: an unannounced drill hides them as it hides its badge.
    TELLING_VERBS = (Event.Verb.DRILL_ENLISTED, Event.Verb.DRILL_JOURNALLED)

    def shown_to(self, user: Operator | AnonymousUser | None, *, decided: bool) -> bool:
        """The drill badge: TPMs and admins always; operators when it is announced or once decided."""
        from ..roles import can_review

        return self.announced or decided or (user is not None and can_review(user))

    @staticmethod
    def known_to(
        user: Operator | AnonymousUser | None, workflow: Workflow, checkpoint: Checkpoint | None = None
    ) -> bool:
        """Whether ``user`` may know that ``workflow`` is drilled (its badge, its drill events): always for a run
        no drill picked; else as ``shown_to``, decided meaning ``checkpoint`` is (on a workflow page: any of
        its checkpoints is)."""
        drill = workflow.drill
        if drill is None:
            return True
        if checkpoint is not None:
            decided = not checkpoint.is_open
        else:
            decided = workflow.checkpoints.exclude(status__in=workflow.checkpoints.model.OPEN_STATUSES).exists()
        return drill.shown_to(user, decided=decided)
