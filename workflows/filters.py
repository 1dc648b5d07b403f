"""The period and the filters every figure is read over (``workflows.metrics`` defines the figures): a
range of UTC days, the agent, kind, reason, runbook and team it is narrowed to, and whether drilled
workflows count. ``in_scope`` is the one place the drill rule is written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import TypeVar

from django.db.models import Model, QuerySet
from django.utils import timezone

from .models import Checkpoint, Workflow

DIMENSIONS = ("agent", "kind", "reason", "runbook", "team")
_QS = TypeVar("_QS", bound=QuerySet[Model])


@dataclass(frozen=True)
class Filters:
    """A date range (UTC days, both ends included) and optional filters, as kept in a URL."""

    start: date
    end: date
    agent: str = ""  # agent name
    kind: str = ""  # workflow kind
    reason: str = ""  # checkpoint reason
    runbook: str = ""  # runbook slug
    # A team's slug: the checkpoints the team held (frozen at opening). A degraded workflow counts for
    # every team one of its checkpoints belonged to; a launch belongs to no team (a workflow gets one
    # only when a checkpoint opens), so launches are never narrowed by it.
    team: str = ""
    drills: str = ""  # "" production only; "include": drilled workflows too; a drill's id: its runs only

    DEFAULT_DAYS = 28
    MAX_DAYS = 731

    @classmethod
    def last(cls, days: int = DEFAULT_DAYS, *, today: date | None = None, **kwargs: str) -> Filters:
        today = today or timezone.now().astimezone(UTC).date()
        return cls(start=today - timedelta(days=days - 1), end=today, **kwargs)

    @classmethod
    def from_query(cls, query: Mapping[str, str], *, today: date | None = None) -> Filters:
        """From request.GET: bad or missing dates fall back to the last 28 days."""
        default = cls.last(today=today)

        def day(name: str, fallback: date) -> date:
            try:
                return date.fromisoformat(str(query.get(name) or ""))
            except ValueError:
                return fallback

        end = day("end", default.end)
        start = day("start", end - timedelta(days=cls.DEFAULT_DAYS - 1))
        if start > end:
            start, end = end, start
        start = max(start, end - timedelta(days=cls.MAX_DAYS - 1))
        text = {name: str(query.get(name) or "").strip()[:200] for name in ("agent", "kind", "reason", "runbook")}
        text["team"] = str(query.get("team") or "").strip()[:60]  # a team's slug
        return cls(start=start, end=end, drills=drills_param(query.get("drills")), **text)

    def as_query(self, **override: str) -> dict[str, str]:
        values = {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "agent": self.agent,
            "kind": self.kind,
            "reason": self.reason,
            "runbook": self.runbook,
            "team": self.team,
            "drills": self.drills,
            **override,
        }
        return {k: str(v) for k, v in values.items() if v not in ("", None)}

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time.min, tzinfo=UTC)

    @property
    def until(self) -> datetime:
        """Exclusive upper bound: midnight after the last day."""
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=UTC)

    def previous(self) -> Filters:
        """The period of the same length just before this one, same filters."""
        return replace(self, start=self.start - timedelta(days=self.days), end=self.start - timedelta(days=1))

    def only(self, **dims: str) -> Filters:
        """The same period with some of its dimensions (or ``drills``) set; an unknown name is a TypeError."""
        now = {
            "agent": self.agent,
            "kind": self.kind,
            "reason": self.reason,
            "runbook": self.runbook,
            "team": self.team,
            "drills": self.drills,
        }
        return Filters(self.start, self.end, **(now | dims))

    @property
    def active(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in DIMENSIONS if getattr(self, name)}


# Where each filter dimension lives, seen from a checkpoint; a workflow holds the first two itself.
CHECKPOINT_LOOKUPS = {
    "agent": "workflow__agent__name",
    "kind": "workflow__kind",
    "reason": "reason",
    "runbook": "runbook__slug",
    "team": "team__slug",
}
WORKFLOW_LOOKUPS = {"agent": "agent__name", "kind": "kind"}


def narrowed(qs: _QS, filters: Filters, lookups: Mapping[str, str], prefix: str = "") -> _QS:
    """``qs`` filtered on each set dimension that ``lookups`` places, behind ``prefix`` (the path from
    the queryset's model to the one ``lookups`` starts from)."""
    for name, lookup in lookups.items():
        if value := getattr(filters, name):
            qs = qs.filter(**{prefix + lookup: value})
    return qs


DRILLS_INCLUDED = "include"


def drills_param(value: str | None) -> str:
    """The ``drills`` filter as a URL carries it: "include", a drill's id, or "" (production only)."""
    text = str(value or "").strip()
    if text == DRILLS_INCLUDED or (text.isdigit() and len(text) <= 10):
        return text
    return ""


def in_scope(qs: _QS, drills: str = "", *, to_workflow: str = "") -> _QS:
    """``qs`` without drilled workflows (production figures), unless ``drills`` includes them ("include") or
    names one drill (only its runs). ``to_workflow`` is the path from the queryset's model to the workflow."""
    if drills == DRILLS_INCLUDED:
        return qs
    if drills.isdigit():
        return qs.filter(**{f"{to_workflow}drill_id": int(drills)})
    return qs.filter(**{f"{to_workflow}drill__isnull": True})


def workflows_in(filters: Filters) -> QuerySet[Workflow]:
    return in_scope(narrowed(Workflow.objects.all(), filters, WORKFLOW_LOOKUPS), filters.drills)


def checkpoints_in(filters: Filters) -> QuerySet[Checkpoint]:
    return in_scope(
        narrowed(Checkpoint.objects.all(), filters, CHECKPOINT_LOOKUPS), filters.drills, to_workflow="workflow__"
    )
