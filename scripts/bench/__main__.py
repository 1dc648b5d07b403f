"""python -m scripts.bench: the options, the environment, then each section asked for."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import scripts.bench

from .capacity import capacity
from .context import Bench
from .delivery import delivery
from .environment import install_trivial_view, recreate_database, redis_url, setup_django
from .incidents import incidents
from .ingest import batched, ingest, langgraph
from .output import RESULTS, SEED
from .pages import pages, web_memory
from .tiers import chart, tiers
from .tpm import breach_review, tpm_pages

SECTIONS: dict[str, Callable[[Bench], None]] = {
    "ingest": ingest,
    "langgraph": langgraph,
    "batched": batched,
    "delivery": delivery,
    "tiers": tiers,
    "pages": pages,
    "memory": web_memory,
    "incidents": incidents,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.bench",
        description=scripts.bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--full", action="store_true", help="the 1M tier, 10k deliveries and 10k renders")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated: {', '.join(SECTIONS)}")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each ingest run")
    parser.add_argument("--clients", default="1,2,4,8", help="client counts of the ingest and LangGraph lines")
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout of the console (e.g. `git worktree add "
        "/tmp/before main`): its step report measured beside this one's, in the same run",
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tiers", default="1000,10000,100000", help="volumes of the scaling figures")
    parser.add_argument("--batch-rows", type=int, default=10_000)
    parser.add_argument("--deliveries", type=int, default=None)
    parser.add_argument("--renders", type=int, default=None)
    parser.add_argument(
        "--due",
        type=int,
        default=None,
        help="checkpoints due in the SLA sweep figure (100; 1,000 with --full: the sweep records them one by one)",
    )
    parser.add_argument(
        "--incident-members",
        type=int,
        default=10_000,
        help="members of the incidents section's incident (its page and its rollout)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--tpm-pages",
        type=int,
        default=0,
        metavar="WORKFLOWS",
        help="measure the TPM pages over an empty database, then over this many generated "
        "workflows (rolled up by rollups.rebuild) instead: e.g. 1000000",
    )
    parser.add_argument(
        "--breach-review",
        type=int,
        default=0,
        metavar="CHECKPOINTS",
        help="measure the breach review over an empty table and over this many generated "
        "checkpoints instead (1000000: about 6 minutes to generate)",
    )
    parser.add_argument("--breach-days", type=int, default=365, help="the history those checkpoints span")
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="only the capacity figure: simulated operators and agents against gunicorn, doubled "
        "until p95 page > 300 ms or p95 step > 100 ms (make bench BENCH_ARGS=--capacity)",
    )
    parser.add_argument("--capacity-seconds", type=float, default=10.0, help="length of each capacity level")
    parser.add_argument("--capacity-max", type=int, default=512, help="operators at which the capacity run stops")
    parser.add_argument(
        "--capacity-webs",
        type=int,
        default=1,
        help="web servers (gunicorn, console/gunicorn.py) on one database for the capacity run, the clients spread "
        "over them as Docker's DNS spreads connections over --scale web=N",
    )
    args = parser.parse_args()
    args.client_counts = [int(n) for n in args.clients.split(",")]
    args.deliveries = args.deliveries or (10_000 if args.full else 1_000)
    args.renders = args.renders or (10_000 if args.full else 200)
    args.due = args.due or (1_000 if args.full else 100)
    only = set(args.only.split(","))
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith(("postgres://", "postgresql://")):
        raise SystemExit(
            "make bench needs PostgreSQL and Redis: set DATABASE_URL=postgres://… (the server; the "
            "suite uses its own <name>_bench database) and CELERY_BROKER_URL=redis://…"
        )
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    cache = os.environ.get("CACHE_URL", broker)
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers this run started (finally)
    db_url = recreate_database(server)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": db_url,
        "CELERY_BROKER_URL": redis_url(broker),
        "CACHE_URL": redis_url(cache, 11),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-secret",
        "DEBUG": "false",
        "MANIFEST_STATIC": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "LOG_LEVEL": "WARNING",
        "API_RATE_LIMIT_PER_MINUTE": "100000000",
        "SECURE_COOKIES": "false",
        "PYTHONUNBUFFERED": "1",
        # The bench's own endpoint on loopback, and its own queue (the approving process sends there too).
        "DELIVERY_ALLOWED_NETWORKS": "127.0.0.0/8",
        "CELERY_QUEUE": "bench",
        "CELERY_WORKER_ENABLE_REMOTE_CONTROL": "true",
    }  # ReadyFile pings the workers
    setup_django(env)
    install_trivial_view()
    import django
    import psycopg

    cpu = os.cpu_count()
    print(
        f"machine: {cpu} cores, load {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}, "
        f"Django {django.get_version()}, psycopg {psycopg.__version__}; database {db_url.rsplit('/', 1)[-1]}; "
        f"seed {SEED}"
    )
    if args.tpm_pages:
        tpm_pages(args.tpm_pages, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(RESULTS, indent=1))
        return
    if args.breach_review:
        breach_review(args.breach_review, args.breach_days, args.rounds)
        return
    bench = Bench(args, db_url, env)
    if args.capacity:
        try:
            capacity(bench)
        finally:
            bench.procs.stop()
        return
    try:
        if only & {"ingest", "batched", "langgraph"}:
            bench.start_web()
        took = {}
        for section, run in SECTIONS.items():
            if section in only:
                begun = time.perf_counter()
                run(bench)
                took[section] = time.perf_counter() - begun
        chart(bench)
        print("\nsections: " + ", ".join(f"{name} {seconds:.0f}s" for name, seconds in took.items()))
    finally:
        bench.procs.stop()
    print(f"\nwhole run: {time.perf_counter() - started:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(RESULTS, indent=1))


if __name__ == "__main__":
    main()
