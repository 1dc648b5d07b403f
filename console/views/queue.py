"""The operator's lists: the queue (its filters, scope tabs, pages and poll) and "My workflows"."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import timedelta
from typing import NotRequired, TypedDict

from django.core.cache import cache
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from console.keyset import KeysetPager
from workflows.blast_radius import queue_rows as incident_queue_rows
from workflows.models import RESUMING_ACTIONS, Action, Agent, Checkpoint, Decision, Event, Reason, Workflow
from workflows.models.people import operators
from workflows.models.queue import CheckpointQuerySet

from ..forms import QueueFilterForm, QueueFilters
from ..queue_rows import render_rows
from ..roles import READERS, can_act, role_required, signed_in
from ..team_scope import TeamScope
from .htmx import _htmx, _render

COUNT_CAP = 10_000  # counting past this costs time and tells an operator nothing


def _capped_count(queryset: QuerySet[Checkpoint]) -> int:
    return queryset.order_by()[: COUNT_CAP + 1].count()


# The queue's pages, soonest due first: as fast on page 2,000 as on page 1.
QUEUE_PAGES = KeysetPager("due_at")


def _reverser(name: str) -> Callable[[int], str]:
    """``reverse(name, args=[pk])`` for many pks at the price of one reversal."""
    marker = 9_876_543_210_123
    prefix, suffix = reverse(name, args=[marker]).split(str(marker))
    return lambda pk: f"{prefix}{pk}{suffix}"


def _with_row_urls(rows: list[Checkpoint]) -> list[Checkpoint]:
    workbench, claim, workflow = _reverser("workbench"), _reverser("claim"), _reverser("workflow")
    for c in rows:
        c.workbench_url, c.claim_url, c.workflow_url = workbench(c.pk), claim(c.pk), workflow(c.workflow_id)
    return rows


def _query(request: HttpRequest, **changes: str | None) -> str:
    params = QueryDict(mutable=True)
    params.update(request.GET)
    params.pop("v", None)  # a poll's version (_queue_version) belongs to the poll, never to a link
    for key, value in changes.items():
        params.pop(key, None)
        if value:
            params[key] = value
    return "?" + params.urlencode() if params else "?"


# --- the queue -------------------------------------------------------------------------

QUEUE_FRESHNESS_SECONDS = 60  # an unchanged queue still renders once a minute: ages and the undo window move


def _queue_version() -> str:
    """What every operator's queue shows changes only with an event about a checkpoint (opened, claimed,
    assigned, released, proposed, approved, breached, resolved…): the latest one's id, with the minute for
    what moves with time alone, is the version of the queue. A global stamp: one indexed lookup, and an
    operator's poll renders again when any checkpoint changed, never less often than it must."""
    return _queue_stamp()[0]


def _queue_stamp() -> tuple[str, str]:
    """The queue's version, and the same stamp with the latest event's time to the microsecond: what keys
    the scope counts (an id alone can come back after a rollback on SQLite; the id and its time do not)."""
    latest = Event.objects.filter(checkpoint__isnull=False).order_by("-pk").values_list("pk", "at").first()
    version = f"{latest[0] if latest else 0}.{int(time.time() // QUEUE_FRESHNESS_SECONDS)}"
    return version, f"{version}.{latest[1].timestamp() if latest else 0}"


@role_required(*READERS)
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    (version, stamp), htmx = _queue_stamp(), _htmx(request)
    if htmx and htmx.trigger == "queue-table" and request.GET.get("v") == version:
        return HttpResponse(status=204)  # the poll's answer while nothing changed: no render, no swap
    filters = QueueFilterForm(request.GET)
    params = filters.values()  # bad values are dropped, not reported: a stale link still renders
    teams = TeamScope.of(request)
    everywhere = filters.narrow(Checkpoint.objects.open())
    base = teams.narrow(everywhere)
    user = signed_in(request)
    page = QUEUE_PAGES.page(
        teams.narrow(filters.in_scope(filters.listed(user=user), user=user))
        .for_queue_rows()
        .annotate(
            came_back=Exists(Decision.objects.sent_back().filter(checkpoint=OuterRef("pk"))),
        )
        .prefetch_related(
            Prefetch(
                "events",
                Event.objects.filter(verb=Event.Verb.ASSIGNED).select_related("actor_user").order_by("-at"),
                to_attr="assignments",
            ),
            Prefetch(
                "decisions",
                Decision.objects.filter(status=Decision.Status.PROPOSED).select_related("decided_by"),
                to_attr="proposals",
            ),
        ),
        size=params["per"],
        after=params.get("after"),
        before=params.get("before"),
    )
    rows = page.rows
    tabs = _tabs(
        request,
        base,
        params,
        approvals=teams.narrow(filters.narrow(Checkpoint.objects.awaiting_approval(by=user))),
        counts_key=_counts_key(request, stamp, teams),
    )
    acting = can_act(user)
    context = {
        "checkpoints": rows,
        "rows_html": render_rows(request, _with_row_urls(rows), can_act=acting),
        "filters": params,
        "tabs": tabs,
        "team_tabs": teams.tabs(everywhere, lambda slug: _query(request, team=slug, after=None, before=None)),
        "team": teams.current,
        "teams": teams.every if can_act(user) and teams.visible else [],
        # Each unresolved incident as one row above the first page (its members keep their own rows);
        # the page's poll leaves them out (views/incidents.py: incident_rows polls them).
        "incident_rows": incident_queue_rows()
        if not page.has_prev and not params["incident"] and not _htmx(request)
        else [],
        "can_act": can_act(user),
        "reasons": Reason.choices,
        "count_cap": COUNT_CAP,
        "page_sizes": QueueFilterForm.PAGE_SIZES,
        "agents": Agent.objects.order_by("name").values_list("name", flat=True)[:200],
        "operators": operators() if can_act(user) else [],  # whom AssignForm offers
        "version": version,
        "poll_url": request.path + _query(request).rstrip("?"),
        **_pager(request, rows, page.has_prev, page.has_next),
    }
    return _render(request, "console/queue.html", context, partials=("queue-table",))


