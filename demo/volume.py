"""Realistic volumes for benchmarks and capacity checks, loaded with PostgreSQL ``COPY``.

``generate(...)`` appends agents, workflows, their steps (JSON input and output
of a few hundred bytes, effects with idempotency keys), checkpoints in every
state (open, claimed, breached, warned, due, decided, resolved), decisions in
every delivery state, and the audit events they would have written, with ids
after the ones already there. It bypasses the ORM on purpose: a million
``Step.objects.create`` calls take an hour, ``COPY`` takes seconds. Everything
random comes from one seeded ``random.Random``.

Run it as ``manage.py generate_volume`` (see that command) or from scripts/bench/.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import NOT_PROVIDED
from django.utils import timezone

from workflows.models import Agent, Checkpoint, Reason, SLAPolicy, Step

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


def _next_ids(*tables: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        ids = {}
        for table in tables:
            cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")  # noqa: S608 - our table names
            ids[table] = cursor.fetchone()[0]
        return ids


def _copy(table: str, columns: Iterable[str], rows: Iterator[tuple[Any, ...]]) -> int:
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


def _catch_up_sequences(*tables: str) -> None:
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608
                f"(SELECT coalesce(max(id), 1) FROM {table}))"
            )


def _settle(*tables: str) -> None:
    """What autovacuum does soon after a load: statistics and the visibility map (index-only scans).

    Without the second, a count the queue page caps at 10,000 reads the table instead of its index:
    the breached tab took 56 ms at the 1M tier instead of 3 ms. VACUUM cannot run in a transaction
    (a test's): there, statistics only."""
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"{command} {table}")


def _reporter(progress: Callable[[str], object] | None) -> Callable[[str], None]:
    """``say(message)``: the message and the seconds since the generator started, when someone listens."""
    started = time.perf_counter()

    def say(message: str) -> None:
        if progress:
            progress(f"{message} ({time.perf_counter() - started:.1f}s)")

    return say


def _skip_foreign_key_triggers(cursor: Any, say: Callable[[str], None]) -> None:
    """The rows are consistent by construction: skip the per-row foreign-key triggers for this transaction,
    as pg_restore --disable-triggers does. Needs a superuser; without one the load is slower, and says so."""
    try:
        with transaction.atomic():
            cursor.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        say("not a superuser: foreign keys are checked row by row (slower)")


def _operators(n: int = 8) -> list[int]:
    User = get_user_model()
    ids = []
    for i in range(1, n + 1):
        user, _ = User.objects.get_or_create(username=f"volume-operator-{i}")
        ids.append(user.pk)
    return ids


def _agents(n: int, rng: random.Random, now: datetime) -> list[int]:
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


