"""Teams and the rules that route checkpoints to them.

A team owns some agents and workflow kinds (its routing rules), has members with a lead,
watchers, a default SLA policy and business calendar, notification channels (the channels
of its watchers group: every SLA notification of the team's checkpoints reaches them, whoever
else the policy tells) and a Slack channel (its checkpoints are posted there unless their
runbook has a Slack route of its own: ``SlackWorkspace.channel_for``).

A checkpoint gets its team when it opens (``route``), frozen like its SLA policy: editing a
rule later routes new checkpoints only. It moves to another team only by ``transfer``, a
compare-and-set on the team it was read with, recorded in the trail with who, from, to and why.

Rules match like runbooks: the most specific rule wins (agent and kind > agent > kind >
neither), then the higher priority, then the team's name (a stable choice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.db.models import Count, Q

from ..roles import operators
from .events import Event
from .people import is_working

if TYPE_CHECKING:
    from datetime import datetime

    from django.contrib.auth.models import AnonymousUser

    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL


class TeamQuerySet(models.QuerySet["Team"]):
    def of(self, user: Operator | AnonymousUser) -> TeamQuerySet:
        """The teams ``user`` is a member of."""
        return self.filter(members=user) if user.is_authenticated else self.none()

    def led_by(self, user: Operator | AnonymousUser) -> TeamQuerySet:
        return self.filter(lead=user) if user.is_authenticated else self.none()


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=60, unique=True, help_text="Named in the sign-in group mapping and URLs.")
    members: models.ManyToManyField[Any, Any] = models.ManyToManyField(User, blank=True, related_name="teams")
    lead = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="teams_led",
        help_text="A member; escalations may target the team's lead.",
    )
    watchers = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The group's channels are the team's notification channels: they hear every "
        "SLA notification of the team's checkpoints; its operators are told in "
        "person about warnings and breaches of ones nobody holds.",
    )
    policy = models.ForeignKey(
        "workflows.SLAPolicy",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="teams",
        help_text="The SLA policy of its checkpoints whose runbook names none.",
    )
    calendar = models.ForeignKey(
        "workflows.BusinessCalendar",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="teams",
        help_text="Its working hours: members without their own calendar work these.",
    )
    slack_channel = models.CharField(
        max_length=32,
        blank=True,
        help_text="Slack channel id (C…) for the team's checkpoints: used unless their "
        "runbook has a Slack route of its own; invite the bot to it.",
    )

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def operators(self) -> list[Operator]:
        """Its members who may take work (active, in an acting role), by name."""
        return list(operators().filter(teams=self))

    def is_working(self, user: Operator, at: datetime) -> bool:
        """Within the member's own working hours, else the team's (neither set: always)."""
        from .people import OperatorProfile

        profile = OperatorProfile.objects.filter(user=user, calendar__isnull=False).first()
        if profile is not None or self.calendar is None:
            return is_working(user, at)
        return self.calendar.hours().is_open(at)

    def least_loaded(self, at: datetime) -> Operator | None:
        """The member who is working now and holds the fewest open checkpoints (the name breaks ties)."""
        candidates = self.operators()
        checkpoints = self.checkpoints.model.objects  # every team's: loads count all one holds
        loads = dict(
            checkpoints.open()
            .filter(assignee__in=candidates)
            .order_by()
            .values("assignee")
            .annotate(n=Count("pk"))
            .values_list("assignee", "n")
        )
        ranked = sorted(
            (u for u in candidates if self.is_working(u, at)), key=lambda u: (loads.get(u.pk, 0), u.get_username())
        )
        return ranked[0] if ranked else None

    def takes_handoff(self, at: datetime) -> Operator | None:
        """Who a handoff to the team goes to: its least-loaded member working now (None: nobody is)."""
        return self.least_loaded(at)


class RoutingRule(models.Model):
    """Checkpoints of this agent and/or workflow kind belong to the team (both empty: every checkpoint)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rules")
    agent = models.ForeignKey(
        "workflows.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="routing_rules",
        help_text="Empty matches every agent.",
    )
    workflow_kind = models.CharField(max_length=100, blank=True, help_text="Empty matches every kind.")
    priority = models.IntegerField(default=0, help_text="Among equally specific rules, the higher wins.")

    class Meta:
        ordering = ["team", "-priority", "pk"]

    def __str__(self) -> str:
        return f"{self.rules} → {self.team_id and self.team.name}"

    @property
    def rules(self) -> str:
        parts = [
            f"agent {self.agent.name}" if self.agent_id and self.agent else "",
            f"kind {self.workflow_kind}" if self.workflow_kind else "",
        ]
        return ", ".join(p for p in parts if p) or "every checkpoint"

    @property
    def specificity(self) -> int:
        return bool(self.agent_id) + bool(self.workflow_kind)

    def _rank(self) -> tuple[int, int, int, str, int]:
        # As runbooks: most specific first, the priority breaks ties, then agent > kind, then a stable name.
        return (
            -self.specificity,
            -self.priority,
            -(2 * bool(self.agent_id) + bool(self.workflow_kind)),
            self.team.name,
            self.pk or 0,
        )

    @classmethod
    def candidates(cls, kind: str, agent_id: int | None) -> list[RoutingRule]:
        """Every rule that takes a checkpoint of this kind and agent, the winner first."""
        agent_rule = Q(agent__isnull=True) | Q(agent_id=agent_id) if agent_id is not None else Q(agent__isnull=True)
        found = cls.objects.filter(Q(workflow_kind__in=["", kind]) & agent_rule).select_related("team", "agent")
        return sorted(found, key=RoutingRule._rank)

    @classmethod
    def route(cls, kind: str, agent_id: int | None) -> Team | None:
        """The team of a checkpoint of this kind and agent; None when no rule takes it."""
        found = cls.candidates(kind, agent_id)
        return found[0].team if found else None


def transfer(checkpoint: Checkpoint, *, to: Team, by: Operator, note: str = "") -> bool:
    """Move an unresolved checkpoint to another team. False when its team changed since it was read
    (someone else transferred it first), or it is resolved, or it is already there."""
    if checkpoint.team_id == to.pk:
        return False
    before = checkpoint.team
    with transaction.atomic():
        as_read = Q(team__isnull=True) if checkpoint.team_id is None else Q(team_id=checkpoint.team_id)
        won = type(checkpoint).objects.unresolved().filter(as_read, pk=checkpoint.pk).update(team=to)
        if won:
            Event.record(
                checkpoint,
                Event.Verb.TEAM_TRANSFERRED,
                actor=by,
                data={"from": before.name if before else None, "to": to.name, "note": note[:1000]},
            )
    checkpoint.refresh_from_db()
    return bool(won)
