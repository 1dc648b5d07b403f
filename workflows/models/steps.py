"""Steps: the recorded trajectory of a workflow, one report at a time or a batch in one statement.

A step is recorded idempotently (its seq and its effect's idempotency key), moves pending -> committed|failed
by compare-and-set, and a failed effect is retried under its key. ``fork_plan`` reads steps as a plan."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone

from .. import money, via
from ..shapes import Json, PlanStep, StepRecord
from .base import Conflict, IllegalTransition, Stateful, canonical
from .events import Event

if TYPE_CHECKING:
    from .agents import Agent
    from .base import Actor
    from .workflows import Workflow


def _json_text(value: object) -> str:
    """A report's JSON value as text for a jsonb column: orjson, or the stdlib for an integer past 64 bits
    (the API's parser keeps up to 64 digits; jsonb stores them as numeric)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def _array_literal(values: list[Any]) -> str:
    """A PostgreSQL array literal (``{…}``) of texts, integers or booleans, NULL for None, passed as one text
    parameter and cast in the statement: the driver's own array adapter escapes element by element with a
    regular expression, which cost more than the insert for a batch of JSON texts."""
    items = []
    for value in values:
        if value is None:
            items.append("NULL")
        elif isinstance(value, bool):
            items.append("t" if value else "f")
        elif isinstance(value, int):
            items.append(str(value))
        else:
            items.append('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(items) + "}"


def stake(data: Json) -> tuple[str | None, str | None]:
    """(amount, currency) of the first amount an effect's input carries, read by the money rule
    (``workflows.money``: any key spelling, any nesting, minor units); (None, None) if it carries none,
    and (None, currency) when the amount is there but cannot be read."""
    found = money.amounts_in(data)
    if not found:
        return None, None
    first = found[0]
    return (None if first.value is None else format(first.value, "f")), first.currency


def fork_plan(
    steps: list[Step], *, edited_seq: int | None, edited_input: Json, then: list[PlanStep] | None = None
) -> list[PlanStep]:
    """The plan a fork opens with: the original's steps from the fork point on, as endpoint 4 answers a plan
    (amount and currency as the step's input declares them), the edited input in place of its step's, then
    the steps the original still planned (``then``, its last checkpoint's plan). Steps past what the original
    recorded or planned are not known to the console and cannot be listed."""
    plan: list[PlanStep] = []
    for step in steps:
        data = edited_input if step.seq == edited_seq else step.input
        is_effect = step.kind == Step.Kind.EFFECT
        amount, currency = stake(data) if is_effect else (None, None)
        # An effect whose input carries an amount moves money even when its value cannot be read.
        moves = is_effect and money.carries_money(data)
        plan.append(
            {"name": step.name, "kind": step.kind, "amount": amount, "currency": currency, "moves_money": moves}
        )
    recorded = {step.name for step in steps}
    plan += [step for step in then or [] if isinstance(step, dict) and step.get("name") not in recorded]
    return plan


class Step(Stateful):
    class Kind(models.TextChoices):
        MODEL = "model"
        TOOL = "tool"
        EFFECT = "effect"
        MESSAGE = "message"

    class Status(models.TextChoices):
        PENDING = "pending"
        COMMITTED = "committed"
        FAILED = "failed"

    TRANSITIONS = {
        Status.PENDING: {Status.COMMITTED, Status.FAILED},
        # A failed effect may be tried again under the same idempotency key (``retry``).
        Status.FAILED: {Status.PENDING},
    }

    # No index of its own: it leads one_step_per_seq.
    workflow = models.ForeignKey("workflows.Workflow", on_delete=models.CASCADE, related_name="steps", db_index=False)
    seq = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    verified = models.BooleanField(default=False)
    # NULL, not "", means "none sent": the API echoes null, and the partial unique
    # index on idempotency_key must ignore steps without one.
    promise = models.TextField(null=True, blank=True)  # noqa: DJ001
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    external_ref = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # db_default too: bulk loaders (demo/volume.py's COPY) name only the columns they fill.
    attempts = models.PositiveIntegerField(default=1, db_default=1, help_text="1 + the retries of a failed effect.")
    history = models.JSONField(
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        help_text="The earlier attempts of a retried effect, oldest first.",
    )
    # Set when the step is recorded (its input never changes after): the history that money.History reads,
    # kept as a column so "has this effect ever moved money" is an index lookup, not a scan of every input.
    carries_money = models.BooleanField(
        default=False, db_default=False, help_text="An effect whose input carries money (workflows.money)."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workflow", "seq"]
        indexes = [
            models.Index(
                fields=["name"],
                condition=Q(kind="effect", status="committed", carries_money=True),
                name="step_moved_money",
            )
        ]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "seq"], name="one_step_per_seq"),
            models.UniqueConstraint(
                fields=["workflow", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="one_step_per_idempotency_key",
            ),
            models.CheckConstraint(condition=Q(seq__gte=1), name="step_seq_positive"),
            models.CheckConstraint(
                condition=~Q(kind="effect") | Q(idempotency_key__isnull=False), name="effect_has_idempotency_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.seq}. {self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.note_money()
        super().save(*args, **kwargs)

    def note_money(self) -> None:
        """Whether this step is an effect whose input carries money; every path that records a step calls it."""
        self.carries_money = self.kind == self.Kind.EFFECT and money.carries_money(self.input)

    RECORDED_FIELDS = (
        "name",
        "kind",
        "status",
        "input",
        "output",
        "verified",
        "promise",
        "idempotency_key",
        "external_ref",
    )
    # What a step is: a report may not change these once recorded (report a new seq instead).
    IDENTITY_FIELDS = ("name", "kind", "input", "idempotency_key")
    # What moving a pending step on to committed or failed may set.
    SET_ON_TRANSITION = ("status", "output", "verified", "promise", "external_ref")
    # A null in a resend means "not repeated", not "erase": commit reports need not resend the input.
    KEPT_WHEN_NULL = ("input", "output", "promise", "idempotency_key", "external_ref")

    @property
    def is_effect(self) -> bool:
        """A step that changed the world (a refund, a ticket note): it carries a key and maybe a reference."""
        return self.kind == self.Kind.EFFECT

    @property
    def is_unknown_effect(self) -> bool:
        return self.is_effect and self.status == self.Status.PENDING

    @property
    def is_retryable(self) -> bool:
        """A failed effect: nothing happened, so it may be tried again under its key."""
        return self.is_effect and self.status == self.Status.FAILED

    def retry(self, *, actor: Actor | None = None) -> bool:
        """FAILED -> PENDING: a new attempt of a failed effect under the same idempotency key.

        The failed attempt is kept in ``history`` (and in the event); False when another report
        retried it first. Only effects: any other step is simply reported again under a new seq.
        """
        if not self.is_retryable:
            raise IllegalTransition(
                f"Step {self.seq} is a {self.status} {self.kind}; only a failed effect is retried under its key."
            )
        earlier = {
            "attempt": self.attempts,
            "status": self.status,
            "output": self.output,
            "external_ref": self.external_ref,
            "at": self.updated_at.isoformat(),
        }
        return self.move(
            self.Status.PENDING,
            actor=actor,
            verb=Event.Verb.STEP_RETRIED,
            data={"seq": self.seq, "name": self.name, "attempt": self.attempts + 1},
            attempts=models.F("attempts") + 1,
            history=[*self.history, earlier],
            output=None,
            external_ref=None,
            updated_at=timezone.now(),
        )

    def as_dict(self) -> StepRecord:
        return {
            "seq": self.seq,
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "input": self.input,
            "output": self.output,
            "verified": self.verified,
            "promise": self.promise,
            "idempotency_key": self.idempotency_key,
            "external_ref": self.external_ref,
        }

    @classmethod
    def insert_new(cls, workflow: Workflow, reports: list[Mapping[str, Any]]) -> dict[int, Step]:
        """Insert the reports whose seq and idempotency key are free, in one statement; the new steps by seq.

        ``ON CONFLICT DO NOTHING`` settles a race with a concurrent report in the database: no lookup
        before, no IntegrityError and savepoint after.
        """
        steps = cls._insertable(workflow, reports)
        if not steps:
            return {}
        sql, params = cls._insert_sql(steps)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cls._inserted(steps, dict(cursor.fetchall()))

    @classmethod
    def insert_one_touching(cls, workflow: Workflow, report: Mapping[str, Any], *, actor: Agent) -> Step | None:
        """PostgreSQL: a new step, its workflow's sign of life and its Event in one statement, so one round
        trip and one commit (the step report is the API's hottest path). None when the seq or the key is
        taken, or the report cannot be a new step: the caller then judges it by the usual rules."""
        steps = cls._insertable(workflow, [report])
        if not steps:
            return None
        insert, params = cls._insert_sql(steps, returning="seq, id, status, name, kind")
        now = timezone.now()
        event = Event._meta
        sql = (
            f"WITH touched AS (UPDATE {workflow._meta.db_table} SET last_activity_at = %s WHERE id = %s), "  # noqa: S608 - names are ours
            f"new AS ({insert}), "
            f"logged AS (INSERT INTO {event.db_table} (at, actor_type, actor_agent_id, actor_name, subject, verb, "
            f"workflow_id, data) SELECT %s, %s, %s, %s, 'step:' || new.id, 'step_' || new.status, %s, "
            f"jsonb_build_object('seq', new.seq, 'name', new.name, 'kind', new.kind) FROM new) "
            f"SELECT seq, id FROM new"
        )
        with connection.cursor() as cursor:
            cursor.execute(
                sql, [now, workflow.pk, *params, now, Event.ActorType.AGENT, actor.pk, actor.name, workflow.pk]
            )
            new = cls._inserted(steps, dict(cursor.fetchall()))
        workflow.last_activity_at = now
        return new.get(report["seq"])

    # The columns a report fills, in the order of insert_many_touching's unnest() arrays and their SQL types.
    UNNESTED = (
        ("seq", "int"),
        ("name", "text"),
        ("kind", "text"),
        ("status", "text"),
        ("input", "text"),  # JSON text, cast to jsonb in the statement
        ("output", "text"),
        ("verified", "bool"),
        ("promise", "text"),
        ("idempotency_key", "text"),
        ("external_ref", "text"),
        ("carries_money", "bool"),
    )

    @classmethod
    def insert_many_touching(
        cls, workflow: Workflow, reports: list[Mapping[str, Any]], *, actor: Agent
    ) -> dict[int, Step]:
        """PostgreSQL: the reports whose seq and key are free as new steps, their Events and the workflow's sign of
        life in ONE statement; the new steps by seq.

        One array parameter per column (``unnest()``), not one parameter per column per row: a batch of 500
        is eleven values for the driver to adapt, and no model instance is built for a row before the database
        said it is new. ``ON CONFLICT DO NOTHING`` settles taken seqs and keys as ``insert_new`` does; the
        caller judges those reports by the usual rules. Events are written in the order sent."""
        now = timezone.now()
        # An effect without its key can only be a later report of a recorded step (kept when null).
        rows = [r for r in reports if r["kind"] != cls.Kind.EFFECT or r.get("idempotency_key") is not None]
        names = [name for name, _type in cls.UNNESTED]
        columns: list[list[Any]] = [[] for _ in names]
        given: list[dict[str, Any]] = []  # each row's values by column name (a report may leave out a default)
        for report in rows:
            values = {name: report.get(name) for name in names[:-1]}
            values["verified"] = bool(report.get("verified", False))
            values["carries_money"] = report["kind"] == cls.Kind.EFFECT and money.carries_money(values["input"])
            given.append(values)
            for column, name in zip(columns, names, strict=True):
                column.append(values[name])
        for json_column in (columns[names.index("input")], columns[names.index("output")]):
            json_column[:] = [None if value is None else _json_text(value) for value in json_column]
        if not rows:
            workflow.touch()
            return {}
        quote = connection.ops.quote_name
        arrays = ", ".join(f"%s::{sql_type}[]" for _name, sql_type in cls.UNNESTED)
        selected = ", ".join(
            f"r.{quote(name)}::jsonb" if name in ("input", "output") else f"r.{quote(name)}" for name in names
        )
        step, event = cls._meta, Event._meta
        sql = (
            f"WITH r AS (SELECT * FROM unnest({arrays}) WITH ORDINALITY "  # noqa: S608 - names are ours
            f"AS r({', '.join(quote(name) for name in names)}, n)), "
            f"touched AS (UPDATE {workflow._meta.db_table} SET last_activity_at = %s WHERE id = %s), "
            f"new AS (INSERT INTO {step.db_table} (workflow_id, {', '.join(quote(name) for name in names)}, "
            f"attempts, history, created_at, updated_at) "
            f"SELECT %s, {selected}, 1, '[]'::jsonb, %s, %s FROM r ORDER BY r.n "
            f"ON CONFLICT DO NOTHING RETURNING id, seq, status, name, kind), "
            f"logged AS (INSERT INTO {event.db_table} (at, actor_type, actor_agent_id, actor_name, subject, verb, "
            f"workflow_id, data) SELECT %s, %s, %s, %s, 'step:' || new.id, 'step_' || new.status, %s, "
            f"jsonb_build_object('seq', new.seq, 'name', new.name, 'kind', new.kind) || %s::jsonb "
            f"FROM new JOIN r ON r.seq = new.seq ORDER BY r.n) "
            f"SELECT seq, id FROM new"
        )
        channel = via.current()
        extra = "{}" if channel == via.Via.CONSOLE else _json_text({"via": channel})  # as Event.about adds it
        params: list[Any] = [
            *(_array_literal(column) for column in columns),
            now,
            workflow.pk,
            workflow.pk,
            now,
            now,
            now,
            Event.ActorType.AGENT,
            actor.pk,
            actor.name,
            workflow.pk,
            extra,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            inserted = dict(cursor.fetchall())
        workflow.last_activity_at = now
        new = {}
        attnames = [f.attname for f in cls._meta.concrete_fields]
        for values in given:
            pk = inserted.get(values["seq"])
            if pk is None:
                continue
            recorded = {
                **values,
                "id": pk,
                "workflow_id": workflow.pk,
                "attempts": 1,
                "history": [],
                "created_at": now,
                "updated_at": now,
            }
            # Values in field order: Django's fast path for a loaded row (from_db), no default computed per row.
            made = cls.from_db(connection.alias, attnames, [recorded[name] for name in attnames])
            made._state.fields_cache["workflow"] = workflow
            new[made.seq] = made
        return new

    @classmethod
    def _insertable(cls, workflow: Workflow, reports: list[Mapping[str, Any]]) -> list[Step]:
        now = timezone.now()
        # An effect without its key can only be a later report of a recorded step (kept when null).
        steps = [
            cls(workflow=workflow, created_at=now, updated_at=now, **report)
            for report in reports
            if report["kind"] != cls.Kind.EFFECT or report.get("idempotency_key") is not None
        ]
        for step in steps:
            step.note_money()
        return steps

    @classmethod
    def _insert_sql(cls, steps: list[Step], *, returning: str = "seq, id") -> tuple[str, list[Any]]:
        fields = [f for f in cls._meta.concrete_fields if not f.primary_key]  # defaults from the instances
        row = f"({', '.join(['%s'] * len(fields))})"
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)  # ours, values are parameters
        sql = (
            f"INSERT INTO {cls._meta.db_table} ({columns}) "  # noqa: S608
            f"VALUES {', '.join([row] * len(steps))} ON CONFLICT DO NOTHING RETURNING {returning}"
        )
        return sql, [f.get_db_prep_save(getattr(step, f.attname), connection) for step in steps for f in fields]

    @staticmethod
    def _inserted(steps: list[Step], inserted: dict[int, int]) -> dict[int, Step]:
        new = {}
        for step in steps:
            if step.seq in inserted:
                step.pk, step._state.adding, step._state.db = inserted[step.seq], False, connection.alias
                new[step.seq] = step
        return new

    @staticmethod
    def key_taken(seq: int) -> Conflict:
        return Conflict(
            f"Step {seq} of this workflow already uses this idempotency_key; an effect is recorded once.",
            code="idempotency_key_taken",
            field="idempotency_key",
        )

    def as_reported(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """The step as this report would leave it."""
        recorded: Mapping[str, object] = self.as_dict()  # read field by field, by name
        return {f: recorded[f] if f in self.KEPT_WHEN_NULL and report[f] is None else report[f] for f in recorded}

    def apply_report(self, report: Mapping[str, Any], *, actor: Agent) -> Step:
        """Identical resend: unchanged. pending -> committed|failed, and a failed effect reported pending
        again (a retry under its key): applied. Anything else: Conflict."""
        wanted, recorded = self.as_reported(report), dict(self.as_dict())
        if canonical(wanted) == canonical(recorded):
            return self
        retrying = self.is_retryable and wanted["status"] == self.Status.PENDING
        if self.status != self.Status.PENDING and not retrying:
            raise Conflict(
                f"Step {self.seq} is already {self.status}; a recorded step cannot change "
                "(resend it unchanged or report a new seq).",
                code="step_conflict",
            )
        if changed := [f for f in self.IDENTITY_FIELDS if canonical(wanted[f]) != canonical(recorded[f])]:
            raise Conflict(
                f"Step {self.seq} was recorded with a different {', '.join(changed)}; report a new seq instead.",
                code="step_conflict",
                field=changed[0],
            )
        if retrying:  # failed -> pending: a new attempt of the same effect under the same key
            won = self.retry(actor=actor)
            return self if won else self.apply_report(report, actor=actor)
        if wanted["status"] not in self.TRANSITIONS[self.Status.PENDING]:
            raise Conflict(
                f"Step {self.seq} is pending; it can only move to committed or failed.",
                code="step_conflict",
                field="status",
            )
        # The one place status changes happen: a compare-and-set that writes the step's Event.
        won = self.move(
            wanted["status"],
            actor=actor,
            verb=Event.Verb.step(wanted["status"]),
            data={"seq": self.seq, "name": self.name},
            updated_at=timezone.now(),
            **{f: wanted[f] for f in self.SET_ON_TRANSITION if f != "status"},
        )
        # Lost a race with another report of this step: judge this one against what won.
        return self if won else self.apply_report(report, actor=actor)
