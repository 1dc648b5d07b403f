"""A delivery on PostgreSQL: one statement takes the lease and reads what the POST needs, one records it.

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

After the POST, ``record_delivered`` records the success of a resume (or a retried step) the same way: the
decision SUCCEEDED, its checkpoint RESOLVED and the workflow RUNNING again, with their three events, in one
statement instead of ``mark_succeeded``'s read and three moves; the other actions keep ``mark_succeeded``.
"""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .agents import Agent
from .base import statement_cursor
from .checkpoints import Checkpoint
from .decisions import Decision
from .events import Event
from .runbooks import RESUMING_ACTIONS, Action
from .slack import SlackMessage
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
    params: list[Any] = [
        Decision.Status.RUNNING,
        timedelta(seconds=settings.DELIVERY_LEASE_SECONDS),
        decision_id,
        Decision.Status.QUEUED,
        *event.insert_params(db, from_row=_FROM_ROW),
    ]
    with transaction.mark_for_rollback_on_error(using), statement_cursor(using) as cursor:
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
    event.subject, event.decision_id = f"decision:{decision.pk}", decision.pk
    event.checkpoint_id, event.workflow_id = checkpoint.pk, workflow.pk
    event.data = {**event.data, "attempt": decision.attempts}
    event.inserted_by_statement(row[at], using)
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


# The delivery's success, recorded in one statement when the agent resumed the workflow (resume, retry step):
# ``Decision.mark_succeeded``'s three moves and their events. Failover (its stand-down notice after the commit),
# handoff (the new owner told) and abort keep the ORM path.
_RECORDED_AT_ONCE = RESUMING_ACTIONS - {Action.FAILOVER}
# The checkpoint statuses RESOLVED may follow: from any other, ``Stateful.move`` refuses (IllegalTransition),
# so the statement takes nothing and the ORM path answers as it always has.
_RESOLVABLE = sorted(str(s) for s, to in Checkpoint.TRANSITIONS.items() if Checkpoint.Status.RESOLVED in to)


# The event columns ``record_delivered``'s statement fills from the rows it moved (and adds to ``data``).
_RECORD_FROM_ROW = ("subject", "workflow_id", "checkpoint_id", "decision_id")


@functools.cache
def _record_statement(using: str) -> str:
    """The text of ``record_delivered``'s statement for the database ``using``."""
    db = connections[using]
    quote = db.ops.quote_name
    user = get_user_model()
    d, c, w, e, u, s = (quote(m._meta.db_table) for m in (Decision, Checkpoint, Workflow, Event, user, SlackMessage))
    username, user_pk = (
        quote(_column(user, user.USERNAME_FIELD)),
        quote(user._meta.pk.column),
    )

    def col(model: type[models.Model], name: str) -> str:
        return quote(_column(model, name))

    inserted = [f for f in _columns(Event) if not f.primary_key]
    # Per event, the columns its row fills; every other one is a parameter from ``Event.about``.
    from_rows = {
        "delivered": {
            "subject": "'decision:' || dm.id",
            "workflow_id": "cr.workflow_id",
            "checkpoint_id": "dm.checkpoint_id",
            "decision_id": "dm.id",
        },
        "resolved": {
            "subject": "'checkpoint:' || cm.id",
            "workflow_id": "cm.workflow_id",
            "checkpoint_id": "cm.id",
            "decision_id": "NULL::bigint",
            "data": "%s::jsonb || jsonb_build_object('from', cm.was)",
        },
        "resumed": {
            "subject": "'workflow:' || wm.id",
            "workflow_id": "wm.id",
            "checkpoint_id": "NULL::bigint",
            "decision_id": "NULL::bigint",
            "data": "%s::jsonb || jsonb_build_object('owner', wm.owner)",
        },
    }
    sources = {"delivered": "dm JOIN cr ON cr.id = dm.checkpoint_id", "resolved": "cm", "resumed": "wm"}
    selects = " UNION ALL ".join(
        f"SELECT {n} AS n, "  # noqa: S608 - names are ours, values parameters
        + ", ".join(f"{rows.get(f.attname, f'%s::{f.db_type(db)}')} AS {quote(f.column)}" for f in inserted)
        + f" FROM {sources[name]}"
        for n, (name, rows) in enumerate(from_rows.items())
    )
    targets = ", ".join(quote(f.column) for f in inserted)
    return (
        # The decision, only when its checkpoint may be resolved (otherwise the ORM path decides, and refuses).
        f"WITH dm AS (UPDATE {d} SET {col(Decision, 'status')} = %s, "  # noqa: S608 - names are ours
        f"{col(Decision, 'finished_at')} = STATEMENT_TIMESTAMP(), {col(Decision, 'lease_expires_at')} = NULL, "
        f"{col(Decision, 'next_attempt_at')} = NULL, {col(Decision, 'last_error')} = '' "
        f"WHERE {col(Decision, 'id')} = %s AND {col(Decision, 'status')} = %s AND EXISTS (SELECT 1 FROM {c} "
        f"WHERE {col(Checkpoint, 'id')} = {d}.{col(Decision, 'checkpoint')} AND {col(Checkpoint, 'status')} = ANY(%s)) "
        f"RETURNING {col(Decision, 'id')} AS id, {col(Decision, 'checkpoint')} AS checkpoint_id, "
        f"{col(Decision, 'finished_at')} AS finished_at), "
        # The checkpoint as read (its status, the event's "from"), then resolved at the decision's instant.
        f"cr AS (SELECT k.{col(Checkpoint, 'id')} AS id, k.{col(Checkpoint, 'status')} AS was, "
        f"k.{col(Checkpoint, 'workflow')} AS workflow_id FROM {c} AS k JOIN dm ON k.{col(Checkpoint, 'id')} = "
        "dm.checkpoint_id), "
        f"cm AS (UPDATE {c} SET {col(Checkpoint, 'status')} = %s, {col(Checkpoint, 'resolved_at')} = dm.finished_at "
        f"FROM cr, dm WHERE {c}.{col(Checkpoint, 'id')} = cr.id AND {c}.{col(Checkpoint, 'status')} = cr.was "
        f"RETURNING cr.id, cr.was, cr.workflow_id), "
        # The workflow back to running with its owner's name, if it still waits for the agent to resume.
        f"wm AS (UPDATE {w} SET {col(Workflow, 'status')} = %s, {col(Workflow, 'last_activity_at')} = dm.finished_at "
        f"FROM cm, dm WHERE {w}.{col(Workflow, 'id')} = cm.workflow_id AND {w}.{col(Workflow, 'status')} = %s "
        f"RETURNING {w}.{col(Workflow, 'id')} AS id, (SELECT {username} "
        f"FROM {u} WHERE {u}.{user_pk} = {w}.{col(Workflow, 'owner')}) AS owner), "
        # The three events, in the order the ORM path writes them.
        f"logged AS (INSERT INTO {e} ({targets}) SELECT {targets} FROM ({selects}) AS events ORDER BY n "
        f"RETURNING {col(Event, 'id')}, {col(Event, 'verb')}), "
        # The checkpoint's Slack messages behind it (``SlackMessage.touch``), as its events put them.
        f"touched AS (UPDATE {s} SET {col(SlackMessage, 'version')} = {col(SlackMessage, 'version')} + 1, "
        f"{col(SlackMessage, 'next_attempt_at')} = STATEMENT_TIMESTAMP() FROM dm WHERE "
        f"{s}.{col(SlackMessage, 'checkpoint')} = dm.checkpoint_id RETURNING {s}.{col(SlackMessage, 'id')} AS id) "
        "SELECT dm.finished_at, (SELECT was FROM cm), (SELECT owner FROM wm), "
        f"(SELECT array_agg(ARRAY[{col(Event, 'verb')}, {col(Event, 'id')}::text]) FROM logged), "
        "(SELECT array_agg(id) FROM touched) FROM dm"
    )


