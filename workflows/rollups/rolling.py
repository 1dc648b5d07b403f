"""Rolling days into ``DailyRollup`` rows: one day at a time under the ``RollupState`` lock, the beat's
roll of the touched days, and ``manage.py rebuild_rollups``'s rebuild of any range."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta

from django.db import transaction
from django.db.models.functions import TruncDate
from django.utils import timezone

from ..clock import database_now
from ..models import Checkpoint, DailyRollup, Decision, Event, RollupState, Workflow
from .cells import compute, utc_day

# Events written in a transaction that was still open when a roll started are not missed: the next
# roll looks back this far before the previous one started.
IN_FLIGHT = timedelta(minutes=2)


def days_in(start: date, end: date) -> Iterator[date]:
    while start <= end:
        yield start
        start += timedelta(days=1)


def consecutive_runs(days: Iterable[date]) -> Iterator[tuple[date, date]]:
    """Consecutive days as (first, last) ranges."""
    ordered = sorted(set(days))
    while ordered:
        first = last = ordered.pop(0)
        while ordered and ordered[0] == last + timedelta(days=1):
            last = ordered.pop(0)
        yield first, last


def roll_day(day: date) -> int:
    """Replace a day's rows with a fresh computation (idempotent); answers how many rows it holds."""
    with transaction.atomic():
        # One roller at a time: two deleting and inserting the same day would collide on the unique key.
        RollupState.objects.select_for_update().filter(pk=1).first()
        cells = compute(day, day)
        DailyRollup.objects.filter(day=day).delete()
        DailyRollup.objects.bulk_create(
            [
                DailyRollup(
                    day=d,
                    agent=agent,
                    kind=kind,
                    reason=reason,
                    runbook=runbook,
                    team=team,
                    counts=dict(cell.counts),
                    timings={name: {str(b): n for b, n in hist.items()} for name, hist in cell.timings.items()},
                )
                for (d, agent, kind, reason, runbook, team), cell in cells.items()
            ],
            batch_size=1000,
        )
    return len(cells)


def earliest_day() -> date | None:
    """The first day anything was recorded on (each through its own index)."""
    firsts = [
        qs.order_by(column).values_list(column, flat=True).first()
        for qs, column in (
            (Workflow.objects.all(), "created_at"),
            (Checkpoint.objects.all(), "opened_at"),
            (Workflow.objects.filter(finished_at__isnull=False), "finished_at"),
            (Decision.objects.filter(finished_at__isnull=False), "finished_at"),
        )
    ]
    found = [utc_day(f) for f in firsts if f is not None]
    return min(found) if found else None


def touched_days(since: datetime) -> set[date]:
    """Days whose figures may have changed since ``since``: every day a workflow with a newer event counts on."""
    touched = Event.objects.filter(at__gte=since, workflow__isnull=False).values("workflow_id")
    days: set[date] = set()
    for qs, column in (
        (Workflow.objects.filter(pk__in=touched), "created_at"),
        (Workflow.objects.filter(pk__in=touched, finished_at__isnull=False), "finished_at"),
        (Checkpoint.objects.filter(workflow__in=touched), "opened_at"),
        (Decision.objects.filter(checkpoint__workflow__in=touched, finished_at__isnull=False), "finished_at"),
    ):
        days.update(
            utc_day(d)
            for d in qs.annotate(d=TruncDate(column, tzinfo=UTC)).values_list("d", flat=True).distinct().order_by()
        )
    return days


def _today() -> date:
    return timezone.now().astimezone(UTC).date()


def rebuild(
    start: date | None = None, end: date | None = None, *, say: Callable[[str], object] | None = None
) -> tuple[date, date] | None:
    """Roll every day of a range (default: the first recorded day to today) and record what is covered.

    Without rollups yet, the whole history is rolled whatever the range, so the pages can trust the
    rows of every rolled day."""
    started = database_now()  # the watermark: a worker's clock running ahead would skip what came meanwhile
    state = RollupState.objects.first()
    first = earliest_day()
    if first is None:
        first = _today()
    if state is None or start is None:
        start = min(start or first, first) if state is None else (start or first)
    if state is None or end is None:
        end = max(end or _today(), _today()) if state is None else (end or _today())
    if state is None:
        # The row every roller locks, there from the start; no day is trusted until the end (last_day).
        RollupState.objects.get_or_create(
            pk=1,
            defaults={"first_day": start, "last_day": start - timedelta(days=1), "rolled_since": started - IN_FLIGHT},
        )
    for day in days_in(start, end):
        rows = roll_day(day)
        if say:
            say(f"{day}: {rows} rows")
    with transaction.atomic():
        state = RollupState.objects.select_for_update().get(pk=1)
        RollupState.objects.filter(pk=1).update(
            first_day=min(state.first_day, start), last_day=max(state.last_day, end)
        )
    return start, end


ROLL_LOCK = 0x726F6C6C  # "roll": the advisory lock of the beat's roll on PostgreSQL


@contextlib.contextmanager
def one_roll_at_a_time() -> Iterator[bool]:
    """True for the one roll that may run now. A roll of a busy day takes longer than the beat's interval
    (35-60 s for 8,000 workflows in a day, in the chaos soak), and two rolls of the same days side by side
    only do the work twice on two worker slots. A session-level advisory lock: a worker killed mid-roll
    loses its connection and the lock with it. SQLite (the embedded default) runs one roll at a time anyway."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield True
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [ROLL_LOCK])
        mine = bool(cursor.fetchone()[0])
    try:
        yield mine
    finally:
        if mine:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [ROLL_LOCK])


def roll_recent() -> list[date]:
    """The beat's roll: today, the days since the last one, and every day touched by activity meanwhile."""
    state = RollupState.objects.first()
    if state is None:
        covered = rebuild()
        return list(days_in(*covered)) if covered else []
    started = database_now()  # the watermark: a worker's clock running ahead would skip what came meanwhile
    days = touched_days(state.rolled_since) | set(days_in(state.last_day, _today()))
    for day in sorted(days):
        roll_day(day)
    RollupState.objects.filter(pk=1).update(
        first_day=min([state.first_day, *days]), last_day=max([state.last_day, *days]), rolled_since=started - IN_FLIGHT
    )
    return sorted(days)
