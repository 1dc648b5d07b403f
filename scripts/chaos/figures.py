"""The run's figures: the resume dashboard's (workflows.metrics), cross-checked against the simulated ledgers."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from .disk import disk_figures
from .operators import Logbook
from .run import TERMINAL
from .stack import Killer
from .world import World


def share(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 100.0


def run_period() -> Any:
    """The whole run as one period of the dashboard: every day a workflow of this fresh database was made."""
    from django.db.models import Min

    from workflows import metrics
    from workflows.models import Workflow

    first = Workflow.objects.aggregate(first=Min("created_at"))["first"]
    today = metrics.Filters.last(1).end
    return metrics.Filters(start=first.date() if first else today, end=today)


def analyse(world: World, record: Logbook, killer: Killer, duration: float, settled_in_time: bool) -> dict:
    """The figures of workflows.metrics (the dashboard's), and a cross-check against the simulated ledgers."""
    from django.db import connection
    from django.db.models import Prefetch
    from django.db.models.functions import Now

    from demo.journal import Journal
    from demo.plans import PLANS
    from demo.systems import Ledgers
    from workflows import metrics, sla_figures
    from workflows.models import Checkpoint, Decision, Step, Workflow

    ledgers = Ledgers(world.var_dir / "demo" / "ledgers.sqlite3")
    journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")
    executions: dict[str, list[str]] = {}
    with ledgers.connect() as conn:
        for key, ref in conn.execute("SELECT idempotency_key, ref FROM executions ORDER BY id"):
            executions.setdefault(key, []).append(ref)
    duplicates = {key: len(refs) for key, refs in executions.items() if len(refs) > 1}

    period = run_period()
    summary = metrics.summary(period)

    def ids(figure: str) -> set[int]:
        return set(metrics.workflows_behind(period, figure).values_list("pk", flat=True))

    resumed = ids("resumed") - ids("ended_by_operator")  # an operator's later handoff or abort is not a resume
    resumed_clean = resumed & ids("resumed_without_data_loss:met")
    other_owner = ids("owner_changed") - ids("handed_off")  # an operator choosing another owner is not a loss

    workflows = list(
        Workflow.objects.select_related("owner", "agent").prefetch_related(
            "steps", Prefetch("checkpoints__decisions", Decision.objects.all())
        )
    )
    known = {(w.agent.name, w.external_id) for w in workflows}
    missing = [
        f"{r['agent']}:{r['external_id']}"
        for r in journal.runs()
        if r["status"] not in ("skipped", "refused") and (r["agent"], r["external_id"]) not in known
    ]
    blank: list[str] = list(missing)
    lost: list[str] = []
    for workflow in workflows:
        checkpoints = list(workflow.checkpoints.all())
        unresolved = [c for c in checkpoints if c.status != "resolved"]
        if workflow.status not in TERMINAL and not (workflow.status == "paused" and unresolved):
            blank.append(f"{workflow.pk} ({workflow.external_id}, {workflow.status})")
        decisions = [d for c in checkpoints for d in c.decisions.all()]
        lost.extend(lost_effects(workflow, list(workflow.steps.all()), decisions, executions, PLANS))
    blank += [f"{pk} (failed while running)" for pk in sorted(ids("blank_failure"))]

    def described(pks: set[int]) -> list[str]:
        return [f"{w.pk} ({w.external_id}, {w.status})" for w in workflows if w.pk in pks]

    all_decisions = list(Decision.objects.select_related("decided_by"))
    recorded = {(d.checkpoint_id, d.decided_by.get_username(), d.action) for d in all_decisions}
    unrecorded = [a for a in record.acknowledged if a not in recorded]
    unfinished = [f"{d.pk} ({d.action}, {d.status})" for d in all_decisions if d.status in ("queued", "running")]
    proposed = [d.pk for d in all_decisions if d.status == "proposed"]
    every_checkpoint = Checkpoint.objects.all()
    preserved = summary["preserved_checkpoint"]
    stored = {(str(w), q): st for w, q, st in Step.objects.values_list("workflow_id", "seq", "status")}
    acknowledged = journal.acknowledged()
    # A report the console answered 2xx for must be there; a committed one must still be committed.
    unstored = [
        f"{w}#{q} {st}"
        for w, q, st in acknowledged
        if (w, q) not in stored or (st == "committed" and stored[(w, q)] != "committed")
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        database_bytes = int(cursor.fetchone()[0])
    ahead = {  # stamps a process clock running ahead would leave in the future of the database's clock
        "checkpoints opened": every_checkpoint.filter(opened_at__gt=Now()).count(),
        "checkpoints warned": every_checkpoint.filter(warned_at__gt=Now()).count(),
        "checkpoints breached": every_checkpoint.filter(breached_at__gt=Now()).count(),
        "decisions finished": Decision.objects.filter(finished_at__gt=Now()).count(),
    }
    return {
        "seed": world.args.seed,
        "duration_seconds": round(duration),
        "settled": settled_in_time,
        "workflows_requested": world.args.workflows,
        "workflows": len(workflows),
        "launched": journal.launched(),
        "workflows_by_status": dict(Counter(w.status for w in workflows)),
        "period": [period.start.isoformat(), period.end.isoformat()],
        # The dashboard's four headline shares for the same period, as part/whole.
        "headline": {slug: [share.part, share.whole] for slug, share in summary.shares.items()},
        "degraded": summary.counts["degraded"],
        "reached_checkpoint": preserved.part,
        "reached_checkpoint_pct": share(preserved.part, preserved.whole),
        "blank_states": blank,
        "resumed": len(resumed),
        "resumed_clean": len(resumed_clean),
        "resumed_clean_pct": share(len(resumed_clean), len(resumed)),
        "resumed_not_clean": described(resumed - resumed_clean),
        "same_owner": len(resumed - other_owner),
        "same_owner_pct": share(len(resumed - other_owner), len(resumed)),
        "other_owner": described(other_owner),
        "duplicate_effect_attempts": summary.counts["duplicate_attempt"],
        "duplicate_keys": duplicates,
        "lost_effects": lost,
        "decisions_acknowledged": len(record.acknowledged),
        "decisions_unrecorded": unrecorded,
        "decisions_unfinished": unfinished,
        "decisions_awaiting_approval": proposed,
        "decisions_lost": len(unrecorded) + len(unfinished),
        "decisions_by_action_state": {
            f"{a}/{s}": n for (a, s), n in sorted(sla_figures.decisions_by_action_and_outcome(period).items())
        },
        "checkpoints": every_checkpoint.count(),
        "checkpoints_by_reason": dict(Counter(every_checkpoint.values_list("reason", flat=True))),
        "checkpoints_opened_by_console": every_checkpoint.filter(opened_by_console=True).count(),
        "effects_executed": sum(len(refs) for refs in executions.values()),
        "kills": {target: killer.kills.get(target, 0) for target in killer.targets},
        "kill_restart_errors": killer.errors,
        "operator": dict(sorted(record.counts.items())),
        "operator_invalid": record.invalid[:20],
        "reports_acknowledged": len(acknowledged),
        "reports_acknowledged_not_stored": unstored,
        "deliveries_acted_on_twice": journal.acted_more_than_once(),
        "stamped_ahead_of_database_clock": {k: v for k, v in ahead.items() if v},
        "leases_longer_than_configured": sorted(record.long_leases),
        "redis_restarts": world.redis.starts - 1 if world.redis else 0,
        "redis_messages_lost": world.redis.lost_messages if world.redis else 0,
        "postgres_outages": getattr(killer.stack.get("postgres"), "outages", 0),
        "postgres_sessions_cut": getattr(killer.stack.get("postgres"), "sessions_cut", 0),
        "network": asdict(world.proxy.counts) if world.proxy else {},
        "disk": disk_figures(world),
        "clock_skew_seconds": world.args.clock_skew,
        "memory": record.memory,
        "exited_by_themselves": record.exits,
        "restarted_by_watchdog": record.watchdog,
        "database_bytes": database_bytes,
        "database_bytes_per_workflow": database_bytes // max(1, len(workflows)),
    }


def lost_effects(
    workflow: Any, steps: list, decisions: list, executions: dict[str, list[str]], plans: dict
) -> list[str]:
    lost = set()
    for step in steps:
        if step.kind == "effect" and step.status == "committed":
            refs = executions.get(step.idempotency_key, [])
            if not refs or (step.external_ref and step.external_ref not in refs):
                lost.add(step.idempotency_key)
    for decision in decisions:
        for key, verdict in (decision.confirmations or {}).items():
            if verdict == "happened" and not executions.get(key):
                lost.add(key)
    if workflow.status == "completed":
        for spec in plans.get(workflow.kind, ()):
            key = f"{workflow.external_id}:{spec.key}"
            if spec.kind == "effect" and not executions.get(key):
                lost.add(key)
    return sorted(lost)