def generate(
    *,
    agents: int = 20,
    workflows: int = 10_000,
    steps: int = 50_000,
    open_checkpoints: int = 1_000,
    decided: int = 100,
    resolved: int = 1_000,
    due: int = 0,
    seed: int = 2026,
    replica: bool = True,
    progress: Callable[[str], object] | None = None,
) -> Volume:
    """Append this much data; ``due`` of the open checkpoints are past due with no breach recorded yet."""
    if connection.vendor != "postgresql":
        raise RuntimeError("The volume generator uses COPY: it needs PostgreSQL (set DATABASE_URL).")
    if open_checkpoints + decided > workflows:
        raise ValueError("Each workflow has at most one unresolved checkpoint: raise workflows.")
    if due > open_checkpoints:
        raise ValueError("Only open checkpoints can be due: raise open_checkpoints.")
    rng = random.Random(seed)
    now = timezone.now()
    say = _reporter(progress)

    volume = Volume()
    operators = _operators()
    agent_ids = _agents(agents, rng, now)
    volume.agents = agents
    tables = ("workflows_workflow", "workflows_step", "workflows_checkpoint", "workflows_decision", "workflows_event")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")  # a bulk load: one fsync at the end is plenty
            if replica:
                _skip_foreign_key_triggers(cursor, say)
        ids = _next_ids(*tables)
        wf0 = ids["workflows_workflow"]
        # Workflow i's fate: the first ones pause on the queue, then decided ones, then history.
        unresolved = open_checkpoints + decided
        wf_rows, wf_status, wf_agent = [], [], []
        for i in range(workflows):
            agent = agent_ids[i % len(agent_ids)]
            created = now - timedelta(seconds=rng.randrange(7 * 86_400))
            if i < open_checkpoints:
                status = "paused"
            elif i < unresolved:
                status = rng.choice(("paused", "resuming"))
            else:
                status = rng.choices(
                    ("running", "completed", "failed", "handed_off", "aborted"), weights=(15, 70, 5, 6, 4)
                )[0]
            finished = (
                created + timedelta(minutes=rng.randrange(1, 120))
                if status in ("completed", "failed", "handed_off", "aborted")
                else None
            )
            wf_status.append(status)
            wf_agent.append(agent)
            kind = KINDS[i % len(KINDS)]
            wf_rows.append(
                (
                    wf0 + i,
                    f"VOL-{wf0 + i}",
                    kind,
                    f"{kind.replace('_', ' ').title()} for ticket T-{wf0 + i}",
                    json.dumps({"ticket": f"T-{wf0 + i}", "tier": rng.choice(("gold", "silver"))}),
                    status,
                    "",
                    "",
                    created,
                    finished or created,
                    finished,
                    agent,
                    rng.choice(operators),
                )
            )
        volume.workflows = _copy(
            "workflows_workflow",
            (
                "id",
                "external_id",
                "kind",
                "title",
                "context",
                "status",
                "summary",
                "handoff_note",
                "created_at",
                "last_activity_at",
                "finished_at",
                "agent_id",
                "owner_id",
            ),
            iter(wf_rows),
        )
        say(f"workflows: {volume.workflows:,}")

        # Steps: spread over the workflows, each run numbered 1..n.
        per = [steps // workflows + (1 if i < steps % workflows else 0) for i in range(workflows)]
        step0 = ids["workflows_step"]

        def step_rows() -> Iterator[tuple[Any, ...]]:
            pk = step0
            for i, n in enumerate(per):
                wf = wf0 + i
                for seq in range(1, n + 1):
                    name, kind = STEP_PLAN[(seq - 1) % len(STEP_PLAN)]
                    data_in, data_out = step_payload(rng, wf, seq)
                    last_effect_unknown = i < unresolved and seq == n and kind == Step.Kind.EFFECT
                    status = (
                        "pending"
                        if last_effect_unknown or (seq == n and wf_status[i] == "running")
                        else ("failed" if rng.random() < 0.02 else "committed")
                    )
                    key = f"VOL-{wf}:{name}:{seq}" if kind == Step.Kind.EFFECT else None
                    at = now - timedelta(seconds=rng.randrange(7 * 86_400))
                    yield (
                        pk,
                        seq,
                        name,
                        kind,
                        status,
                        data_in,
                        data_out if status == "committed" else None,
                        kind == Step.Kind.TOOL and status == "committed",
                        "refund within 5 days" if name == "notify_customer" else None,
                        key,
                        f"R-{wf}-{seq}" if key and status == "committed" else None,
                        at,
                        at,
                        wf,
                        1,
                        "[]",
                    )
                    pk += 1

        volume.steps = _copy(
            "workflows_step",
            (
                "id",
                "seq",
                "name",
                "kind",
                "status",
                "input",
                "output",
                "verified",
                "promise",
                "idempotency_key",
                "external_ref",
                "created_at",
                "updated_at",
                "workflow_id",
                "attempts",
                "history",
            ),
            step_rows(),
        )
        say(f"steps: {volume.steps:,}")

        # Checkpoints: open/claimed (some breached, some warned, `due` past due), decided, resolved history.
        cp0 = ids["workflows_checkpoint"]
        cp_rows, cp_status = [], []
        counts: dict[str, int] = {}
        resume = json.dumps(
            {
                "committed": [],
                "pending": None,
                "last_verified_output": {"ok": True},
                "promises": ["refund within 5 days"],
                "unknown_effects": [],
                "state": {},
            }
        )
        total = unresolved + resolved
        terms = json.dumps(SLAPolicy.fallback())  # the terms every checkpoint without a runbook freezes
        for j in range(total):
            if j < open_checkpoints:
                status, wf_index = rng.choice(OPEN_STATES), j
            elif j < unresolved:
                status, wf_index = "decided", j
            else:
                status, wf_index = "resolved", rng.randrange(workflows)
            opened = now - timedelta(seconds=rng.randrange(1, 86_400 if status != "resolved" else 30 * 86_400))
            if status in OPEN_STATES and j < due:
                due_at = now - timedelta(seconds=rng.randrange(1, 600))
                breached = warned = None
            elif status in OPEN_STATES and rng.random() < 0.85:  # most of the queue is not due yet
                due_at = now + timedelta(seconds=rng.randrange(60, 86_400))
                breached, warned = None, (now if due_at - timedelta(minutes=2) < now else None)
            else:  # breached on the queue, or long decided
                due_at = opened + timedelta(minutes=rng.choice((5, 30, 240)))
                breached = due_at if due_at < now and status != "resolved" else None  # the sweep saw it
                warned = due_at - timedelta(minutes=2) if due_at - timedelta(minutes=2) < now else None
            key = "breached" if breached else status
            counts[key] = counts.get(key, 0) + 1
            cp_status.append(status)
            claimed = status != "open"
            cp_rows.append(
                (
                    cp0 + j,
                    rng.choice(Reason.values),
                    "generated by generate_volume",
                    per[wf_index] or None,
                    "{}",
                    resume,
                    status,
                    False,
                    opened if claimed else None,
                    opened,
                    due_at - timedelta(minutes=2),
                    due_at,
                    warned,
                    breached,
                    opened + timedelta(minutes=20) if status == "resolved" else None,
                    rng.choice(operators) if claimed else None,
                    None,
                    wf0 + wf_index,
                    terms,
                    0,
                    opened if claimed else None,
                    opened + timedelta(minutes=15) if status in ("decided", "resolved") else None,
                )
            )
        _copy(
            "workflows_checkpoint",
            (
                "id",
                "reason",
                "detail",
                "at_seq",
                "state",
                "resume_state",
                "status",
                "opened_by_console",
                "claimed_at",
                "opened_at",
                "warn_at",
                "due_at",
                "warned_at",
                "breached_at",
                "resolved_at",
                "assignee_id",
                "runbook_id",
                "workflow_id",
                "sla",
                "escalations_fired",
                "first_claimed_at",
                "clock_stopped_at",
            ),
            iter(cp_rows),
        )
        volume.checkpoints = counts
        say(f"checkpoints: {total:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))})")

        # Decisions: one active per decided checkpoint (queued/running/proposed), one succeeded per resolved.
        d0 = ids["workflows_decision"]

        def decision_rows() -> Iterator[tuple[Any, ...]]:
            for j in range(open_checkpoints, total):
                if cp_status[j] == "decided":
                    status = rng.choice(("queued", "running", "proposed"))
                else:
                    status = "succeeded" if rng.random() < 0.97 else "failed"
                row = cp_rows[j]
                decided_at = row[9] + timedelta(minutes=5)
                yield (
                    d0 + j - open_checkpoints,
                    rng.choice(("resume", "resume", "handoff", "retry_step", "abort")),
                    "",
                    "{}",
                    "{}",
                    "",
                    decided_at,
                    status,
                    uuid.UUID(int=rng.getrandbits(128)),
                    0 if status in ("queued", "proposed") else 1,
                    decided_at if status == "queued" else None,
                    decided_at + timedelta(seconds=60) if status == "running" else None,
                    "The agent answered 503 Service Unavailable." if status == "failed" else "",
                    decided_at + timedelta(seconds=1) if status in ("succeeded", "failed") else None,
                    None,
                    row[0],
                    row[15] or operators[0],
                    None,
                )

        volume.decisions = _copy(
            "workflows_decision",
            (
                "id",
                "action",
                "instructions",
                "confirmations",
                "confirmation_refs",
                "handoff_to",
                "decided_at",
                "status",
                "delivery_id",
                "attempts",
                "next_attempt_at",
                "lease_expires_at",
                "last_error",
                "finished_at",
                "approved_by_id",
                "checkpoint_id",
                "decided_by_id",
                "new_owner_id",
            ),
            decision_rows(),
        )
        say(f"decisions: {volume.decisions:,}")

        # The audit trail those rows would have written: created, one per step, opened per checkpoint.
        e0 = ids["workflows_event"]

        names = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name"))

        def event_rows() -> Iterator[tuple[Any, ...]]:
            pk = e0
            for i, row in enumerate(wf_rows):
                yield (
                    pk,
                    row[8],
                    "agent",
                    "created",
                    json.dumps({"external_id": row[1]}),
                    wf_agent[i],
                    None,
                    None,
                    None,
                    row[0],
                    names[wf_agent[i]],
                )
                pk += 1
                for seq in range(1, per[i] + 1):
                    yield (
                        pk,
                        row[8],
                        "agent",
                        "step_committed",
                        f'{{"seq": {seq}}}',
                        wf_agent[i],
                        None,
                        None,
                        None,
                        row[0],
                        names[wf_agent[i]],
                    )
                    pk += 1
            for cp in cp_rows:
                yield (
                    pk,
                    cp[9],
                    "system",
                    "opened",
                    json.dumps({"reason": cp[1]}),
                    None,
                    None,
                    cp[0],
                    None,
                    cp[17],
                    "",
                )
                pk += 1

        volume.events = _copy(
            "workflows_event",
            (
                "id",
                "at",
                "actor_type",
                "verb",
                "data",
                "actor_agent_id",
                "actor_user_id",
                "checkpoint_id",
                "decision_id",
                "workflow_id",
                "actor_name",
            ),
            event_rows(),
        )
        say(f"events: {volume.events:,}")
        _catch_up_sequences(*tables)
        with connection.cursor() as cursor:  # when called inside a longer transaction (tests)
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    _settle(*tables)
    return volume


# --- a history of SLA breaches, for the breach review at a million checkpoints -------------------------

BREACH_REASONS = (
    "Understaffed shift",
    "Agent flood after an outage",
    "Waiting on the customer",
    "Unclear runbook",
    "Payment provider slow",
)


def generate_breach_history(
    *,
    checkpoints: int = 1_000_000,
    days: int = 365,
    open_now: int = 1_000,
    seed: int = 2026,
    progress: Callable[[str], object] | None = None,
) -> Volume:
    """``checkpoints`` decided checkpoints opened over the last ``days`` (plus ``open_now`` on the queue), as
    the SLA sweep and the operators would have left them: claim and decision stamps, about one in ten
    past its decision target (breached at its due time, escalation levels fired, a reason recorded for a
    third of those), the decision rows and the audit events (opened, claimed, escalated, reminders and
    releases). Everything random comes from one seeded ``random.Random``."""
    from workflows.models import BreachReason, EscalationLevel, Runbook

    if connection.vendor != "postgresql":
        raise RuntimeError("The volume generator uses COPY: it needs PostgreSQL (set DATABASE_URL).")
    rng = random.Random(seed)
    now = timezone.now()
    say = _reporter(progress)

    operators = _operators()
    agent_ids = _agents(20, rng, now)
    books = []  # (runbook id, policy id, frozen terms, decision target and claim target in minutes)
    for i, (kind, target) in enumerate(zip(KINDS, (30, 60, 240, 45, 120), strict=True)):
        policy, _ = SLAPolicy.objects.get_or_create(
            name=f"volume-{kind}",
            defaults={
                "decision_target_minutes": target,
                "decision_warning": 10,
                "claim_target_minutes": 15,
                "claim_warning": 5,
            },
        )
        if not policy.levels.exists():
            EscalationLevel.objects.create(policy=policy, delay_minutes=10, notify=True, user_id=operators[i])
            EscalationLevel.objects.create(
                policy=policy, delay_minutes=60, notify=True, reassign=True, user_id=operators[-1 - i]
            )
        runbook, _ = Runbook.objects.get_or_create(
            slug=f"volume-{kind}",
            defaults={"title": f"{kind.replace('_', ' ').title()} runbook", "workflow_kind": kind, "policy": policy},
        )
        books.append((runbook.pk, policy.pk, json.dumps(policy.freeze(), default=str), target, 15))
    reasons = [BreachReason.objects.get_or_create(name=name)[0].pk for name in BREACH_REASONS]
    volume = Volume(agents=len(agent_ids))
    tables = ("workflows_workflow", "workflows_checkpoint", "workflows_decision", "workflows_event")
    total = checkpoints + open_now
    n_workflows = max(open_now, total // 4)  # a workflow pauses about four times; one open checkpoint each
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
            _skip_foreign_key_triggers(cursor, say)
        ids = _next_ids(*tables)
        wf0, cp0, d0, e0 = (ids[t] for t in tables)
        wf_agent = [agent_ids[i % len(agent_ids)] for i in range(n_workflows)]

        def workflow_rows() -> Iterator[tuple[Any, ...]]:
            for i in range(n_workflows):
                kind = KINDS[i % len(KINDS)]
                created = now - timedelta(days=days, seconds=rng.randrange(86_400))
                status = "paused" if i < open_now else "completed"
                yield (
                    wf0 + i,
                    f"BRH-{wf0 + i}",
                    kind,
                    f"{kind.replace('_', ' ').title()} for ticket T-{wf0 + i}",
                    "{}",
                    status,
                    "",
                    "",
                    created,
                    now,
                    None if status == "paused" else now,
                    wf_agent[i],
                    operators[i % len(operators)],
                )

        volume.workflows = _copy(
            "workflows_workflow",
            (
                "id",
                "external_id",
                "kind",
                "title",
                "context",
                "status",
                "summary",
                "handoff_note",
                "created_at",
                "last_activity_at",
                "finished_at",
                "agent_id",
                "owner_id",
            ),
            workflow_rows(),
        )
        say(f"workflows: {volume.workflows:,}")

        cp_rows: list[tuple[Any, ...]] = []
        events: list[tuple[Any, ...]] = []  # (at, verb, checkpoint, workflow, actor type, operator)
        counts = {"open": 0, "decided": 0, "breached": 0, "explained": 0}
        span = days * 86_400
        # Oldest first, as they were inserted: a period's rows sit together in the table, as in production.
        ages = sorted((rng.uniform(3_600, span) for _ in range(checkpoints)), reverse=True)
        ages += sorted((rng.uniform(60, 3_600) for _ in range(open_now)), reverse=True)
        for j in range(total):
            is_open = j >= checkpoints
            wf_index = j - checkpoints if is_open else j % n_workflows
            book = books[wf_index % len(KINDS)]
            target, claim_target = book[3] * 60, book[4] * 60
            opened = now - timedelta(seconds=ages[j])
            claim_s = claim_target * rng.lognormvariate(-1.0, 0.8)  # about one in ten claimed late
            decide_s = claim_s + target * rng.lognormvariate(-1.1, 0.7)  # about one in ten decided late
            due = opened + timedelta(seconds=target)
            warn = due - timedelta(minutes=10)
            claim_due = opened + timedelta(seconds=claim_target)
            claim_at = opened + timedelta(seconds=claim_s)
            claimed = None if is_open and claim_at > now else claim_at  # on the queue: not claimed yet
            stopped = None if is_open else opened + timedelta(seconds=decide_s)
            resolved = None if stopped is None else stopped + timedelta(seconds=30)
            breached = due if (stopped or now) > due else None
            claim_breached = claim_due if (claimed or now) > claim_due else None
            fired, reason, note = 0, None, ""
            if breached:
                overrun = ((stopped or now) - due).total_seconds()
                fired = (overrun >= 600) + (overrun >= 3_600)
                if rng.random() < 0.35:
                    reason, note = rng.choice(reasons), rng.choice(("", "see the incident", "weekend cover"))
                    counts["explained"] += 1
                counts["breached"] += 1
            counts["open" if is_open else "decided"] += 1
            assignee = operators[rng.randrange(len(operators))] if claimed else None
            cp_rows.append(
                (
                    cp0 + j,
                    rng.choice(Reason.values),
                    "generated by generate_breach_history",
                    None,
                    "{}",
                    "{}",
                    ("claimed" if claimed else "open") if is_open else "resolved",
                    False,
                    claimed,
                    opened,
                    warn,
                    due,
                    warn if (stopped or now) > warn else None,
                    breached,
                    resolved,
                    assignee,
                    book[0],
                    wf0 + wf_index,
                    book[2],
                    fired,
                    claimed,
                    stopped,
                    book[1],
                    claim_due - timedelta(minutes=5),
                    claim_due,
                    claim_breached,
                    reason,
                    note,
                    stopped,
                )
            )
            cp = cp0 + j
            events.append((opened, "opened", cp, wf0 + wf_index, "system", None))
            if claimed:
                events.append((claimed, "claimed", cp, wf0 + wf_index, "operator", assignee))
            for level in range(fired):
                events.append(
                    (due + timedelta(minutes=(10, 60)[level]), "escalated", cp, wf0 + wf_index, "system", None)
                )
            if claimed and rng.random() < 0.02:  # a claim with no progress: a reminder, now and then a release
                events.append((claimed + timedelta(minutes=10), "claim_reminder", cp, wf0 + wf_index, "system", None))
                if rng.random() < 0.3:
                    events.append((claimed + timedelta(minutes=20), "released", cp, wf0 + wf_index, "system", None))
        _copy(
            "workflows_checkpoint",
            (
                "id",
                "reason",
                "detail",
                "at_seq",
                "state",
                "resume_state",
                "status",
                "opened_by_console",
                "claimed_at",
                "opened_at",
                "warn_at",
                "due_at",
                "warned_at",
                "breached_at",
                "resolved_at",
                "assignee_id",
                "runbook_id",
                "workflow_id",
                "sla",
                "escalations_fired",
                "first_claimed_at",
                "clock_stopped_at",
                "policy_id",
                "claim_warn_at",
                "claim_due_at",
                "claim_breached_at",
                "breach_reason_id",
                "breach_note",
                "first_decision_at",
            ),
            iter(cp_rows),
        )
        volume.checkpoints = counts
        say(f"checkpoints: {total:,} ({', '.join(f'{k} {v:,}' for k, v in counts.items())})")

        def decision_rows() -> Iterator[tuple[Any, ...]]:
            for j in range(checkpoints):
                row = cp_rows[j]
                yield (
                    d0 + j,
                    rng.choice(("resume", "resume", "handoff", "retry_step", "abort")),
                    "",
                    "{}",
                    "{}",
                    "",
                    row[21],
                    "succeeded",
                    uuid.UUID(int=rng.getrandbits(128)),
                    1,
                    None,
                    None,
                    "",
                    row[21] + timedelta(seconds=2),
                    None,
                    row[0],
                    row[15] or operators[0],
                    None,
                )

        volume.decisions = _copy(
            "workflows_decision",
            (
                "id",
                "action",
                "instructions",
                "confirmations",
                "confirmation_refs",
                "handoff_to",
                "decided_at",
                "status",
                "delivery_id",
                "attempts",
                "next_attempt_at",
                "lease_expires_at",
                "last_error",
                "finished_at",
                "approved_by_id",
                "checkpoint_id",
                "decided_by_id",
                "new_owner_id",
            ),
            decision_rows(),
        )
        say(f"decisions: {volume.decisions:,}")
        names = dict(get_user_model().objects.filter(pk__in=operators).values_list("pk", "username"))

        def event_rows() -> Iterator[tuple[Any, ...]]:
            for k, (at, verb, cp, wf, actor, user) in enumerate(events):
                yield (e0 + k, at, actor, verb, "{}", None, user, cp, None, wf, names.get(user, ""))

        volume.events = _copy(
            "workflows_event",
            (
                "id",
                "at",
                "actor_type",
                "verb",
                "data",
                "actor_agent_id",
                "actor_user_id",
                "checkpoint_id",
                "decision_id",
                "workflow_id",
                "actor_name",
            ),
            event_rows(),
        )
        say(f"events: {volume.events:,}")
        _catch_up_sequences(*tables)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    _settle(*tables)
    return volume
