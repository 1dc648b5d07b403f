"""The clock that leases, backoffs and SLA deadlines are judged by: the database's.

Workers, beat and the relay run on several hosts; each process's own clock may drift, or be
skewed on purpose (the chaos run moves one worker's clock minutes ahead). A lease taken by one
worker and judged expired by another, or an SLA deadline compared with "now", must use one clock
that every process shares, and the database is the only thing they all talk to. So every time
decision a worker makes reads it here once (``database_now``) and uses that instant for the
comparison, the deadline it writes and the event it stamps; queryset filters that default to
"now" compare in SQL with ``Now()`` (the same clock, no extra round trip).

Web requests (an operator claims, an agent reports) keep ``timezone.now()``: they stamp what
happened while the request ran, and the deadlines they start are then judged by the database.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection
from django.db.models.functions import Now


def database_now() -> datetime:
    """The database's current time, an aware UTC datetime.

    PostgreSQL: ``statement_timestamp()``, the start of this statement. Not ``now()``, which is the
    start of the *transaction* and would stand still through a long sweep (or a whole test); and
    not ``clock_timestamp()``, which moves during the statement, while Django's ``Now()`` in a
    filter compiles to ``STATEMENT_TIMESTAMP()``: the value read here and the SQL default agree.
    SQLite (embedded, one host): its ``'now'``, which reads the operating system's clock, never the
    process's patched one; ``%f`` gives milliseconds, the text is UTC.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT statement_timestamp()")
        else:
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        row = cursor.fetchone()
    value = row[0]
    moment = datetime.fromisoformat(value).replace(tzinfo=UTC) if isinstance(value, str) else value
    assert isinstance(moment, datetime), f"the database answered {value!r} for its time"
    return moment.astimezone(UTC)


def now_in_sql(now: datetime | None = None) -> datetime | Now:
    """``now`` when the caller has one (a sweep's single instant, a test's), else the database's now
    as SQL, for a filter that compares a deadline with the present."""
    return now if now is not None else Now()
