"""``generate``: workflows as a fleet of support agents leaves them, with their steps, checkpoints in every
state, decisions in every delivery state and the audit events they wrote (see the package's docstring).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from workflows.models import Agent, Reason, SLAPolicy, Step
from workflows.models.checkpoint_money import stake_in

from .loading import (
    KINDS,
    OPEN_STATES,
    STEP_PLAN,
    Row,
    Volume,
    agents_for_volume,
    catch_up_sequences,
    copy_rows,
    next_ids,
    operators_for_volume,
    reporter,
    settle,
    skip_foreign_key_triggers,
    step_payload,
)


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
    say = reporter(progress)

    volume = Volume()
    operators = operators_for_volume()
    agent_ids = agents_for_volume(agents, rng, now)
    volume.agents = agents
    tables = ("workflows_workflow", "workflows_step", "workflows_checkpoint", "workflows_decision", "workflows_event")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")  # a bulk load: one fsync at the end is plenty
            if replica:
                skip_foreign_key_triggers(cursor, say)
        ids = next_ids(*tables)
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
        volume.workflows = copy_rows(
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

        def step_rows() -> Iterator[Row]:
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

        volume.steps = copy_rows(
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
        state = {
            "committed": [],
            "pending": None,
            "last_verified_output": {"ok": True},
            "promises": ["refund within 5 days"],
            "unknown_effects": [],
            "state": {},
        }
        resume = json.dumps(state)
        # What open_for keeps beside it (Checkpoint.at_stake): the blast radius reads it, not the resume state.
        # The kind plays no part in the reading (only the trail's answers do, which its readers ask).
        stake = json.dumps(stake_in(state, kind=""))
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
                    stake,  # last: the decisions below read this row by position
                )
            )
        copy_rows(
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
                "at_stake",
            ),
            iter(cp_rows),
        )
        volume.checkpoints = counts
        say(f"checkpoints: {total:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))})")

        # Decisions: one active per decided checkpoint (queued/running/proposed), one succeeded per resolved.
        d0 = ids["workflows_decision"]

        def decision_rows() -> Iterator[Row]:
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

        volume.decisions = copy_rows(
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

        def event_rows() -> Iterator[Row]:
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

        volume.events = copy_rows(
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
        catch_up_sequences(*tables)
        with connection.cursor() as cursor:  # when called inside a longer transaction (tests)
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    settle(*tables)
    return volume
