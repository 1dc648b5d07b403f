"""The benchmark suite: every figure beside its own baseline, measured in the same run.

    make bench                                   # about 3 minutes on an idle 2-core machine
    make bench BENCH_ARGS="--full"               # + the 1M tier, 10k deliveries and 10k renders (~25 min)
    make bench BENCH_ARGS="--breach-review 1000000"  # the breach review, empty vs 1M checkpoints (~12 min)
    make bench BENCH_ARGS="--tpm-pages 1000000"  # the TPM pages: empty vs 1M workflows, daily rollups
    .venv/bin/python scripts/bench.py --only ingest,queue

Needs PostgreSQL (DATABASE_URL: the server to use; the suite creates and drops its own
``<name>_bench`` database there) and Redis (CELERY_BROKER_URL; the suite uses its database
number + 10, and CACHE_URL's number + 10 for the cache). Without PostgreSQL it runs the queue
figures only, on a throwaway SQLite file.

Each line: what, the figure, its baseline, the ratio and the target. Never a pass/fail
timing in the test suite: the machines are shared, so absolute figures are noisy and the
ratio of two things measured side by side is what counts. What each figure means:

  ingest 1 step/request, N clients   steps/s through gunicorn (console/gunicorn.py: 3 workers x 4
                                     threads, keep-alive) with N keep-alive clients, each posting ~250 B
                                     steps to its own workflow, vs the same rows inserted by psycopg with a
                                     commit per row by N connections.                      target >= 25 %
  ingest batched                     steps/s through POST /steps/batch (500 per request) vs psycopg
                                     executemany and COPY of the same rows, 500 per commit. target >= 50 %
                                     of executemany
  LangGraph PostgresSaver, N         the console's HTTP path vs langgraph-checkpoint-postgres saving the
                                     same state per step in-process at the same concurrency (ratio > 1:
                                     the console is faster)
  approve -> delivery p50/p95        decision committed -> the agent endpoint receives the signed POST
                                     (relay woken by NOTIFY, Celery worker, Redis) vs a bare Celery task
                                     that POSTs to the same endpoint through the same Redis.  target p95 <= 1.5x
  SLA sweep                          one sweep with 1,000 due among the largest tier vs among 10k. <= 1.5x
  queue / workbench                  first queue page (50 rows) at the largest tier vs a trivial
                                     authenticated view in the same process (<= 3x, constant queries);
                                     the workbench of a 1,000-step workflow (<= 5x)
  memory                             worker RSS after all deliveries vs after the first tenth (<= 1.10x);
                                     web (in-process) RSS after N queue renders vs after N/10 (flat)
  scaling                            the same figures at 1k, 10k, 100k (and 1M with --full) rows, as a
                                     table and as docs/bench-scaling.svg
  breach review (--breach-review N)  the TPM breach review (cards, charts, first table page, a filter, the
                                     second page by its cursor) over an empty table vs N checkpoints of a
                                     year's history (generate_breach_history, COPY, seed printed), in one
                                     process, medians; the query count beside each ratio
  TPM pages (--tpm-pages N)          the resume dashboard, a drill-down, readiness, the staffing budget
                                     and the breach review over an empty database vs N generated workflows
                                     (COPY, seed printed), after rollups.rebuild() rolled them up as
                                     `manage.py rebuild_rollups` does: median of the rounds, ratio and
                                     SQL queries side by side
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from tests.stack import Receiver as RecordingReceiver  # noqa: E402 - the suite's resume endpoint

SEED = 2026
RESULTS: list[dict] = []  # every printed line, for docs/BENCHMARKS.md and the chart


# --- output --------------------------------------------------------------------------

def line(name: str, figure: float, baseline: float, unit: str, *, target: str = "", holds: bool | None = None,
         ratio: float | None = None, note: str = "") -> None:
    ratio = figure / baseline if ratio is None and baseline else ratio
    verdict = "" if holds is None else ("held" if holds else "MISSED")
    RESULTS.append({"name": name, "figure": figure, "baseline": baseline, "unit": unit, "ratio": ratio,
                    "target": target, "verdict": verdict, "note": note})
    ratio_text = f"{ratio:7.2f}x" if ratio is not None else "       "
    print(f"{name:<44} {figure:>10.1f} {baseline:>10.1f} {unit:<9} {ratio_text}  {target:<16} {verdict:<6} {note}",
          flush=True)


def header(title: str) -> None:
    print(f"\n== {title}\n{'what':<44} {'figure':>10} {'baseline':>10} {'unit':<9} {'ratio':>8}  "
          f"{'target':<16} {'':<6} note", flush=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


# --- environment ---------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_url(url: str, offset: int = 10) -> str:
    parsed = urlparse(url)
    db = int(parsed.path.strip("/") or 0)
    return urlunparse(parsed._replace(path=f"/{(db + offset) % 16}"))


def recreate_database(server_url: str) -> str:
    import psycopg

    parsed = urlparse(server_url)
    name = f"{parsed.path.strip('/')}_bench"
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def libpq(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


class Procs:
    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.procs = env, []

    def start(self, argv: list[str], ready: Callable[[], bool], what: str, timeout: float = 90) -> subprocess.Popen:
        log = tempfile.NamedTemporaryFile(prefix="rc-bench-", suffix=".log", delete=False)  # noqa: SIM115
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(0.2)
        proc.log = log.name
        return proc

    def stop(self, since: int = 0) -> None:
        """Stop the processes started from the ``since``-th on (all by default), newest first."""
        for proc in reversed(self.procs[since:]):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


def answers(port: int, path: str = "/healthz") -> Callable[[], bool]:
    def check() -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            return conn.getresponse().status < 500
        except OSError:
            return False
    return check


def cpu_of(pid: int) -> float:
    """CPU seconds used so far by a process and its children (gunicorn's workers)."""
    import psutil

    total = 0.0
    proc = psutil.Process(pid)
    for p in [proc, *proc.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def rss_of(pid: int, *, children: bool = True) -> int:
    import psutil

    proc = psutil.Process(pid)
    procs = [proc, *proc.children(recursive=True)] if children else [proc]
    return sum(p.memory_info().rss for p in procs)


# --- the rows: the same ~250 B steps for the console, psycopg and LangGraph -----------

def step_report(rng: random.Random, wf: int, seq: int) -> dict:
    from workflows.volume import step_payload

    data_in, data_out = step_payload(rng, wf, seq)
    return {"seq": seq, "name": "lookup_order", "kind": "tool", "status": "committed",
            "input": json.loads(data_in), "output": json.loads(data_out), "verified": True}


STEP_COLUMNS = ("workflow_id", "seq", "name", "kind", "status", "input", "output", "verified", "promise",
                "idempotency_key", "external_ref", "created_at", "updated_at", "attempts", "history")
INSERT_STEP = (f"INSERT INTO workflows_step ({', '.join(STEP_COLUMNS)}) "  # noqa: S608 - constant
               f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now(), now(), 1, '[]')")


def step_row(workflow_id: int, report: dict) -> tuple:
    from psycopg.types.json import Jsonb

    return (workflow_id, report["seq"], report["name"], report["kind"], report["status"], Jsonb(report["input"]),
            Jsonb(report["output"]), report["verified"], None, None, None)


# --- workers of the ingest comparisons (separate processes: no GIL shared with the server) --

def made_reports(seed: int, wf: int, count: int = 500) -> list[dict]:
    rng = random.Random(seed)
    return [step_report(rng, wf, seq) for seq in range(1, count + 1)]


def timed(prepare: Callable[[], Callable[[int], None]], seconds: float, barrier, results, index: int) -> None:
    """Prepare, wait for every other client, then call ``step(k)`` for k = 1, 2, … until ``seconds`` pass."""
    step = prepare()
    barrier.wait()
    deadline, done = time.perf_counter() + seconds, 0
    while time.perf_counter() < deadline:
        done += 1
        step(done)
    results[index] = done


def http_client(port: int, token: str, workflow_id: int, seed: int) -> Callable[[int], None]:
    """Single steps over one keep-alive connection; each a ~250 B report with the next seq."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = [json.dumps({**r, "seq": 0}).replace('"seq": 0', '"seq": {}', 1) for r in made_reports(seed, workflow_id)]

    def step(k: int) -> None:
        body = bodies[k % len(bodies)].replace('"seq": {}', f'"seq": {k}', 1).encode()
        conn.request("POST", f"/api/v1/workflows/{workflow_id}/steps", body, headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise RuntimeError(f"step answered {response.status}: {response.read()[:200]!r}")
    return step


def psycopg_rows(dsn: str, workflow_id: int, seed: int) -> Callable[[int], None]:
    """The same rows inserted with a commit per row."""
    import psycopg

    conn = psycopg.connect(dsn)
    rows = [step_row(workflow_id, r) for r in made_reports(seed, workflow_id)]

    def step(k: int) -> None:
        row = rows[k % len(rows)]
        conn.execute(INSERT_STEP, (row[0], k, *row[2:]))
        conn.commit()
    return step


def langgraph_saves(dsn: str, thread: str, seed: int) -> Callable[[int], None]:
    """LangGraph's PostgresSaver saving the same state, one checkpoint per step."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver

    context = PostgresSaver.from_conn_string(dsn)  # kept referenced: its exit closes the connection
    saver = context.__enter__()
    reports = made_reports(seed, 1)
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    def step(k: int) -> None:
        nonlocal config
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": {**reports[k % len(reports)], "seq": k}}
        checkpoint["channel_versions"] = {"step": k}
        config = saver.put(config, checkpoint, {"source": "loop", "step": k, "parents": {}}, {"step": k})
    step.context = context
    return step


def run_clients(make: Callable, jobs: list[tuple], seconds: float) -> float:
    """Every job in its own process (no GIL shared with anything), started together; steps per second."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(len(jobs)), ctx.Array("l", len(jobs))
    procs = [ctx.Process(target=timed, args=(lambda job=job: make(*job), seconds, barrier, results, i))
             for i, job in enumerate(jobs)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode:
            raise RuntimeError(f"a benchmark client failed (exit {proc.exitcode})")
    return sum(results) / seconds


def http_batches(port: int, token: str, workflow_id: int, reports: list[dict], size: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for i in range(0, len(reports), size):
        conn.request("POST", f"/api/v1/workflows/{workflow_id}/steps/batch",
                     json.dumps({"steps": reports[i:i + size]}).encode(), headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 201:
            raise RuntimeError(f"batch answered {response.status}: {body[:300]!r}")


# --- sections --------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace, db_url: str, env: dict[str, str]) -> None:
        self.args, self.db_url, self.env = args, db_url, env
        self.rng = random.Random(SEED)
        self.procs = Procs(env)
        self.web_port = 0

    # -- helpers
    def agent(self, name: str, **kwargs):
        from workflows.models import Agent

        return Agent.register(f"{name}-{self.rng.getrandbits(32):08x}", **kwargs)

    def workflow(self, agent, label: str):
        from workflows.models import Workflow

        return Workflow.objects.create(agent=agent, external_id=f"{label}-{self.rng.getrandbits(48):012x}",
                                       kind="refund", title=f"bench {label}")

    def reports(self, wf: int, n: int, first: int = 1) -> list[dict]:
        return [step_report(self.rng, wf, seq) for seq in range(first, first + n)]

    def start_web(self) -> None:
        from django.db import connection

        connection.close()
        self.web_port = free_port()
        env = {**self.env, "GUNICORN_BIND": f"127.0.0.1:{self.web_port}", "GUNICORN_ACCESS_LOG": ""}
        self.procs.env = env
        self.web = self.procs.start([str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "console.wsgi"],
                                    answers(self.web_port), "gunicorn")
        self.procs.env = self.env

    # -- ingest, one step per request
    def ingest(self) -> None:
        from django.db import connection

        header("ingest, one step per request: console (gunicorn) vs psycopg commit per row")
        seconds = self.args.seconds
        for n in (1, 2, 4, 8):
            http_jobs, raw_jobs = [], []
            for i in range(n):
                agent, token = self.agent(f"ingest{n}-{i}")
                http_jobs.append((self.web_port, token, self.workflow(agent, "http").pk, SEED + i))
                raw_jobs.append((libpq(self.db_url), self.workflow(agent, "raw").pk, SEED + i))
            connection.close()
            cpu = cpu_of(self.web.pid)
            console = run_clients(http_client, http_jobs, seconds)
            cpu_ms = (cpu_of(self.web.pid) - cpu) * 1000 / max(1.0, console * seconds)
            raw = run_clients(psycopg_rows, raw_jobs, seconds)
            self.single[n] = console
            line(f"ingest 1 step/request, {n} client(s)", console, raw, "steps/s", target=">= 25 %",
                 holds=console / raw >= 0.25, note=f"{console / raw:.0%} of psycopg; web CPU {cpu_ms:.1f} ms/step")

    def langgraph(self) -> None:
        header("a peer on the same work: LangGraph PostgresSaver (in-process, one checkpoint per step)")
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            print("langgraph-checkpoint-postgres is not installed (make install): skipped")
            return
        with PostgresSaver.from_conn_string(libpq(self.db_url)) as saver:
            saver.setup()
        for n in (1, 2, 4, 8):
            jobs = [(libpq(self.db_url), f"bench-{n}-{i}-{self.rng.getrandbits(32)}", SEED + i) for i in range(n)]
            peer = run_clients(langgraph_saves, jobs, self.args.seconds)
            console = self.single.get(n)
            if console:
                line(f"console vs LangGraph PostgresSaver, {n} client(s)", console, peer, "steps/s",
                     target="> 1x (aim)", holds=console > peer)
            else:
                print(f"LangGraph PostgresSaver, {n} client(s): {peer:.1f} steps/s (run ingest for the ratio)")

    # -- ingest, batched
    def batched(self) -> None:
        import psycopg
        from django.db import connection

        header("ingest, batched (500 steps per request / per commit)")
        n, size = self.args.batch_rows, 500
        agent, token = self.agent("batch")
        wf = self.workflow(agent, "batch").pk
        reports = self.reports(wf, n)
        connection.close()
        cpu, t = cpu_of(self.web.pid), time.perf_counter()
        http_batches(self.web_port, token, wf, reports, size)  # the server's CPU is not this process's
        console = n / (time.perf_counter() - t)
        cpu_ms = (cpu_of(self.web.pid) - cpu) * 1000 / n
        rows = [step_row(self.workflow(agent, "em").pk, r) for r in reports]
        copy_wf = self.workflow(agent, "copy").pk
        connection.close()
        with psycopg.connect(libpq(self.db_url)) as conn:
            t = time.perf_counter()
            for i in range(0, n, size):
                with conn.cursor() as cur:
                    cur.executemany(INSERT_STEP, rows[i:i + size])
                conn.commit()
            many = n / (time.perf_counter() - t)
            t = time.perf_counter()
            for i in range(0, n, size):
                with conn.cursor() as cur, cur.copy(
                        f"COPY workflows_step ({', '.join(STEP_COLUMNS)}) FROM STDIN") as copy:
                    for row in rows[i:i + size]:
                        copy.write_row((copy_wf, *row[1:], "now", "now", 1, "[]"))
                conn.commit()
            copied = n / (time.perf_counter() - t)
        line("ingest batched vs executemany", console, many, "steps/s", target=">= 50 %",
             holds=console / many >= 0.5, note=f"{console / many:.0%} of executemany; web CPU {cpu_ms:.2f} ms/step")
        line("ingest batched vs COPY", console, copied, "steps/s", note=f"{console / copied:.0%} of COPY")

    # -- approve -> delivery
    def delivery(self) -> None:
        from django.contrib.auth import get_user_model

        from workflows.models import Checkpoint, Decision

        header("approve -> delivery (relay woken by NOTIFY, Celery worker over Redis) vs bare Celery task")
        n = self.args.deliveries
        section_procs = len(self.procs.procs)
        receiver = Receiver()
        worker_env = {**self.env, "PYTHONPATH": str(ROOT / "scripts"), "CELERY_QUEUE": "bench"}
        self.procs.env = worker_env
        ready = ReadyFile()
        worker = self.procs.start([str(BIN / "celery"), "-A", "console", "worker", "-P", "prefork", "-c", "2",
                                   "-Q", "bench", "-I", "bench_tasks", "--without-gossip", "--without-mingle",
                                   "--without-heartbeat", "--loglevel=WARNING", "-n", f"bench-{os.getpid()}@%h"],
                                  ready.exists_after(worker_env), "celery worker")
        self.procs.start([str(BIN / "python"), "manage.py", "run_relay", "--interval", "5"],
                         lambda: True, "relay")
        self.procs.env = self.env
        time.sleep(2)
        from celery import current_app

        # Baseline: a task that POSTs to the same endpoint, through the same Redis and worker.
        bare = []
        for i in range(max(100, n // 4)):
            key = f"bare-{i}"
            t = time.time()
            current_app.send_task("bench_tasks.post", (receiver.url, key), queue="bench")
            bare.append(receiver.wait(key) - t)
        operator, _ = get_user_model().objects.get_or_create(username="bench-operator")
        agent, _ = self.agent("delivery", resume_url=receiver.url, allow_plain_http=True)
        latencies, rss = [], {}
        for i in range(n):
            checkpoint = Checkpoint.open_for(self.workflow(agent, "deliver"), reason="model_timeout")
            decision = checkpoint.decide(by=operator, action="abort", instructions="bench")
            t = time.time()  # decide() returned: the decision is committed
            latencies.append(receiver.wait(str(decision.delivery_id)) - t)
            if i + 1 in (n // 10, n):
                time.sleep(0.5)  # let the worker finish marking it delivered
                rss[i + 1] = rss_of(worker.pid)
        bare_ms = [x * 1000 for x in bare]
        ms = [x * 1000 for x in latencies]
        line("approve -> delivery p50", statistics.median(ms), statistics.median(bare_ms), "ms")
        line("approve -> delivery p95", pct(ms, 0.95), pct(bare_ms, 0.95), "ms", target="<= 1.5x",
             holds=pct(ms, 0.95) <= 1.5 * pct(bare_ms, 0.95), note=f"{n} decisions, {len(bare)} bare tasks")
        first, last = rss[n // 10], rss[n]
        line(f"worker RSS after {n:,} vs {n // 10:,} deliveries", last / 2**20, first / 2**20, "MiB",
             target="<= 1.10x", holds=last <= 1.10 * first)
        # The worker and the relay go with the section: a delivery still being recorded would write its
        # events under the ids the next section's COPY has taken.
        deadline = time.monotonic() + 60
        finished = [Decision.Status.SUCCEEDED, Decision.Status.FAILED]
        while Decision.objects.exclude(status__in=finished).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.procs.stop(since=section_procs)
        receiver.close()

    # -- tiers: queue, sweep, ingest against growing history
    def tiers(self) -> None:
        from django.db import transaction

        from workflows.volume import generate

        header("scaling: the same figures at growing volumes (rows per table)")
        sizes = [int(size) for size in self.args.tiers.split(",")] + ([1_000_000] if self.args.full else [])
        have = {"wf": 0, "open": 0, "steps": 0, "other": 0}
        client = self.operator_client()
        self.curve = []
        for size in sizes:
            t = time.perf_counter()
            generate(agents=20, workflows=size + 2 * (size // 10) - have["wf"], steps=size - have["steps"],
                     open_checkpoints=size - have["open"], decided=size // 10 - have["other"],
                     resolved=size // 10 - have["other"], seed=SEED + size)
            have = {"wf": size + 2 * (size // 10), "open": size, "steps": size, "other": size // 10}
            loaded = time.perf_counter() - t
            queue = self.page_ms(client, "/?per=50")
            with transaction.atomic():
                sweep = self.sweep_ms(due=self.args.due)
                transaction.set_rollback(True)
            point = {"size": size, "queue_ms": queue, "sweep_ms": sweep, "load_s": loaded}
            self.curve.append(point)
            print(f"{size:>9,} rows: queue first page {queue:6.1f} ms · SLA sweep of {self.args.due:,} due {sweep:7.1f} ms "
                  f"· loaded in {loaded:5.1f}s", flush=True)
        base = next(p for p in self.curve if p["size"] == 10_000)
        top = self.curve[-1]
        line(f"SLA sweep, {self.args.due:,} due among {top['size']:,} vs 10k", top["sweep_ms"], base["sweep_ms"], "ms",
             target="<= 1.5x", holds=top["sweep_ms"] <= 1.5 * base["sweep_ms"],
             note="" if top["size"] >= 1_000_000 else "the 1M tier runs with --full or --tiers")

    def sweep_ms(self, due: int) -> float:
        from django.db import connection
        from django.utils import timezone

        from workflows.tasks import record_sla

        now = timezone.now()
        # The generated history holds checkpoints already past due that no sweep has seen (5,628 of them at
        # the 1M tier): a first sweep records those, untimed, so the timed one meets exactly ``due`` rows.
        record_sla(now)
        with connection.cursor() as cursor:
            cursor.execute("""UPDATE workflows_checkpoint SET due_at = %s, warn_at = %s, breached_at = NULL,
                              warned_at = NULL WHERE id IN (SELECT id FROM workflows_checkpoint
                              WHERE status IN ('open', 'claimed') ORDER BY id DESC LIMIT %s)""",
                           [now - timedelta(seconds=30), now - timedelta(seconds=60), due])
        t = time.perf_counter()
        warned, breached = record_sla(now)
        elapsed = (time.perf_counter() - t) * 1000
        if breached != due:
            raise RuntimeError(f"the sweep recorded {breached} breaches of {due} due")
        return elapsed

    # -- queue and workbench vs a trivial authenticated view
    def operator_client(self):
        from django.contrib.auth import get_user_model
        from django.test import Client

        from console.roles import OPERATOR, set_role

        user, _ = get_user_model().objects.get_or_create(username="bench-reader")
        set_role(user, OPERATOR)
        client = Client()
        client.force_login(user)
        return client

    def page_ms(self, client, url: str, rounds: int | None = None) -> float:
        times = []
        for _ in range(rounds or self.args.rounds):
            t = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")
        return statistics.median(times)

    def pages(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from workflows.models import Checkpoint, Event, Step

        header("queue and workbench vs a trivial authenticated view, same process")
        client = self.operator_client()
        open_now = Checkpoint.objects.open().count()
        # The workbench of a 1,000-step workflow.
        checkpoint = Checkpoint.objects.open().select_related("workflow").order_by("-pk").first()
        agent = checkpoint.workflow.agent
        Step.objects.filter(workflow=checkpoint.workflow).delete()
        Step.objects.bulk_create([Step(workflow=checkpoint.workflow, **step_report(self.rng, 1, seq))
                                  for seq in range(1, 1001)])
        Event.objects.bulk_create([Event(workflow=checkpoint.workflow, actor_type="agent", actor_agent=agent,
                                         verb="step_committed", data={"seq": s}) for s in range(1, 1001)])
        urls = {"trivial": "/bench/trivial", "queue": "/?per=50", "workbench": f"/checkpoints/{checkpoint.pk}/"}
        medians = {k: [] for k in urls}
        for _ in range(self.args.rounds):  # interleaved: both sides see the same machine
            for key, url in urls.items():
                medians[key].append(self.page_ms(client, url, rounds=1))
        med = {k: statistics.median(v) for k, v in medians.items()}
        queries = {}
        for key, url in urls.items():
            with CaptureQueriesContext(connection) as ctx:
                client.get(url)
            queries[key] = len(ctx.captured_queries)
        small = self.page_ms(client, "/?per=25")
        line(f"queue first page at {open_now:,} open vs trivial", med["queue"], med["trivial"], "ms",
             target="<= 3x", holds=med["queue"] <= 3 * med["trivial"],
             note=f"{queries['queue']} vs {queries['trivial']} queries")
        line("workbench, 1,000 steps vs trivial", med["workbench"], med["trivial"], "ms", target="<= 5x",
             holds=med["workbench"] <= 5 * med["trivial"], note=f"{queries['workbench']} queries")
        # The queue figures this suite started with.
        near_end = Checkpoint.objects.open().order_by("-due_at", "-pk")[60]
        from console.views import _cursor

        deep = self.page_ms(client, f"/?per=50&after={_cursor(near_end)}")
        big = self.page_ms(client, "/?per=200")
        line("queue deep page vs first page", deep, med["queue"], "ms")
        line("queue page size 200 vs 25", big, small, "ms", note="8x the rows")
        first = self.curve[0]["queue_ms"] if getattr(self, "curve", None) else None
        if first:
            line(f"queue first page, {open_now:,} vs 1k open", self.curve[-1]["queue_ms"], first, "ms")
        tracemalloc.start()
        client.get("/?per=50")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"peak Python memory of one queue request: {peak / 1024:.0f} KiB", flush=True)

    def web_memory(self) -> None:
        import psutil

        header("web memory over many queue renders (in-process, the code a web worker runs)")
        client = self.operator_client()
        n = self.args.renders
        me = psutil.Process()
        for i in range(1, n + 1):
            client.get("/?per=50")
            if i == n // 10:
                first = me.memory_info().rss
        last = me.memory_info().rss
        line(f"web RSS after {n:,} vs {n // 10:,} queue renders", last / 2**20, first / 2**20, "MiB",
             target="<= 1.10x (flat)", holds=last <= 1.10 * first)

    def chart(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        if not getattr(self, "curve", None):
            return
        sizes = [p["size"] for p in self.curve]
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(sizes, [p["queue_ms"] for p in self.curve], marker="o", label="queue first page (ms)")
        ax.plot(sizes, [p["sweep_ms"] for p in self.curve], marker="s", label=f"SLA sweep, {self.args.due:,} due (ms)")
        ax.set_xscale("log")
        ax.set_xlabel("rows per table (open checkpoints, steps)")
        ax.set_ylabel("ms (median)")
        ax.set_ylim(bottom=0)
        ax.set_title("Cost follows the work, not the history")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        out = ROOT / "docs" / "bench-scaling.svg"
        fig.savefig(out, metadata={"Date": None})
        print(f"\nchart: {out.relative_to(ROOT)}")


class ReadyFile:
    """The worker is ready when it answers a ping through the broker."""

    def exists_after(self, env: dict[str, str]) -> Callable[[], bool]:
        def ready() -> bool:
            from celery import current_app

            try:
                return bool(current_app.control.ping(timeout=0.5))
            except Exception:
                return False
        return ready


class Receiver(RecordingReceiver):
    """The agent's resume endpoint (the suite's), timing each arrival: a delivery by its id, a bare task by
    the key in its body."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, float] = {}
        self.cond = threading.Condition()
        self.respond = self.arrive

    def arrive(self, record: dict) -> int:
        with self.cond:
            self.arrived[record["delivery"] or record["body"]["key"]] = time.time()
            self.cond.notify_all()
        return 200

    def wait(self, key: str, timeout: float = 60) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.arrived, timeout):
                raise RuntimeError(f"{key} was never delivered")
            return self.arrived[key]


