"""SLA policies, business calendars and escalation chains, and the frozen copy a checkpoint keeps.

A policy is edited by admins and referenced by runbooks; when a checkpoint
opens, ``SLAPolicy.freeze`` writes everything its clocks need into the
checkpoint (``Checkpoint.sla``), so editing a policy changes new checkpoints
only. ``Terms`` reads that frozen copy back; all durations are business time
of the frozen calendar (``workflows.business_time``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import available_timezones

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from .. import business_time
from ..business_time import Hours
from ..shapes import EscalationSpec, SlaTerms

User = settings.AUTH_USER_MODEL

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def validate_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError(f"“{value}” is not a time zone name such as Europe/Berlin or America/New_York.")


def weekdays_default() -> list[int]:
    return [0, 1, 2, 3, 4]


class BusinessCalendar(models.Model):
    """Working days and hours in a time zone, and holidays: SLA clocks pause outside them."""

    name = models.CharField(max_length=100, unique=True)
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    weekdays = models.JSONField(default=weekdays_default, help_text="Working days, 0 = Monday … 6 = Sunday.")
    opens = models.TimeField(default="09:00")
    closes = models.TimeField(default="17:00", help_text="00:00 means midnight at the end of the day.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        days = self.weekdays or []
        if not days or not all(isinstance(d, int) and 0 <= d <= 6 for d in days):
            raise ValidationError({"weekdays": "Choose at least one working day."})
        if self.opens and self.closes and self._minutes(self.closes, end=True) <= self._minutes(self.opens):
            raise ValidationError({"closes": "Working hours must close after they open (same day)."})

    @staticmethod
    def _minutes(value: str | time, *, end: bool = False) -> int:
        if isinstance(value, str):
            value = datetime.strptime(value, "%H:%M").time()  # a wall time, no zone
        minutes = value.hour * 60 + value.minute
        return 1440 if end and minutes == 0 else minutes

    def hours(self) -> Hours:
        return Hours(
            tz=self.time_zone,
            weekdays=frozenset(self.weekdays),
            start=self._minutes(self.opens),
            end=self._minutes(self.closes, end=True),
            holidays=frozenset(self.holidays.values_list("day", flat=True)),
        )

    def describe(self) -> str:
        days = ", ".join(WEEKDAYS[d][:3] for d in sorted(self.weekdays))
        closes = "24:00" if self._minutes(self.closes, end=True) == 1440 else f"{self.closes:%H:%M}"
        return f"{days} {self.opens:%H:%M}–{closes} {self.time_zone}"


class Holiday(models.Model):
    # No index of its own: it leads one_holiday_per_calendar_day.
    calendar = models.ForeignKey(BusinessCalendar, on_delete=models.CASCADE, related_name="holidays", db_index=False)
    day = models.DateField()
    name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["day"]
        constraints = [models.UniqueConstraint(fields=["calendar", "day"], name="one_holiday_per_calendar_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.name}".strip()


class Lead(models.TextChoices):
    MINUTES = "minutes", "minutes before the target"
    PERCENT = "percent", "% of the target before it"


class SLAPolicy(models.Model):
    """Targets for time to claim and time to decision, their warnings, a calendar and an escalation chain."""

    name = models.CharField(max_length=100, unique=True)
    claim_target_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Time to claim: from opening to the first claim. Empty: no claim clock.",
    )
    claim_warning = models.PositiveIntegerField(null=True, blank=True, help_text="Warning lead for the claim clock.")
    claim_warning_unit = models.CharField(max_length=8, choices=Lead.choices, default=Lead.MINUTES)
    decision_target_minutes = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1)], help_text="Time to decision: from opening to a decision."
    )
    decision_warning = models.PositiveIntegerField(default=10, help_text="Warning lead for the decision clock.")
    decision_warning_unit = models.CharField(max_length=8, choices=Lead.choices, default=Lead.MINUTES)
    calendar = models.ForeignKey(
        BusinessCalendar,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="policies",
        help_text="Clocks pause outside it; empty: round the clock.",
    )
    watchers = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Told about warnings and breaches of checkpoints nobody holds.",
    )
    claim_reminder_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Remind the holder when a claim shows no progress this long.",
    )
    claim_release_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Then release the checkpoint to the queue this long after the claim.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "SLA policy"
        verbose_name_plural = "SLA policies"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for clock in ("claim", "decision"):
            target = getattr(self, f"{clock}_target_minutes")
            lead, unit = getattr(self, f"{clock}_warning"), getattr(self, f"{clock}_warning_unit")
            if target is None or lead is None:
                continue
            if unit == Lead.PERCENT and not 0 < lead < 100:
                errors[f"{clock}_warning"] = "A warning lead in percent must be between 1 and 99."
            elif unit == Lead.MINUTES and lead >= target:
                errors[f"{clock}_warning"] = (
                    f"The warning lead ({lead} min) must be shorter than the target "
                    f"({target} min), or the clock would warn as it opens."
                )
        if self.claim_target_minutes and self.claim_target_minutes > self.decision_target_minutes:
            errors["claim_target_minutes"] = "Time to claim cannot be longer than time to decision."
        if (
            self.claim_release_minutes
            and self.claim_reminder_minutes
            and self.claim_release_minutes <= self.claim_reminder_minutes
        ):
            errors["claim_release_minutes"] = "Release after the reminder, not before it."
        if errors:
            raise ValidationError(errors)

    @staticmethod
    def _lead_seconds(target: int, lead: int | None, unit: str) -> int:
        if not lead:
            return 0
        seconds = target * 60 * lead // 100 if unit == Lead.PERCENT else lead * 60
        return min(seconds, target * 60)

    def freeze(self) -> SlaTerms:
        """Everything the clocks need, as a checkpoint keeps it: later edits do not move its clock."""
        claim = self.claim_target_minutes
        return {
            "policy_id": self.pk,
            "policy": self.name,
            "claim_target": claim * 60 if claim else None,
            "claim_lead": self._lead_seconds(claim, self.claim_warning, self.claim_warning_unit) if claim else 0,
            "decision_target": self.decision_target_minutes * 60,
            "decision_lead": self._lead_seconds(
                self.decision_target_minutes, self.decision_warning, self.decision_warning_unit
            ),
            "hours": self.calendar.hours().to_dict() if self.calendar else None,
            "calendar": self.calendar.describe() if self.calendar else None,
            "watchers": self.watchers_id,
            "reminder": self.claim_reminder_minutes * 60 if self.claim_reminder_minutes else None,
            "release": self.claim_release_minutes * 60 if self.claim_release_minutes else None,
            "escalations": [level.freeze() for level in self.levels.select_related("user", "group")],
        }

    @staticmethod
    def fallback() -> SlaTerms:
        """The terms of a checkpoint no runbook and no policy covers: 30 minutes, warned 10 before."""
        return {
            "policy_id": None,
            "policy": "default (no policy)",
            "claim_target": None,
            "claim_lead": 0,
            "decision_target": 30 * 60,
            "decision_lead": 10 * 60,
            "hours": None,
            "calendar": None,
            "watchers": None,
            "reminder": None,
            "release": None,
            "escalations": [],
        }

    def describe(self) -> str:
        terms = Terms(self.freeze())
        return terms.describe()


class TeamTarget(models.TextChoices):
    """An escalation target named by the checkpoint's team rather than by a person or a group."""

    LEAD = "lead", "the team's lead"
    LEAST_LOADED = "least_loaded", "the team's least-loaded operator working now"


