"""A delivery's lease on PostgreSQL: one statement takes it and reads everything the POST needs.

``Decision.start_attempt`` is the lease as a compare-and-set move: on a worker it followed a read of the
decision with its checkpoint, workflow and agent, two round trips and two ORM compilations between the broker's
message and the POST. ``lease`` does both at once, in one statement whose text is built once per process:

    WITH moved AS (UPDATE decision SET status = 'running', attempts = attempts + 1, lease_expires_at = now +
                   lease, next_attempt_at = NULL, dispatches = 0
                   FROM checkpoint, workflow, agent  -- the agent that receives it: the standby of a failover
                   WHERE decision.id = %s AND status = 'queued' AND the agent has a resume URL
                   RETURNING decision.*, checkpoint.*, workflow.*, agent.*),
         logged AS (INSERT INTO event … SELECT … FROM moved RETURNING id)
    SELECT moved.*, (SELECT id FROM logged) FROM moved

The same rows, the same ``delivery_started`` event (``Event.about``'s, the attempt number taken from the row)
and the same ``post_save`` as ``start_attempt`` after that read: tests/test_delivery_lease_in_one_statement.py
compares the two paths column by column. SQLite, and every other caller, keep ``start_attempt``.
"""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.signals import post_save

from .agents import Agent
from .checkpoints import Checkpoint
from .decisions import Decision
from .events import Event
from .workflows import Workflow

# The rows the statement returns, in this order, each under its own alias; then the event's id.
_READ: tuple[tuple[str, type[models.Model]], ...] = (
    ("d", Decision),
    ("c", Checkpoint),
    ("w", Workflow),
    ("a", Agent),
)
# The event's columns the statement fills from the row it moved; the others come from ``Event.about``.
_FROM_ROW = {
    "subject": "'decision:' || moved.d_{pk}",
    "workflow_id": "moved.c_{workflow}",
    "checkpoint_id": "moved.d_{checkpoint}",
    "decision_id": "moved.d_{pk}",
    "data": "%s::jsonb || jsonb_build_object('attempt', moved.d_{attempts})",
}


def _columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


def _column(model: type[models.Model], name: str) -> str:
    return cast(models.Field[Any, Any], model._meta.get_field(name)).column


@functools.cache
def _statement(using: str) -> str:
    """The statement's text for the database ``using``: names are the models', every value a parameter."""
    db = connections[using]
    quote = db.ops.quote_name

    def col(model: type[models.Model], name: str) -> str:
        return quote(_column(model, name))

    def table(model: type[models.Model]) -> str:
        return quote(model._meta.db_table)

    returned = ", ".join(
        f"{alias}.{quote(f.column)} AS {quote(f'{alias}_{f.column}')}"
        for alias, model in _READ
        for f in _columns(model)
    )
    inserted = [f for f in _columns(Event) if not f.primary_key]
    names = {
        "pk": _column(Decision, "id"),
        "workflow": _column(Checkpoint, "workflow"),
        "checkpoint": _column(Decision, "checkpoint"),
        "attempts": _column(Decision, "attempts"),
    }
    values = ", ".join(
        _FROM_ROW[f.attname].format(**names) if f.attname in _FROM_ROW else f"%s::{f.db_type(db)}" for f in inserted
    )
    pk = col(Decision, "id")
    return (
        f"WITH moved AS (UPDATE {table(Decision)} AS d SET {col(Decision, 'status')} = %s, "  # noqa: S608 - ours
        f"{col(Decision, 'attempts')} = d.{col(Decision, 'attempts')} + 1, "
        f"{col(Decision, 'lease_expires_at')} = STATEMENT_TIMESTAMP() + %s, "
        f"{col(Decision, 'next_attempt_at')} = NULL, {col(Decision, 'dispatches')} = 0 "
        f"FROM {table(Checkpoint)} AS c, {table(Workflow)} AS w, {table(Agent)} AS a "
        f"WHERE d.{pk} = %s AND d.{col(Decision, 'status')} = %s "
        f"AND c.{col(Checkpoint, 'id')} = d.{col(Decision, 'checkpoint')} "
        f"AND w.{col(Workflow, 'id')} = c.{col(Checkpoint, 'workflow')} "
        f"AND a.{col(Agent, 'id')} = COALESCE(d.{col(Decision, 'standby')}, w.{col(Workflow, 'agent')}) "
        f"AND COALESCE(a.{col(Agent, 'resume_url')}, '') <> '' "
        f"RETURNING {returned}), "
        f"logged AS (INSERT INTO {table(Event)} ({', '.join(quote(f.column) for f in inserted)}) "
        f"SELECT {values} FROM moved RETURNING {col(Event, 'id')}) "
        "SELECT moved.*, (SELECT * FROM logged) FROM moved"
    )


