"""Approve -> delivery: the relay woken by NOTIFY, a Celery worker over Redis, beside a bare Celery task."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from .context import Bench
from .endpoint import Receiver  # the agent's resume endpoint, a process of its own
from .environment import BIN, ROOT, rss_of
from .output import header, line, pct


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


def delivery(bench: Bench) -> None:
    from django.contrib.auth import get_user_model

    from workflows.models import Checkpoint, Decider, Decision

    header("approve -> delivery (relay woken by NOTIFY, Celery worker over Redis) vs bare Celery task")
    n = bench.args.deliveries
    section_procs = len(bench.procs.procs)
    receiver = Receiver()
    worker_env = {**bench.env, "PYTHONPATH": str(ROOT / "scripts"), "CELERY_QUEUE": "bench"}
    bench.procs.env = worker_env
    ready = ReadyFile()
    worker = bench.procs.start(
        [
            str(BIN / "celery"),
            "-A",
            "console",
            "worker",
            "-P",
            "prefork",
            "-c",
            "2",
            "-Q",
            "bench",
            "-I",
            "bench_tasks",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=WARNING",
            "-n",
            f"bench-{os.getpid()}@%h",
        ],
        ready.exists_after(worker_env),
        "celery worker",
    )
    bench.procs.start([str(BIN / "python"), "manage.py", "run_relay", "--interval", "5"], lambda: True, "relay")
    bench.procs.env = bench.env
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
    agent, _ = bench.agent("delivery", resume_url=receiver.url, allow_plain_http=True)
    latencies, rss = [], {}
    for i in range(n):
        checkpoint = Checkpoint.open_for(bench.workflow(agent, "deliver"), reason="model_timeout")
        decision = Decider(checkpoint).decide(by=operator, action="abort", instructions="bench")
        t = time.time()  # decide() returned: the decision is committed
        latencies.append(receiver.wait(str(decision.delivery_id)) - t)
        if i + 1 in (n // 10, n):
            time.sleep(0.5)  # let the worker finish marking it delivered
            rss[i + 1] = rss_of(worker.pid)
    bare_ms = [x * 1000 for x in bare]
    ms = [x * 1000 for x in latencies]
    line("approve -> delivery p50", statistics.median(ms), statistics.median(bare_ms), "ms")
    line(
        "approve -> delivery p95",
        pct(ms, 0.95),
        pct(bare_ms, 0.95),
        "ms",
        target="<= 1.5x",
        holds=pct(ms, 0.95) <= 1.5 * pct(bare_ms, 0.95),
        note=f"{n} decisions, {len(bare)} bare tasks",
    )
    first, last = rss[n // 10], rss[n]
    line(
        f"worker RSS after {n:,} vs {n // 10:,} deliveries",
        last / 2**20,
        first / 2**20,
        "MiB",
        target="<= 1.10x",
        holds=last <= 1.10 * first,
    )
    # The worker and the relay go with the section: a delivery still being recorded would write its
    # events under the ids the next section's COPY has taken.
    deadline = time.monotonic() + 60
    finished = [Decision.Status.SUCCEEDED, Decision.Status.FAILED]
    while Decision.objects.exclude(status__in=finished).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    bench.procs.stop(since=section_procs)
    receiver.close()
