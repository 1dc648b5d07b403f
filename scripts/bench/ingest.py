"""Ingest: one step per request and batched, through gunicorn, beside psycopg and LangGraph's PostgresSaver.

The clients run in processes of their own: no GIL shared with the server."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

from .context import Bench
from .environment import cpu_of, libpq
from .output import SEED, header, line
from .rows import INSERT_STEP, STEP_COLUMNS, made_reports, step_row


def timed(prepare: Callable[[], Callable[[int], None]], seconds: float, barrier, results, index: int) -> None:
    """Prepare, wait for every other client, then call ``step(k)`` for k = 1, 2, … until ``seconds`` pass."""
    step = prepare()
    barrier.wait()
    start = time.perf_counter()
    deadline, done = start + seconds, 0
    while time.perf_counter() < deadline:
        done += 1
        step(done)
    flush = getattr(step, "flush", None)
    if flush is not None:  # a buffering client: its last steps count once they reached the console
        flush()
        done = round(done * seconds / (time.perf_counter() - start))
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


def bare_client(port: int, workflow_id: int, seed: int) -> Callable[[int], None]:
    """The same bodies to the bare Django view (bare.py): no token, no middleware, one INSERT."""
    return http_client(port, "", workflow_id, seed)


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
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}  # RunnableConfig, with the extra

    def step(k: int) -> None:
        nonlocal config
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": {**reports[k % len(reports)], "seq": k}}
        checkpoint["channel_versions"] = {"step": k}
        config = saver.put(config, checkpoint, {"source": "loop", "step": k, "parents": {}}, {"step": k})

    step.context = context  # type: ignore[attr-defined]  # the saver's connection lives as long as the step
    return step


def batching_client(port: int, token: str, external_id: str, seed: int) -> Callable[[int], None]:
    """The agent-side client as an agent uses it: ``wf.step(...)`` blocks, model and tool steps alternating,
    buffered by ``recovery_client``'s batching (its defaults) and sent with the batch endpoint."""
    from recovery_client import Batching, RecoveryClient

    client = RecoveryClient(f"http://127.0.0.1:{port}", token, batching=Batching())
    wf = client.workflow(external_id, "refund", "bench: the batching client", finish=False).start()
    reports = made_reports(seed, 1)

    def step(k: int) -> None:
        report = reports[k % len(reports)]
        with wf.step(str(report["name"]), kind="model" if k % 2 else "tool", input=report.get("input")) as scope:
            scope.record(report.get("output"))

    step.flush = wf.flush  # type: ignore[attr-defined]  # the run loop sends what is left at its end
    return step


