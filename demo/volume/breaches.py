"""``generate_breach_history``: a year of decided checkpoints as the SLA sweep and the operators left them,
for the breach review at a million checkpoints.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from workflows.models import Reason, SLAPolicy
from workflows.models.checkpoint_money import stake_in

from .loading import (
    KINDS,
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
)

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
    say = reporter(progress)

    operators = operators_for_volume()
    agent_ids = agents_for_volume(20, rng, now)
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
            skip_foreign_key_triggers(cursor, say)
        ids = next_ids(*tables)
        wf0, cp0, d0, e0 = (ids[t] for t in tables)
        wf_agent = [agent_ids[i % len(agent_ids)] for i in range(n_workflows)]

        def workflow_rows() -> Iterator[Row]:
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
            workflow_rows(),
        )
        say(f"workflows: {volume.workflows:,}")

        cp_rows: list[Row] = []
        # Their resume state is empty ("{}"): what open_for would keep beside it (Checkpoint.at_stake).
        stake = json.dumps(stake_in({}, kind=""))
        decided: list[tuple[datetime, int | None]] = []  # the first checkpoints' decision times and deciders
        events: list[tuple[datetime, str, int, int, str, int | None]] = []  # at, verb, checkpoint, workflow, actor
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
                    stake,
                )
            )
            if stopped is not None:
                decided.append((stopped, assignee))
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
                "policy_id",
                "claim_warn_at",
                "claim_due_at",
                "claim_breached_at",
                "breach_reason_id",
                "breach_note",
                "first_decision_at",
                "at_stake",
            ),
            iter(cp_rows),
        )
        volume.checkpoints = counts
        say(f"checkpoints: {total:,} ({', '.join(f'{k} {v:,}' for k, v in counts.items())})")

        def decision_rows() -> Iterator[Row]:
            for j, (stopped, assignee) in enumerate(decided):
                yield (
                    d0 + j,
                    rng.choice(("resume", "resume", "handoff", "retry_step", "abort")),
                    "",
                    "{}",
                    "{}",
                    "",
                    stopped,
                    "succeeded",
                    uuid.UUID(int=rng.getrandbits(128)),
                    1,
                    None,
                    None,
                    "",
                    stopped + timedelta(seconds=2),
                    None,
                    cp0 + j,
                    assignee or operators[0],
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
        names = dict(get_user_model().objects.filter(pk__in=operators).values_list("pk", "username"))

        def event_rows() -> Iterator[Row]:
            for k, (at, verb, cp, wf, actor, user) in enumerate(events):
                yield (
                    e0 + k,
                    at,
                    actor,
                    verb,
                    "{}",
                    None,
                    user,
                    cp,
                    None,
                    wf,
                    "" if user is None else names.get(user, ""),
                )

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
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    settle(*tables)
    return volume
