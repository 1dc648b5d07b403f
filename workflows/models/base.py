"""What every model of the domain shares: the transition mechanism and its errors."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from django.conf import settings
from django.db import connection, connections, models, router, transaction
from django.db.models.fields.mixins import FieldCacheMixin
from django.db.models.sql import UpdateQuery

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from .agents import Agent
    from .events import Event

    Operator: TypeAlias = User  # settings.AUTH_USER_MODEL: the console's users
    Actor: TypeAlias = User | Agent  # who acts on a row: an operator, an agent (None: the system)


class IllegalTransition(Exception):
    """A status change that the model's transition table does not allow."""


class Refused(Exception):
    """A request the domain refuses, with the ``code`` and ``field`` the API answers with."""

    default_code = "refused"

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.field = code or self.default_code, field
        self.index: int | None = None  # which report of a batch it refused


class Conflict(Refused):
    """The request conflicts with recorded state (the API answers 409)."""

    default_code = "conflict"


class Invalid(Refused, ValueError):
    """A value the domain cannot accept (the API answers 422)."""

    default_code = "invalid_value"


def canonical(value: object) -> object:
    """A value as comparable after a trip through the database.

    jsonb keeps numbers as decimals: 1.5e300 comes back as a 301-digit integer, which Python
    compares exactly with the float and finds different. Compared as floats, a resend of the
    same number is the same number; True stays distinct from 1.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int) and abs(value) > 2**53:
        return float(value)
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def hash_token(token: str) -> str:
    # Tokens are 256 random bits, so a fast hash is enough: nothing to brute force.
    return hashlib.sha256(token.encode()).hexdigest()


_at_once: ContextVar[bool] = ContextVar("moves_at_once", default=False)


@contextmanager
def moves_at_once() -> Iterator[None]:
    """Every ``Stateful.move`` in the block, on PostgreSQL, is one statement: the compare-and-set UPDATE, its
    audit event and the row as the UPDATE left it. For the paths where each round trip is latency (a
    decision's delivery); elsewhere, and on SQLite, a move stays the ORM's UPDATE, event and re-read."""
    token = _at_once.set(True)
    try:
        yield
    finally:
        _at_once.reset(token)


def statement_cursor(using: str) -> Any:
    """A cursor for the hot paths' own statements (a delivery's lease and success record): on PostgreSQL their
    parameters go apart from the text (server-side binding), so a statement has the same text each time and is
    prepared on the connection at its first run: PostgreSQL parses and plans it once, not on every delivery
    (each took 2.4-2.6 ms from the worker here, 1.2-1.4 ms prepared). Elsewhere, for the rest of the console,
    and with ``PREPARED_STATEMENTS`` off (a pooler that cannot keep them), Django's cursor (client-side
    binding). Wrapped as Django wraps its own: errors, the execute wrappers and the debug log are the same."""
    db = connections[using]
    if db.vendor != "postgresql" or not getattr(settings, "PREPARED_STATEMENTS", True):
        return db.cursor()
    # As ``BaseDatabaseWrapper._cursor`` opens one: the connection health-checked first (CONN_HEALTH_CHECKS: a
    # worker's connection the database ended between two tasks is replaced, not used), errors wrapped.
    db.close_if_health_check_failed()
    db.ensure_connection()
    if db.connection.prepare_threshold is None:
        # Django turns psycopg's preparing off (None), which refuses even an explicit ``prepare=True``. Never
        # reached by a count, this threshold leaves every other statement unprepared, as Django has them.
        db.connection.prepare_threshold = 2**31 - 1
    with db.wrap_database_errors:
        return db._prepare_cursor(_prepared_cursor_class()(db.connection))  # type: ignore[attr-defined]


@functools.cache
def _prepared_cursor_class() -> type:
    import psycopg  # the PostgreSQL driver, there whenever a statement cursor is asked for on PostgreSQL

    class Prepared(psycopg.Cursor[Any]):
        """Server-side binding, each statement prepared at its first run and kept in the connection's cache of
        prepared statements (psycopg's, which drops them all after a DROP, an ALTER or a rollback)."""

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
        ) -> Any:
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

        def _send_query_prepared(self, name: bytes, pgq: Any, *, binary: bool | None = None) -> None:
            self._query = pgq  # as a statement sent unprepared keeps it: the query Django's debug log reads
            super()._send_query_prepared(name, pgq, binary=binary)

    return Prepared


def update_returning(queryset: models.QuerySet[Any], fields: Mapping[str, object]) -> list[Any]:
    """PostgreSQL: ``queryset.update(**fields)`` answering with the rows as the UPDATE left them (``RETURNING``),
    as model instances: many rows moved alike in one statement, each known to have moved. The UPDATE is
    Django's own, compiled as ``_move_at_once`` compiles it."""
    model, using = queryset.model, queryset.db
    db = connections[using]
    query = cast(UpdateQuery, queryset.query.chain(UpdateQuery))
    query.add_update_values(dict(fields))
    compiler = query.get_compiler(using)
    compiler.pre_sql_setup()
    update, params = compiler.as_sql()
    columns = list(model._meta.concrete_fields)
    returned = ", ".join(db.ops.quote_name(f.column) for f in columns)
    with transaction.mark_for_rollback_on_error(using), db.cursor() as cursor:
        cursor.execute(f"{update} RETURNING {returned}", params)
        rows = cursor.fetchall()
    converters = compiler.get_converters([f.get_col(model._meta.db_table) for f in columns])
    rows = list(compiler.apply_converters(rows, converters)) if converters else rows
    return [model.from_db(using, [f.attname for f in columns], row) for row in rows]