def run_clients(make: Callable, jobs: list[tuple], seconds: float) -> float:
    """Every job in its own process (no GIL shared with anything), started together; steps per second."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(len(jobs)), ctx.Array("l", len(jobs))
    procs = [
        ctx.Process(target=timed, args=(lambda job=job: make(*job), seconds, barrier, results, i))
        for i, job in enumerate(jobs)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode:
            raise RuntimeError(f"a benchmark client failed (exit {proc.exitcode})")
    return sum(results[:]) / seconds


def http_batches(port: int, token: str, workflow_id: int, reports: list[dict], size: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for i in range(0, len(reports), size):
        conn.request(
            "POST",
            f"/api/v1/workflows/{workflow_id}/steps/batch",
            json.dumps({"steps": reports[i : i + size]}).encode(),
            headers,
        )
        response = conn.getresponse()
        body = response.read()
        if response.status != 201:
            raise RuntimeError(f"batch answered {response.status}: {body[:300]!r}")


def ingest(bench: Bench) -> None:
    from django.db import connection

    header("ingest, one step per request: console (gunicorn) vs the bare Django view and psycopg commit per row")
    seconds = bench.args.seconds
    for n in bench.args.client_counts:
        http_jobs, bare_jobs, raw_jobs, before_jobs = [], [], [], []
        for i in range(n):
            agent, token = bench.agent(f"ingest{n}-{i}")
            http_jobs.append((bench.web_port, token, bench.workflow(agent, "http").pk, SEED + i))
            before_jobs.append((bench.before_port, token, bench.workflow(agent, "before").pk, SEED + i))
            bare_jobs.append((bench.bare_port, bench.workflow(agent, "bare").pk, SEED + i))
            raw_jobs.append((libpq(bench.db_url), bench.workflow(agent, "raw").pk, SEED + i))
        connection.close()
        cpu = cpu_of(bench.web.pid)
        console = run_clients(http_client, http_jobs, seconds)
        cpu_ms = (cpu_of(bench.web.pid) - cpu) * 1000 / max(1.0, console * seconds)
        bare = run_clients(bare_client, bare_jobs, seconds)
        if bench.before_port:
            before = run_clients(http_client, before_jobs, seconds)
            line(
                f"ingest 1 step/request vs before, {n} cl.",
                console,
                before,
                "steps/s",
                note=f"before: {bench.args.before} ({before / bare:.0%} of the bare view)",
            )
        raw = run_clients(psycopg_rows, raw_jobs, seconds)
        bench.single[n] = console
        line(
            f"ingest 1 step/request vs bare view, {n} cl.",
            console,
            bare,
            "steps/s",
            target=">= 67 %",
            holds=console / bare >= 2 / 3,
            note=f"{console / bare:.0%} of the bare Django view (bare.py), which is {bare / raw:.0%} of psycopg",
        )
        line(
            f"ingest 1 step/request, {n} client(s)",
            console,
            raw,
            "steps/s",
            target=">= 25 %",
            holds=console / raw >= 0.25,
            note=f"{console / raw:.0%} of psycopg; web CPU {cpu_ms:.1f} ms/step",
        )


def langgraph(bench: Bench) -> None:
    header("a peer on the same work: LangGraph PostgresSaver (in-process, one checkpoint per step)")
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        print("langgraph-checkpoint-postgres is not installed (make install): skipped")
        return
    with PostgresSaver.from_conn_string(libpq(bench.db_url)) as saver:
        saver.setup()
    for n in bench.args.client_counts:
        jobs = [(libpq(bench.db_url), f"bench-{n}-{i}-{bench.rng.getrandbits(32)}", SEED + i) for i in range(n)]
        peer = run_clients(langgraph_saves, jobs, bench.args.seconds)
        agents = [bench.agent(f"client{n}-{i}") for i in range(n)]
        client_jobs = [
            (bench.web_port, token, f"client-{n}-{i}-{bench.rng.getrandbits(32):08x}", SEED + i)
            for i, (_agent, token) in enumerate(agents)
        ]
        from django.db import connection

        connection.close()
        batching = run_clients(batching_client, client_jobs, bench.args.seconds)
        line(
            f"batching client vs LangGraph PostgresSaver, {n} cl.",
            batching,
            peer,
            "steps/s",
            target="> 1x",
            holds=batching > peer,
            note="recovery_client end to end (wf.step, batches of 50) vs in-process saver",
        )
        console = bench.single.get(n)
        if console:
            line(
                f"console vs LangGraph PostgresSaver, {n} client(s)",
                console,
                peer,
                "steps/s",
                target="> 1x (aim)",
                holds=console > peer,
            )
        else:
            print(f"LangGraph PostgresSaver, {n} client(s): {peer:.1f} steps/s (run ingest for the ratio)")


def batched(bench: Bench) -> None:
    import psycopg
    from django.db import connection

    header("ingest, batched (500 steps per request / per commit)")
    n, size = bench.args.batch_rows, 500
    agent, token = bench.agent("batch")
    wf = bench.workflow(agent, "batch").pk
    reports = bench.reports(wf, n)
    connection.close()
    cpu, t = cpu_of(bench.web.pid), time.perf_counter()
    http_batches(bench.web_port, token, wf, reports, size)  # the server's CPU is not this process's
    console = n / (time.perf_counter() - t)
    cpu_ms = (cpu_of(bench.web.pid) - cpu) * 1000 / n
    rows = [step_row(bench.workflow(agent, "em").pk, r) for r in reports]
    copy_wf = bench.workflow(agent, "copy").pk
    connection.close()
    with psycopg.connect(libpq(bench.db_url)) as conn:
        t = time.perf_counter()
        for i in range(0, n, size):
            with conn.cursor() as cur:
                cur.executemany(INSERT_STEP, rows[i : i + size])
            conn.commit()
        many = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(0, n, size):
            with conn.cursor() as cur, cur.copy(f"COPY workflows_step ({', '.join(STEP_COLUMNS)}) FROM STDIN") as copy:
                for row in rows[i : i + size]:
                    copy.write_row((copy_wf, *row[1:], "now", "now", 1, "[]"))
            conn.commit()
        copied = n / (time.perf_counter() - t)
    line(
        "ingest batched vs executemany",
        console,
        many,
        "steps/s",
        target=">= 50 %",
        holds=console / many >= 0.5,
        note=f"{console / many:.0%} of executemany; web CPU {cpu_ms:.2f} ms/step",
    )
    line("ingest batched vs COPY", console, copied, "steps/s", note=f"{console / copied:.0%} of COPY")