# Each thread's converters of the rows read (JSON decoding, sealed fields…), found once for its connection: a
# worker leases for as long as it runs, and a thread keeps its connection object across reconnections.
_local = threading.local()


def _converters(db: BaseDatabaseWrapper) -> list[tuple[Any, dict[int, Any]]]:
    """For each model read, the compiler that applies its converters and the converters by column."""
    cached = getattr(_local, "converters", None)
    if cached is not None and cached[0] is db:
        return cast(list[tuple[Any, dict[int, Any]]], cached[1])
    found = []
    for _alias, model in _READ:
        compiler = model._default_manager.using(db.alias).all().query.get_compiler(db.alias)
        found.append((compiler, compiler.get_converters([f.get_col(model._meta.db_table) for f in _columns(model)])))
    _local.converters = (db, found)
    return found


def lease(decision_id: int) -> Decision | None:
    """PostgreSQL: take the delivery lease of a queued decision whose agent has a resume endpoint, and read it
    with its checkpoint, workflow and receiving agent, in one statement. None when it was not taken: the
    decision is gone, finished, polled or leased by another worker (``Decision.start_attempt``'s losers)."""
    using = router.db_for_write(Decision)
    db = connections[using]
    event = Event.about(
        None, Event.Verb.DELIVERY_STARTED, data={"from": Decision.Status.QUEUED, "to": Decision.Status.RUNNING}
    )
    inserted = [f for f in _columns(Event) if not f.primary_key]
    params: list[Any] = [
        Decision.Status.RUNNING,
        timedelta(seconds=settings.DELIVERY_LEASE_SECONDS),
        decision_id,
        Decision.Status.QUEUED,
    ]
    for f in inserted:
        if f.attname == "data":
            params.append(f.get_db_prep_save(event.data, db))
        elif f.attname not in _FROM_ROW:
            params.append(f.get_db_prep_save(f.pre_save(event, True), db))
    with transaction.mark_for_rollback_on_error(using), db.cursor() as cursor:
        cursor.execute(_statement(using), params)
        row = cursor.fetchone()
    if row is None:
        return None
    rows: dict[str, models.Model] = {}
    at = 0
    for (alias, model), (compiler, converters) in zip(_READ, _converters(db), strict=True):
        fields = _columns(model)
        values = list(row[at : at + len(fields)])
        at += len(fields)
        if converters:
            [values] = compiler.apply_converters([values], converters)
        rows[alias] = model.from_db(using, [f.attname for f in fields], values)
    decision, checkpoint, workflow, agent = rows["d"], rows["c"], rows["w"], rows["a"]
    assert isinstance(decision, Decision) and isinstance(checkpoint, Checkpoint)
    assert isinstance(workflow, Workflow) and isinstance(agent, Agent)
    if workflow.agent_id == agent.pk:
        workflow.agent = agent
    if decision.standby_id == agent.pk:
        decision.standby = agent
    checkpoint.workflow = workflow
    decision.checkpoint = checkpoint
    event.pk, event._state.adding, event._state.db = row[at], False, using
    event.subject, event.decision_id = f"decision:{decision.pk}", decision.pk
    event.checkpoint_id, event.workflow_id = checkpoint.pk, workflow.pk
    event.data = {**event.data, "attempt": decision.attempts}
    post_save.send(sender=Event, instance=event, created=True, update_fields=None, raw=False, using=using)
    return decision


def take(decision_id: int) -> Decision | str:
    """The decision leased for its delivery, read with its checkpoint, workflow and agent; or "skipped" when it
    is not there to take (gone, finished, its agent polls, or another worker holds the lease), or "lost" when
    another worker took the lease between the read and the lease (only the two-step path has that window)."""
    if connections[router.db_for_write(Decision)].vendor == "postgresql":
        return lease(decision_id) or "skipped"
    return read_then_lease(decision_id)


def read_then_lease(decision_id: int) -> Decision | str:
    """``take`` in two steps: the read, then ``Decision.start_attempt`` (SQLite; on PostgreSQL the comparison's
    other side)."""
    decision = Decision.objects.select_related("checkpoint__workflow__agent").filter(pk=decision_id).first()
    if decision is None or decision.status != Decision.Status.QUEUED or decision.is_polled:
        return "skipped"  # an earlier delivery finished it, another worker holds it, or the agent polls
    checkpoint = decision.checkpoint  # with its workflow and agent: read once, before the lease
    if not decision.start_attempt():
        return "lost"  # another worker holds the lease
    decision.checkpoint = checkpoint  # the lease's refresh dropped it; the same row, not read again
    return decision
