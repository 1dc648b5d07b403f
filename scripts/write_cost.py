"""What a step report writes: PostgreSQL's WAL bytes and index entries per step, one step a request and 500 a batch.

    DATABASE_URL=postgres://…/rc_prof CACHE_URL=redis://…/5 ALLOWED_HOSTS=testserver SECRET_KEY=x \\
        API_RATE_LIMIT_PER_MINUTE=100000000 .venv/bin/python scripts/write_cost.py 2000

Migrates DATABASE_URL, registers an agent and a workflow, warms up, then sends N steps one a request and N in
batches of 500 through Django's handler (in-process: no HTTP), and prints, per step, the WAL the server wrote
(``pg_current_wal_insert_lsn`` before and after; nothing else may write to that server meanwhile) and the index
entries the step and its audit event took (each index of ``workflows_step`` and ``workflows_event`` whose
predicate the new rows satisfy, counted from the rows themselves; the workflow's touch is in the WAL), and how
many of the workflow's touches were HOT updates (an update that changes no indexed column and finds room on its
page writes no index entry; the server's own counters). Unlike a
throughput ratio these do not move with the machine's load: run it on two commits to compare what they write.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable

BATCH = 500


def _wal() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")
        return int(cursor.fetchone()[0])


def _index_entries(table: str, where: str, params: list[int]) -> int:
    """How many entries the rows of ``table`` matching ``where`` hold across its indexes (one per index whose
    predicate the row satisfies, as PostgreSQL wrote them)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_expr(x.indpred, x.indrelid) FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid "
            "WHERE c.relname = %s",
            [table],
        )
        predicates = [p for (p,) in cursor.fetchall()]
        total = 0
        for predicate in predicates:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE ({where}) AND ({predicate or 'true'})", params)  # noqa: S608
            total += cursor.fetchone()[0]
        return total


def _workflow_updates() -> tuple[int, int]:
    """The workflow table's updates so far and how many of them were HOT (no index written), as the server
    counts them: this backend's pending counters are flushed first, then read afresh."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:  # the flush happens when the statement above ends
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'workflows_workflow'")
        updated, hot = cursor.fetchone()
        return int(updated), int(hot)


def main(n: int) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from scripts.profiling import set_up

    rng = set_up()
    from django.test import Client

    from workflows.models import Agent, Workflow

    agent, token = Agent.register(f"cost-{rng.getrandbits(32):08x}")
    client = Client(headers={"Authorization": f"Bearer {token}"})

    def workflow() -> Workflow:
        return Workflow.objects.create(
            agent=agent, external_id=f"cost-{rng.getrandbits(40):x}", kind="refund", title="write cost"
        )

    def post(url: str, body: dict[str, object]) -> None:
        response = client.post(url, json.dumps(body), content_type="application/json")
        if response.status_code not in (200, 201):
            raise SystemExit(f"{url} answered {response.status_code}: {response.content[:300]!r}")

    for label, size in (("one step a request", 1), (f"batches of {BATCH}", BATCH)):
        wf = workflow()
        url = f"/api/v1/workflows/{wf.pk}/steps" + ("/batch" if size > 1 else "")
        warm = _send(post, rng, url, wf.pk, size, first=1, count=size * 2)  # the token cache, the prepared plans
        updates, wal, started = _workflow_updates(), _wal(), time.perf_counter()
        end = _send(post, rng, url, wf.pk, size, first=warm, count=n)
        wal, took = _wal() - wal, time.perf_counter() - started
        after = _workflow_updates()
        touches, hot = after[0] - updates[0], after[1] - updates[1]
        steps = end - warm
        entries = _index_entries("workflows_step", "workflow_id = %s AND seq >= %s", [wf.pk, warm])
        entries += _index_entries(
            "workflows_event", "workflow_id = %s AND verb LIKE 'step_%%' AND (data->>'seq')::int >= %s", [wf.pk, warm]
        )
        print(
            f"{label:>20}: {wal / steps:8.0f} WAL bytes a step, {entries / steps:5.1f} index entries a step "
            f"(the step and its event), {took / steps * 1000:.3f} ms a step in-process, {steps} steps; "
            f"the workflow's touches HOT: {hot} of {touches}"
        )


def _send(
    post: Callable[[str, dict[str, object]], None],
    rng: random.Random,
    url: str,
    workflow: int,
    size: int,
    *,
    first: int,
    count: int,
) -> int:
    """``count`` steps from seq ``first``, ``size`` a request; the next free seq."""
    from scripts.bench.rows import step_report

    seq = first
    for _ in range(count // size):
        steps = [step_report(rng, workflow, s) for s in range(seq, seq + size)]
        post(url, {"steps": steps} if size > 1 else steps[0])
        seq += size
    return seq


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