class EscalationLevel(models.Model):
    """One step of a policy's escalation chain: fires a delay after the breach, may repeat."""

    policy = models.ForeignKey(SLAPolicy, on_delete=models.CASCADE, related_name="levels")
    delay_minutes = models.PositiveIntegerField(default=0, help_text="After the breach (business time).")
    notify = models.BooleanField(default=True)
    reassign = models.BooleanField(
        default=False,
        help_text="Give the checkpoint to the user, or the group's least-loaded operator who is working now.",
    )
    user = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    team_target = models.CharField(
        max_length=16,
        choices=TeamTarget.choices,
        blank=True,
        help_text="Or someone of the checkpoint's team (it has none: nobody).",
    )
    stop_once_claimed = models.BooleanField(
        default=True, help_text="Skip this level when someone holds the checkpoint by then."
    )
    repeat_every_minutes = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_repeats = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(50)], help_text="How many times the level fires again (cap)."
    )

    class Meta:
        ordering = ["delay_minutes", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False) | Q(group__isnull=False) | ~Q(team_target=""),
                name="escalation_level_has_a_target",
            ),
        ]

    def __str__(self) -> str:
        return f"+{self.delay_minutes} min: {self.target_name}"

    @property
    def target_name(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        if self.team_target:
            return TeamTarget(self.team_target).label
        return f"group {self.group.name}" if self.group is not None else "nobody"  # the constraint forbids nobody

    def clean(self) -> None:
        if not self.user_id and not self.group_id and not self.team_target:
            raise ValidationError("Escalate to a user, a group or someone of the checkpoint's team.")
        if not (self.notify or self.reassign):
            raise ValidationError("A level must notify, reassign, or both.")
        if self.max_repeats and not self.repeat_every_minutes:
            raise ValidationError({"repeat_every_minutes": "Say how often the level repeats."})

    def freeze(self) -> EscalationSpec:
        return {
            "delay": self.delay_minutes * 60,
            "notify": self.notify,
            "reassign": self.reassign,
            "user": self.user_id,
            "group": self.group_id,
            "team": self.team_target or None,
            "target": self.target_name,
            "stop_once_claimed": self.stop_once_claimed,
            "every": (self.repeat_every_minutes or 0) * 60,
            "repeats": self.max_repeats,
        }


@dataclass(frozen=True)
class Firing:
    """One scheduled firing of an escalation level: the n-th of the chain, ``delay`` after the breach."""

    number: int
    level: int
    repeat: int
    delay: timedelta
    spec: EscalationSpec


class Terms:
    """A checkpoint's frozen SLA terms, with the deadline arithmetic on them."""

    def __init__(self, frozen: SlaTerms | None) -> None:
        self.data = frozen or SLAPolicy.fallback()
        self.hours = Hours.from_dict(self.data.get("hours"))

    def after(self, start: datetime, seconds: float) -> datetime:
        return business_time.add(start, timedelta(seconds=seconds), self.hours)

    def left(self, now: datetime, deadline: datetime) -> timedelta:
        """Business time from now to the deadline (negative: the overrun, in business time)."""
        return business_time.between(now, deadline, self.hours)

    def is_paused(self, now: datetime) -> bool:
        return self.hours is not None and not self.hours.is_open(now)

    def deadlines(self, opened: datetime) -> dict[str, datetime | None]:
        d = self.data
        claim = d.get("claim_target")
        return {
            "due_at": self.after(opened, d["decision_target"]),
            "warn_at": self.after(opened, d["decision_target"] - d["decision_lead"]),
            "claim_due_at": self.after(opened, claim) if claim else None,
            "claim_warn_at": self.after(opened, claim - d["claim_lead"]) if claim else None,
        }

    def firings(self) -> list[Firing]:
        """The escalation chain flattened: each level and its capped repeats, in the order they fire."""
        out = []
        for index, spec in enumerate(self.data.get("escalations", [])):
            for repeat in range(spec.get("repeats", 0) + 1):
                out.append((spec["delay"] + repeat * spec.get("every", 0), index, repeat, spec))
        out.sort(key=lambda f: (f[0], f[1], f[2]))
        return [
            Firing(n, index, repeat, timedelta(seconds=delay), spec)
            for n, (delay, index, repeat, spec) in enumerate(out)
        ]

    def firing_at(self, breached: datetime, number: int) -> datetime | None:
        """When the chain's ``number``-th firing is due for a breach at ``breached`` (None: chain done)."""
        chain = self.firings()
        if number >= len(chain):
            return None
        return business_time.add(breached, chain[number].delay, self.hours)

    def describe(self) -> str:
        d = self.data
        parts = [f"decision in {in_minutes(d['decision_target'])} (warns {in_minutes(d['decision_lead'])} before)"]
        if claim := d.get("claim_target"):
            parts.insert(0, f"claim in {in_minutes(claim)} (warns {in_minutes(d['claim_lead'])} before)")
        parts.append(f"business hours {d['calendar']}" if d.get("calendar") else "round the clock")
        return "; ".join(parts)


def in_minutes(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    if rest:  # a lead in percent of a short target: half of a minute is 30 s, not "0 min"
        return f"{minutes} min {rest} s" if minutes else f"{rest} s"
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"