# --- a trivial authenticated view, the baseline of the page figures --------------------

def install_trivial_view() -> None:
    from django.contrib.auth.decorators import login_required
    from django.http import HttpResponse
    from django.urls import clear_url_caches, path

    import console.urls

    @login_required
    def trivial(request):
        return HttpResponse(f"hello {request.user.get_username()}")

    console.urls.urlpatterns.insert(0, path("bench/trivial", trivial))
    clear_url_caches()


TPM_PAGES = {"resume dashboard": "/resumes/", "drill-down (degraded)": "/resumes/workflows/?figure=degraded",
             "readiness": "/readiness/", "staffing budget": "/staffing/", "breach review": "/breaches/"}


def time_page(client: Any, url: str, rounds: int) -> dict:
    """The median of ``rounds`` renders of ``url`` in this process, and the SQL queries of one more."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        assert client.get(url).status_code == 200, url
        times.append(time.perf_counter() - t)
    with CaptureQueriesContext(connection) as ctx:
        client.get(url)
    return {"median": statistics.median(times), "queries": len(ctx.captured_queries)}


def tpm_pages(workflows: int, rounds: int) -> None:
    """The TPM pages over an empty database, then over ``workflows`` generated workflows: ratios."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.roles import TPM, set_role
    from workflows.volume import generate

    user = get_user_model().objects.create_user("bench-tpm", password="x" * 16)
    set_role(user, TPM)
    client = Client()
    client.force_login(user)

    def measure(url: str, n: int) -> dict:
        return time_page(client, url, n)

    empty = {name: measure(url, rounds) for name, url in TPM_PAGES.items()}
    t = time.perf_counter()
    scale = workflows / 1_000_000
    volume = generate(workflows=workflows, steps=workflows, open_checkpoints=int(100_000 * scale),
                      decided=int(10_000 * scale), resolved=int(300_000 * scale), seed=2026,
                      progress=lambda m: print(f"  {m}", flush=True))
    print(f"loaded {volume.rows:,} rows for {workflows:,} workflows in {time.perf_counter() - t:.0f}s")
    # The rollups the dashboard and readiness read, built by the real code (what beat and rebuild_rollups run).
    from django.utils import timezone

    from workflows import rollups
    from workflows.models import DailyRollup

    t = time.perf_counter()
    covered = rollups.rebuild()
    print(f"rolled {covered[0]} .. {covered[1]} into {DailyRollup.objects.count():,} rollup rows in "
          f"{time.perf_counter() - t:.0f}s (rollups.rebuild, as manage.py rebuild_rollups)")
    today = timezone.now().date()
    live = rollups.live_days(today - timedelta(days=27), today)
    print(f"days of the default 28-day period computed live (touched since the roll): {len(live)}")
    full = {name: measure(url, max(3, rounds // 3)) for name, url in TPM_PAGES.items()}
    print(f"\n{'page':<26} {'ratio':>8}   median empty -> {workflows:,}   SQL queries")
    for name in TPM_PAGES:
        a, b = empty[name], full[name]
        print(f"{name:<26} {b['median'] / a['median']:>7.1f}x   {a['median'] * 1000:7.0f} ms -> "
              f"{b['median'] * 1000:7.0f} ms   {a['queries']} -> {b['queries']}")
        RESULTS.append({"name": f"tpm page: {name}", "figure": b["median"] * 1000, "baseline": a["median"] * 1000,
                        "unit": "ms", "ratio": b["median"] / a["median"], "queries": [a["queries"], b["queries"]]})


def breach_review(checkpoints: int, days: int, rounds: int) -> None:
    """The breach review over an empty table, then over ``checkpoints`` generated over ``days``: ratios."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.roles import TPM, set_role
    from workflows.models import Checkpoint
    from workflows.volume import generate_breach_history

    user = get_user_model().objects.create_user("bench-tpm-breaches", password="x" * 16)
    set_role(user, TPM)
    client = Client()
    client.force_login(user)
    pages = {"breach review, last 30 days": "/breaches/", "filtered by kind": "/breaches/?kind=refund",
             "last 7 days": "/breaches/?start={week}"}

    def measure(url: str) -> dict:
        client.get(url)  # warm: templates, the session
        return time_page(client, url, rounds)

    from django.utils import timezone

    week = (timezone.now() - timedelta(days=6)).date().isoformat()
    urls = {name: url.format(week=week) for name, url in pages.items()}
    empty = {name: measure(url) for name, url in urls.items()}
    print(f"generating {checkpoints:,} checkpoints over {days} days (seed {SEED})", flush=True)
    t = time.perf_counter()
    volume = generate_breach_history(checkpoints=checkpoints, days=days, seed=SEED,
                                     progress=lambda m: print(f"  {m}", flush=True))
    print(f"loaded {volume.rows:,} rows in {time.perf_counter() - t:.0f}s")
    since = timezone.now() - timedelta(days=30)
    print(f"in the table: {Checkpoint.objects.count():,} checkpoints; opened in the last 30 days: "
          f"{Checkpoint.objects.filter(opened_at__gte=since).count():,}, breached in them: "
          f"{Checkpoint.objects.filter(breached_at__gte=since).count():,}")
    older = urls["breach review, last 30 days"]
    first = client.get(older).content.decode()
    marker = 'data-testid="breach-next"'
    if marker in first:  # the second page: the keyset cursor the page links to
        import html
        import re

        urls["second page (cursor)"] = "/breaches/" + html.unescape(re.search(
            r'href="(\?[^"]*)" ' + marker, first).group(1))
        empty["second page (cursor)"] = empty["breach review, last 30 days"]
    full = {name: measure(url) for name, url in urls.items()}
    header(f"breach review: empty table vs {checkpoints:,} checkpoints (same process, medians of {rounds})")
    for name in urls:
        a, b = empty[name], full[name]
        line(f"{name}", b["median"] * 1000, a["median"] * 1000, "ms",
             note=f"{a['queries']} -> {b['queries']} queries")


SECTIONS = ("ingest", "langgraph", "batched", "delivery", "tiers", "pages", "memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the 1M tier, 10k deliveries and 10k renders")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated: {', '.join(SECTIONS)}")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each ingest run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tiers", default="1000,10000,100000", help="volumes of the scaling figures")
    parser.add_argument("--batch-rows", type=int, default=10_000)
    parser.add_argument("--deliveries", type=int, default=None)
    parser.add_argument("--renders", type=int, default=None)
    parser.add_argument("--due", type=int, default=None, help="checkpoints due in the SLA sweep figure "
                        "(100; 1,000 with --full: the sweep records them one by one)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--tpm-pages", type=int, default=0, metavar="WORKFLOWS",
                        help="measure the TPM pages over an empty database, then over this many generated "
                             "workflows (rolled up by rollups.rebuild) instead: e.g. 1000000")
    parser.add_argument("--breach-review", type=int, default=0, metavar="CHECKPOINTS",
                        help="measure the breach review over an empty table and over this many generated "
                             "checkpoints instead (1000000: about 6 minutes to generate)")
    parser.add_argument("--breach-days", type=int, default=365, help="the history those checkpoints span")
    args = parser.parse_args()
    args.deliveries = args.deliveries or (10_000 if args.full else 1_000)
    args.renders = args.renders or (10_000 if args.full else 200)
    args.due = args.due or (1_000 if args.full else 100)
    only = set(args.only.split(","))
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith(("postgres://", "postgresql://")):
        raise SystemExit("make bench needs PostgreSQL and Redis: set DATABASE_URL=postgres://… (the server; the "
                         "suite uses its own <name>_bench database) and CELERY_BROKER_URL=redis://…")
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    cache = os.environ.get("CACHE_URL", broker)
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers this run started (finally)
    db_url = recreate_database(server)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", "DATABASE_URL": db_url,
           "CELERY_BROKER_URL": redis_url(broker), "CACHE_URL": redis_url(cache, 11),
           "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-secret", "DEBUG": "false",
           "MANIFEST_STATIC": "false", "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver", "LOG_LEVEL": "WARNING",
           "API_RATE_LIMIT_PER_MINUTE": "100000000", "SECURE_COOKIES": "false", "PYTHONUNBUFFERED": "1",
           # The bench's own endpoint on loopback, and its own queue (the approving process sends there too).
           "DELIVERY_ALLOWED_NETWORKS": "127.0.0.0/8", "CELERY_QUEUE": "bench",
           "CELERY_WORKER_ENABLE_REMOTE_CONTROL": "true"}  # ReadyFile pings the workers
    setup_django(env)
    install_trivial_view()
    import django
    import psycopg

    cpu = os.cpu_count()
    print(f"machine: {cpu} cores, load {os.getloadavg()[0]:.1f}; Python {sys.version.split()[0]}, "
          f"Django {django.get_version()}, psycopg {psycopg.__version__}; database {db_url.rsplit('/', 1)[-1]}; "
          f"seed {SEED}")
    if args.tpm_pages:
        tpm_pages(args.tpm_pages, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(RESULTS, indent=1))
        return
    if args.breach_review:
        breach_review(args.breach_review, args.breach_days, args.rounds)
        return
    bench = Bench(args, db_url, env)
    bench.single = {}
    try:
        if only & {"ingest", "batched", "langgraph"}:
            bench.start_web()
        took = {}
        for section in SECTIONS:
            if section in only:
                begun = time.perf_counter()
                getattr(bench, {"memory": "web_memory"}.get(section, section))()
                took[section] = time.perf_counter() - begun
        bench.chart()
        print("\nsections: " + ", ".join(f"{name} {seconds:.0f}s" for name, seconds in took.items()))
    finally:
        bench.procs.stop()
    print(f"\nwhole run: {time.perf_counter() - started:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(RESULTS, indent=1))


if __name__ == "__main__":
    main()
