"""The plumbing of a bulk load: what was added, the next free ids, ``COPY`` itself, and what follows a load
(the sequences caught up, the statistics and the visibility map a query plan reads).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import NOT_PROVIDED

from workflows.models import Agent, Checkpoint, Step

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

KINDS = ("refund", "billing_dispute", "ticket_triage", "account_recovery", "order_change")
STEP_PLAN = (  # name, kind: the shape of a support agent's run, repeated as far as a workflow goes
    ("read_ticket", Step.Kind.TOOL),
    ("decide_refund", Step.Kind.MODEL),
    ("issue_refund", Step.Kind.EFFECT),
    ("write_ticket_note", Step.Kind.EFFECT),
    ("notify_customer", Step.Kind.MESSAGE),
    ("summarise_case", Step.Kind.MODEL),
    ("lookup_order", Step.Kind.TOOL),
    ("update_crm", Step.Kind.EFFECT),
)
OPEN_STATES = Checkpoint.OPEN_STATUSES
# One value of a row handed to COPY: psycopg writes each in its column's text form (JSON goes as its text).
CopyValue: TypeAlias = "str | int | float | bool | datetime | uuid.UUID | None"
Row: TypeAlias = tuple[CopyValue, ...]


@dataclass
class Volume:
    """What one call added (and what it started from)."""

    agents: int = 0
    workflows: int = 0
    steps: int = 0
    checkpoints: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    events: int = 0

    @property
    def rows(self) -> int:
        return self.agents + self.workflows + self.steps + sum(self.checkpoints.values()) + self.decisions + self.events


def next_ids(*tables: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        ids = {}
        for table in tables:
            cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")  # noqa: S608 - our table names
            ids[table] = cursor.fetchone()[0]
        return ids


def copy_rows(table: str, columns: Iterable[str], rows: Iterator[Row]) -> int:
    """COPY rows into a table; returns how many. Columns not given get their field's default, and a column
    with a database default (``db_default``) is left to the database."""
    from django.apps import apps

    columns = list(columns)
    model = next(m for m in apps.get_app_config("workflows").get_models() if m._meta.db_table == table)
    rest = [
        f
        for f in model._meta.concrete_fields
        if f.column not in columns and not f.primary_key and f.db_default is NOT_PROVIDED
    ]
    defaults = tuple(f.get_db_prep_save(f.get_default(), connection) for f in rest)
    n = 0
    with connection.cursor() as cursor:
        sql = f"COPY {table} ({', '.join(columns + [f.column for f in rest])}) FROM STDIN"
        with cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row + defaults)
                n += 1
    return n


def catch_up_sequences(*tables: str) -> None:
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608
                f"(SELECT coalesce(max(id), 1) FROM {table}))"
            )


def settle(*tables: str) -> None:
    """What autovacuum does soon after a load: statistics and the visibility map (index-only scans).

    Without the second, a count the queue page caps at 10,000 reads the table instead of its index:
    the breached tab took 56 ms at the 1M tier instead of 3 ms. VACUUM cannot run in a transaction
    (a test's): there, statistics only."""
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"{command} {table}")


def reporter(progress: Callable[[str], object] | None) -> Callable[[str], None]:
    """``say(message)``: the message and the seconds since the generator started, when someone listens."""
    started = time.perf_counter()

    def say(message: str) -> None:
        if progress:
            progress(f"{message} ({time.perf_counter() - started:.1f}s)")

    return say


def skip_foreign_key_triggers(cursor: CursorWrapper, say: Callable[[str], None]) -> None:
    """The rows are consistent by construction: skip the per-row foreign-key triggers for this transaction,
    as pg_restore --disable-triggers does. Needs a superuser; without one the load is slower, and says so."""
    try:
        with transaction.atomic():
            cursor.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        say("not a superuser: foreign keys are checked row by row (slower)")


def operators_for_volume(n: int = 8) -> list[int]:
    User = get_user_model()
    ids = []
    for i in range(1, n + 1):
        user, _ = User.objects.get_or_create(username=f"volume-operator-{i}")
        ids.append(user.pk)
    return ids


def agents_for_volume(n: int, rng: random.Random, now: datetime) -> list[int]:
    existing = list(Agent.objects.filter(name__startswith="volume-").order_by("pk").values_list("pk", flat=True))
    for i in range(len(existing), n):
        agent = Agent(name=f"volume-{i + 1}", description="generated", resume_url="", created_at=now)
        agent.signing_secret = f"{rng.getrandbits(128):032x}"  # a property (sealed at rest)
        agent.set_new_token()  # thrown away: nobody reports as a generated agent
        agent.save()
        existing.append(agent.pk)
    return existing[:n]


def step_payload(rng: random.Random, wf: int, seq: int) -> tuple[str, str]:
    """About 250 bytes of input and output JSON, like a tool or model call's."""
    amount = f"{rng.randrange(100, 50_000) / 100:.2f}"
    data_in = {
        "ticket": f"T-{wf}",
        "customer": f"C-{rng.randrange(10**6):06d}",
        "amount": amount,
        "currency": "EUR",
        "reason": "item arrived damaged",
        "step": seq,
        "context": {"channel": rng.choice(("email", "chat", "phone")), "priority": rng.randrange(1, 5)},
    }
    data_out = {
        "ok": True,
        "reference": f"R-{wf}-{seq}",
        "latency_ms": rng.randrange(20, 900),
        "text": "Refund approved within policy; customer informed of the 5 day window.",
    }
    return json.dumps(data_in), json.dumps(data_out)
