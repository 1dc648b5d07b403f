"""The queue's team tabs: which team's checkpoints a request shows, and the counts per team.

"My team" is an operator's default view of the queue (Mine / Unassigned / Awaiting approval
work inside it); leads, TPMs and admins also get every team's tab and "All teams". Someone in
no team sees the whole queue, as before teams existed, with every team's tab.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, OuterRef, Q
from django.http import HttpRequest

from workflows.models import Team
from workflows.models.queue import CheckpointQuerySet
from workflows.roles import can_review, is_admin

from .roles import signed_in

ALL = "all"

COUNT_CAP = 10_000  # as the scope tabs: counting past this tells nobody anything


@dataclass
class TeamScope:
    """Which team's queue a request shows, and the team tabs a user gets."""

    every: Sequence[Team]
    mine: Sequence[Team]
    visible: Sequence[Team]
    sees_all: bool
    current: Team | None

    @classmethod
    def of(cls, request: HttpRequest) -> TeamScope:
        user = signed_in(request)
        # Every team once, marked with whether ``user`` is in it and leads it: one query on every queue poll.
        every = list(
            Team.objects.annotate(
                is_mine=Exists(Team.members.through.objects.filter(team=OuterRef("pk"), user=user.pk)),
                is_led=ExpressionWrapper(Q(lead=user.pk), output_field=BooleanField()),
            )
        )
        mine = [t for t in every if cast(Any, t).is_mine]
        sees_all = can_review(user) or is_admin(user) or any(cast(Any, t).is_led for t in every) or not mine
        visible = every if sees_all else mine
        asked = request.GET.get("team", "")
        current = next((t for t in visible if t.slug == asked), None)
        if current is None and not (asked == ALL and sees_all):
            current = mine[0] if mine else None  # the default: my (first) team; in none: everything
        return cls(every, mine, visible, sees_all, current)

    def narrow(self, queryset: CheckpointQuerySet) -> CheckpointQuerySet:
        return queryset.filter(team=self.current) if self.current is not None else queryset

    def tabs(self, base: CheckpointQuerySet, link: Callable[[str], str]) -> list[dict[str, Any]]:
        """One tab per visible team (mine first, "My team"), then "All teams"; each with its count."""
        if not self.visible:
            return []
        counts = dict(
            base.order_by()
            .filter(team__in=self.visible)
            .values("team")
            .annotate(n=Count("pk"))
            .values_list("team", "n")
        )
        ordered = [*self.mine, *(t for t in self.visible if t not in self.mine)]
        tabs = [
            {
                "key": t.slug,
                "label": ("My team: " if t in self.mine else "") + t.name,
                "active": t == self.current,
                "url": link(t.slug),
                "count": counts.get(t.pk, 0),
            }
            for t in ordered
        ]
        if self.sees_all:
            tabs.append(
                {
                    "key": ALL,
                    "label": "All teams",
                    "active": self.current is None,
                    "url": link(ALL),
                    "count": base.order_by()[: COUNT_CAP + 1].count(),
                }
            )
        return tabs
