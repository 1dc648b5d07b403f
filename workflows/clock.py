"""The clock that leases, backoffs and SLA deadlines are judged by: the database's.

Workers, beat and the relay run on several hosts; each process's own clock may drift, or be
skewed on purpose (the chaos run moves one worker's clock minutes ahead). A lease taken by one
worker and judged expired by another, or an SLA deadline compared with "now", must use one clock
that every process shares, and the database is the only thing they all talk to. So a worker's
time decision reads it here, once per operation, and uses that instant for the comparison, the
deadline it writes (``lease_expires_at``, ``next_attempt_at``, a reopened clock) and, where cheap,
the stamp; the queryset filters that default to "now" (``due``, ``stuck``, ``dispatchable``…) read
it too. The value comes back to Python rather than staying ``Now()`` in SQL because most callers
need it there: business-hours arithmetic, event stamps, the silence limit of each agent.

Web requests (an operator claims, an agent reports) keep ``timezone.now()``: they stamp what
happened while the request ran, and the deadlines they start are then judged by the database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection

# SQLite's clock counts milliseconds; Python stamps microseconds.
SQLITE_RESOLUTION = timedelta(microseconds=999)


def database_now() -> datetime:
    """The database's current time, an aware UTC datetime.

    PostgreSQL: ``statement_timestamp()``, the start of this statement. Not ``now()``, which is the
    start of the *transaction* and would stand still through a long sweep's transaction (or a whole
    test); ``clock_timestamp()`` would do as well for this one-value statement, but
    ``statement_timestamp()`` is what Django's ``Now()`` compiles to, so a filter written with it agrees.
    SQLite (embedded, one host): its ``'now'``, read from the operating system, never from the
    process's (possibly patched) clock; the end of its current millisecond, so that a stamp a web
    request wrote a moment ago with microseconds is never in the future of it.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT statement_timestamp()")
        else:
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        row = cursor.fetchone()
    value = row[0]
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC) + SQLITE_RESOLUTION
    assert isinstance(value, datetime), f"the database answered {value!r} for its time"
    return value.astimezone(UTC)