def _pager(request: HttpRequest, rows: list[Checkpoint], has_prev: bool, has_next: bool) -> dict[str, str]:
    return {
        "first_url": _query(request, after=None, before=None) if has_prev else "",
        "prev_url": _query(request, after=None, before=QUEUE_PAGES.cursor(rows[0])) if has_prev and rows else "",
        "next_url": _query(request, before=None, after=QUEUE_PAGES.cursor(rows[-1])) if has_next else "",
    }


def _counts_key(request: HttpRequest, stamp: str, teams: TeamScope) -> str:
    """The scope counts change only with the queue's version (an event about a checkpoint, or the minute):
    keyed by it, who asks, their teams and the filters, they are counted once per change, not per render."""
    filters = sorted((k, v) for k, v in request.GET.lists() if k not in ("after", "before", "v", "per"))
    team = teams.current.pk if teams.current is not None else None
    return (
        f"queue-counts:{stamp}:{signed_in(request).pk}:{team}:{'-'.join(str(t.pk) for t in teams.visible)}:"
        f"{hashlib.blake2b(repr(filters).encode(), digest_size=12).hexdigest()}"
    )


class Tab(TypedDict):
    """A scope tab over the queue, or the breached toggle after them."""

    key: str
    label: str
    active: bool
    url: str
    count: int
    toggle: NotRequired[bool]


def _tabs(
    request: HttpRequest,
    base: CheckpointQuerySet,
    params: QueueFilters,
    *,
    approvals: CheckpointQuerySet,
    counts_key: str | None = None,
) -> list[Tab]:
    """Scopes with their counts under the other filters; then the breached toggle."""
    user, scope = signed_in(request), params["scope"]
    scoped = {
        "mine": base.filter(assignee=user),
        "unassigned": base.filter(assignee__isnull=True),
        "all": base,
        "approval": approvals,
    }
    counts: list[int] | None = cache.get(counts_key) if counts_key else None
    if counts is None:
        counts = [_capped_count(qs.breached() if params["breached"] else qs) for qs in scoped.values()]
        counts.append(_capped_count(scoped[scope].breached()))
        if counts_key:
            cache.set(counts_key, counts, QUEUE_FRESHNESS_SECONDS * 2)
    labels = dict(QueueFilterForm.SCOPES)
    tabs: list[Tab] = [
        {
            "key": key,
            "label": labels[key],
            "active": key == scope,
            "url": _query(request, scope=None if key == "all" else key, after=None, before=None),
            "count": count,
        }
        for key, count in zip(scoped, counts, strict=False)
    ]
    tabs.append(
        {
            "key": "breached",
            "label": "Breached only",
            "active": params["breached"],
            "toggle": True,
            "url": _query(request, breached=None if params["breached"] else "1", after=None, before=None),
            "count": counts[-1],
        }
    )
    return tabs


@role_required(*READERS)
@require_GET
def mine(request: HttpRequest) -> HttpResponse:
    user = signed_in(request)
    owned = Workflow.objects.owned_by(user).select_related("agent")
    handed = list(owned.filter(status=Workflow.Status.HANDED_OFF).order_by("-last_activity_at")[:100])
    packets = {
        d.checkpoint.workflow_id: d
        for d in Decision.objects.filter(
            checkpoint__workflow__in=handed,
            action=Action.HANDOFF,
            status=Decision.Status.SUCCEEDED,
        )
        .select_related("decided_by", "checkpoint")
        .order_by("decided_at")
    }
    context = {
        "handed_off": [(w, packets.get(w.pk)) for w in handed],
        "active": owned.exclude(status__in=Workflow.TERMINAL)
        .order_by("-last_activity_at")
        .prefetch_related(Prefetch("checkpoints", Checkpoint.objects.unresolved(), to_attr="open_checkpoints"))[:100],
        "holding": Checkpoint.objects.open().for_queue().filter(assignee=user)[:100],
        "proposed": Decision.objects.filter(decided_by=user, status=Decision.Status.PROPOSED)
        .select_related("checkpoint__workflow")
        .order_by("checkpoint__due_at")[:100],
        "to_approve": _capped_count(Checkpoint.objects.awaiting_approval(by=user)) if can_act(user) else 0,
        "resumed": Decision.objects.filter(
            Q(decided_by=user) | Q(checkpoint__workflow__owner=user),
            action__in=RESUMING_ACTIONS,
            status=Decision.Status.SUCCEEDED,
            finished_at__gte=timezone.now() - timedelta(days=7),
        )
        .select_related("checkpoint__workflow", "decided_by")
        .order_by("-finished_at")[:20],
        "can_act": can_act(user),
    }
    return _render(request, "console/mine.html", context)