def record_delivered(decision: Decision) -> bool:
    """``decision.mark_succeeded()`` for a decision ``lease`` took, in one statement on PostgreSQL when it
    resumed its workflow: the decision SUCCEEDED at the statement's instant, its checkpoint RESOLVED then, the
    workflow back to RUNNING if it was resuming, their three events and the checkpoint's Slack messages put
    behind, atomic on its own; the listeners hear the events together after it (``Event.inserted_together``).
    Anything else, or a row not as this expects, is the ORM's."""
    using = router.db_for_write(Decision)
    db = connections[using]
    if (
        db.vendor != "postgresql"
        or decision.action not in _RECORDED_AT_ONCE
        or decision.status != Decision.Status.RUNNING
    ):
        return decision.mark_succeeded()
    delivered = Event.about(
        None, Event.Verb.DELIVERED, data={"from": Decision.Status.RUNNING, "to": Decision.Status.SUCCEEDED}
    )
    resolved = Event.about(None, Event.Verb.RESOLVED, data={"to": Checkpoint.Status.RESOLVED})
    resumed = Event.about(
        None, Event.Verb.RESUMED, data={"from": Workflow.Status.RESUMING, "to": Workflow.Status.RUNNING}
    )
    params: list[Any] = [
        Decision.Status.SUCCEEDED,
        decision.pk,
        Decision.Status.RUNNING,
        _RESOLVABLE,
        Checkpoint.Status.RESOLVED,
        Workflow.Status.RUNNING,
        Workflow.Status.RESUMING,
    ]
    for event in (delivered, resolved, resumed):
        params += event.insert_params(db, from_row=_RECORD_FROM_ROW)
    # One statement, atomic on its own (no BEGIN and COMMIT round trips): on a busy machine each round trip
    # waits for the database's process to be scheduled, whatever the statement costs.
    with transaction.mark_for_rollback_on_error(using), statement_cursor(using) as cursor:
        cursor.execute(_record_statement(using), params)
        row = cursor.fetchone()
    if row is None:
        return decision.mark_succeeded()  # taken meanwhile, or a checkpoint the ORM path must refuse
    finished_at, was, owner, logged, touched = row
    ids = {verb: int(pk) for verb, pk in logged or ()}
    checkpoint = decision.checkpoint
    decision.status, decision.finished_at = Decision.Status.SUCCEEDED, finished_at
    decision.lease_expires_at = decision.next_attempt_at = None
    decision.last_error = ""
    resolved.data = {**resolved.data, "from": was}
    resumed.data = {**resumed.data, "owner": owner}
    inserted = []
    for event, subject in ((delivered, decision), (resolved, checkpoint), (resumed, checkpoint.workflow)):
        if event.verb not in ids:
            continue  # its move lost a race, as the ORM path's compare-and-set would
        event.subject = f"{subject._meta.model_name}:{subject.pk}"
        event.workflow_id = checkpoint.workflow_id
        event.checkpoint_id = checkpoint.pk if event is not resumed else None
        event.decision_id = decision.pk if event is delivered else None
        inserted.append((event, ids[event.verb]))
    # Heard together, the checkpoint's Slack messages already touched by the statement: the outbox hands
    # them to the broker (after the commit, which has happened unless a caller's transaction holds it).
    Event.inserted_together_by_statement(inserted, using, slack_touched=list(touched or ()))
    return True