class Stateful(models.Model):
    """A model with one ``status`` field and a table of allowed transitions."""

    TRANSITIONS: dict[str, set[str]] = {}

    status: str  # each concrete model declares the field with its own choices

    class Meta:
        abstract = True

    def move(
        self,
        to: str,
        *,
        verb: Event.Verb,
        actor: Actor | None = None,
        data: Mapping[str, object] | None = None,
        from_: Iterable[str] | None = None,
        expect: Mapping[str, object] | None = None,
        at: datetime | None = None,
        **fields: object,
    ) -> bool:
        """The status this instance read -> ``to``, as one compare-and-set ``UPDATE … WHERE``.

        ``from_`` names the statuses this transition starts from (default: the one read), and
        ``expect`` the other fields the caller read and relies on (e.g. ``{"assignee_id": 3}``).
        Returns False whenever the row is not as expected: someone else got there first, or this
        instance was read before they did. Raises IllegalTransition only for an impossible request:
        a move that the transition table allows from none of ``from_``. ``at`` stamps the event
        with the moment it truly happened (a clock deadline the sweep applies late) instead of now.
        Inside ``moves_at_once()`` on PostgreSQL, the UPDATE, its event and the re-read are one statement
        (``_move_at_once``): the same rows, event and result as the ORM path below.
        """
        current = self.status
        sources = set(from_) if from_ is not None else {current}
        if impossible := sorted(s for s in sources if to not in self.TRANSITIONS.get(s, set())):
            raise IllegalTransition(f"{type(self).__name__} {self.pk}: {', '.join(impossible)} -> {to} is not allowed")
        if current not in sources:
            return False  # read after someone else moved it elsewhere
        from .events import Event  # events refer back to every model

        expected = {"pk": self.pk, "status": current, **(expect or {})}
        if _at_once.get() and connection.vendor == "postgresql":
            event = Event.about(self, verb, actor=actor, at=at, data={"from": current, "to": to, **(data or {})})
            return self._move_at_once(expected, event, {"status": to, **fields})
        with transaction.atomic():
            won = type(self)._default_manager.filter(**expected).update(status=to, **fields)
            if won:
                Event.record(self, verb, actor=actor, at=at, data={"from": current, "to": to, **(data or {})})
        self.refresh_from_db()
        return bool(won)

    def _move_at_once(self, expected: Mapping[str, object], event: Event, fields: Mapping[str, object]) -> bool:
        """PostgreSQL: ``move``'s compare-and-set UPDATE, its event and the re-read as one statement.

        A data-modifying CTE: the event is inserted only when the UPDATE took the row, and the row comes
        back as the UPDATE left it (``RETURNING``), so one round trip, atomic on its own, does what the
        ORM path does in three inside a transaction (or a savepoint). The event is the very one
        ``Event.record`` would save, built by ``Event.about``, and ``post_save`` is sent for it as
        ``save`` would (the Slack outbox listens), after the row is taken in. The UPDATE is Django's own
        (expressions such as ``F("attempts") + 1`` or ``Now() + lease`` compile as in ``update``)."""
        model = type(self)
        using = self._state.db or router.db_for_write(model, instance=self)
        db = connections[using]
        query = cast(UpdateQuery, model._default_manager.using(using).filter(**expected).query.chain(UpdateQuery))
        query.add_update_values(dict(fields))
        compiler = query.get_compiler(using)
        compiler.pre_sql_setup()
        update, update_params = compiler.as_sql()
        columns = list(model._meta.concrete_fields)
        quote = db.ops.quote_name
        events = type(event)._meta
        inserted = [f for f in events.concrete_fields if not f.primary_key]
        # Names are the models' own, values parameters; each cast, as an INSERT … SELECT types nothing.
        returned = ", ".join(quote(f.column) for f in columns)
        targets = ", ".join(quote(f.column) for f in inserted)
        values = ", ".join(f"%s::{f.db_type(db)}" for f in inserted)
        sql = (
            f"WITH moved AS ({update} RETURNING {returned}), "  # noqa: S608 - names are ours, values parameters
            f"logged AS (INSERT INTO {quote(events.db_table)} ({targets}) "
            f"SELECT {values} FROM moved RETURNING {quote(events.pk.column)}) "
            f"SELECT {', '.join('moved.' + quote(f.column) for f in columns)}, (SELECT * FROM logged) FROM moved"
        )
        params = [*update_params, *event.insert_params(db)]
        with transaction.mark_for_rollback_on_error(using), db.cursor() as cursor:  # as QuerySet.update
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            self.refresh_from_db()  # as the ORM path leaves a loser: with the row as it is now
            return False
        *row, event_pk = rows[0]
        converters = compiler.get_converters([f.get_col(model._meta.db_table) for f in columns])
        [row] = compiler.apply_converters([row], converters) if converters else [row]
        self._take_row(model.from_db(using, [f.attname for f in columns], row))
        event.inserted_by_statement(event_pk, using)
        return True

    def _take_row(self, db_instance: Stateful) -> None:
        """What ``refresh_from_db`` does with the row it reads, for a row that came back another way: every
        field as stored, cached relations dropped (read again, fresh, when next used)."""
        for field in self._meta.concrete_fields:
            setattr(self, field.attname, getattr(db_instance, field.attname))
        for cached in [*self._meta.concrete_fields, *self._meta.related_objects, *self._meta.private_fields]:
            if isinstance(cached, FieldCacheMixin) and cached.is_cached(self):
                cached.delete_cached_value(self)
        vars(self)["_prefetched_objects_cache"] = {}
        self._state.db = db_instance._state.db
