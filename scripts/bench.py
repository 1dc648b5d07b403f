"""Queue benchmarks: does the operator queue stay fast and small with 100k open checkpoints?

Prints ratios measured side by side in one run (never absolute pass/fail timings):
  - first page with 100k open checkpoints vs with 1k,
  - a deep page (keyset cursor near the end) vs the first page, at 100k,
  - page size 200 vs 25 (time, and SQL queries, which must not grow),
  - peak Python memory of one queue request at 100k vs 1k.
Runs on a throwaway SQLite file by default, or on DATABASE_URL (PostgreSQL) when set.

    make bench                      # or: .venv/bin/python scripts/bench.py --open 100000

``--tpm-pages N`` measures the TPM pages instead (the resume dashboard, readiness, the staffing
budget): each page over an empty database, then over N workflows loaded with the COPY volume
generator (workflows.volume: steps, checkpoints in every state over 30 days, decisions, events),
and prints the ratios. PostgreSQL only (set DATABASE_URL to an empty database):

    make bench BENCH_ARGS="--tpm-pages 1000000"
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(database_url: str | None) -> None:
    var = tempfile.mkdtemp(prefix="rc-bench-")
    os.environ.update({"DJANGO_SETTINGS_MODULE": "console.settings", "SECRET_KEY": "bench-only", "DEBUG": "false",
                       "VAR_DIR": var, "MANIFEST_STATIC": "false", "ALLOWED_HOSTS": "testserver", "LOG_LEVEL": "WARNING"})
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(upto: int, state: dict) -> None:
    """Grow the queue to ``upto`` open checkpoints with bulk inserts (what the agents would have made)."""
    from django.utils import timezone

    from workflows.models import Agent, Checkpoint, Workflow

    if "agents" not in state:
        state["agents"] = [Agent.register(f"bench-{i}")[0] for i in range(5)]
        state["n"] = 0
    now = timezone.now()
    while state["n"] < upto:
        batch = min(5000, upto - state["n"])
        start = state["n"]
        workflows = Workflow.objects.bulk_create([
            Workflow(agent=state["agents"][i % 5], external_id=f"T-{i}", kind=("refund", "billing", "triage")[i % 3],
                     title=f"Refund for ticket T-{i}", status="paused") for i in range(start, start + batch)])
        Checkpoint.objects.bulk_create([
            Checkpoint(workflow=w, reason=("model_timeout", "tool_error", "rate_limit")[i % 3], detail="bench",
                       resume_state={"committed": [], "pending": None, "last_verified_output": None, "promises": [],
                                     "unknown_effects": [], "state": {}},
                       opened_at=now, due_at=now + timedelta(seconds=(i * 7919) % 86400),
                       warn_at=now + timedelta(seconds=(i * 7919) % 86400 - 600))
            for i, w in zip(range(start, start + batch), workflows, strict=True)])
        state["n"] += batch


def measure(client, url: str, rounds: int) -> dict:
    from django.db import connection

    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - t)
        assert response.status_code == 200, response.status_code
    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(url)
    tracemalloc.start()
    client.get(url)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"median": statistics.median(times), "queries": len(queries), "peak": peak}


def interleaved(client, urls: dict[str, str], rounds: int) -> dict[str, dict]:
    """A/B in alternating rounds, so both sides see the same machine."""
    results = {name: {"times": []} for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            m = measure(client, url, 1)
            results[name]["times"].append(m["median"])
            results[name].update(queries=m["queries"], peak=m["peak"])
    for r in results.values():
        r["median"] = statistics.median(r["times"])
    return results


def last_cursor() -> str:
    from console.views import _cursor
    from workflows.models import Checkpoint

    near_end = Checkpoint.objects.open().order_by("-due_at", "-pk")[60]
    return _cursor(near_end)


TPM_PAGES = {"resume dashboard": "/resumes/", "drill-down (degraded)": "/resumes/workflows/?figure=degraded",
             "readiness": "/readiness/", "staffing budget": "/staffing/"}


def tpm_pages(workflows: int, rounds: int) -> None:
    """The TPM pages over an empty database, then over ``workflows`` generated workflows: ratios."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from console.roles import TPM, set_role
    from workflows.volume import generate

    if connection.vendor != "postgresql":
        raise SystemExit("--tpm-pages loads its volume with COPY: set DATABASE_URL to an empty PostgreSQL database")
    user = get_user_model().objects.create_user("bench-tpm", password="x" * 16)
    set_role(user, TPM)
    client = Client()
    client.force_login(user)
    empty = {name: measure(client, url, rounds) for name, url in TPM_PAGES.items()}
    t = time.perf_counter()
    scale = workflows / 1_000_000
    volume = generate(workflows=workflows, steps=workflows, open_checkpoints=int(100_000 * scale),
                      decided=int(10_000 * scale), resolved=int(300_000 * scale), seed=2026,
                      progress=lambda m: print(f"  {m}", flush=True))
    print(f"loaded {volume.rows:,} rows for {workflows:,} workflows in {time.perf_counter() - t:.0f}s")
    full = {name: measure(client, url, max(3, rounds // 3)) for name, url in TPM_PAGES.items()}
    print(f"\n{'page':<26} {'ratio':>8}   median empty -> {workflows:,}   SQL queries")
    for name in TPM_PAGES:
        a, b = empty[name], full[name]
        print(f"{name:<26} {b['median'] / a['median']:>7.1f}x   {a['median'] * 1000:7.0f} ms -> "
              f"{b['median'] * 1000:7.0f} ms   {a['queries']} -> {b['queries']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--open", type=int, default=100_000, help="open checkpoints in the large queue")
    parser.add_argument("--small", type=int, default=1_000, help="open checkpoints in the small queue")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tpm-pages", type=int, default=0, metavar="WORKFLOWS",
                        help="measure the TPM pages over this many generated workflows instead (PostgreSQL)")
    args = parser.parse_args()
    setup(os.environ.get("DATABASE_URL"))
    if args.tpm_pages:
        tpm_pages(args.tpm_pages, args.rounds)
        return

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from console.roles import OPERATOR, set_role

    user = get_user_model().objects.create_user("bench", password="x" * 16)
    set_role(user, OPERATOR)
    client = Client()
    client.force_login(user)
    print(f"database: {connection.vendor}; rounds: {args.rounds}")

    state: dict = {}
    seed(args.small, state)
    small = measure(client, "/?per=50", args.rounds)
    t = time.perf_counter()
    seed(args.open, state)
    print(f"seeded {args.open:,} open checkpoints in {time.perf_counter() - t:.1f}s")
    with connection.cursor() as cursor:  # what autovacuum (PostgreSQL) or the sweep's PRAGMA optimize (SQLite) do
        cursor.execute("ANALYZE")
    large = measure(client, "/?per=50", args.rounds)
    deep = interleaved(client, {"first": "/?per=50", "deep": f"/?per=50&after={last_cursor()}"}, args.rounds)
    sizes = interleaved(client, {"25": "/?per=25", "200": "/?per=200"}, args.rounds)

    rows = [
        ("first page, 100k vs 1k open", large["median"] / small["median"], f"{large['queries']} vs {small['queries']}"),
        ("deep page vs first page (100k)", deep["deep"]["median"] / deep["first"]["median"],
         f"{deep['deep']['queries']} vs {deep['first']['queries']}"),
        ("page size 200 vs 25 (100k)", sizes["200"]["median"] / sizes["25"]["median"],
         f"{sizes['200']['queries']} vs {sizes['25']['queries']}"),
        ("peak memory per request, 100k vs 1k", large["peak"] / small["peak"],
         f"{large['peak'] / 1024:.0f} KiB vs {small['peak'] / 1024:.0f} KiB"),
    ]
    print(f"\n{'comparison':<40} {'ratio':>7}   SQL queries / detail")
    for name, ratio, detail in rows:
        print(f"{name:<40} {ratio:>6.2f}x   {detail}")
    print(f"\nmedians: 1k first {small['median'] * 1000:.1f} ms · 100k first {large['median'] * 1000:.1f} ms · "
          f"100k deep {deep['deep']['median'] * 1000:.1f} ms · per=200 {sizes['200']['median'] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
