"""Scaling: the queue page and the SLA sweep at growing volumes, and the chart of them."""

from __future__ import annotations

import time
from datetime import timedelta

from .context import Bench
from .environment import ROOT
from .output import SEED, header, line


def tiers(bench: Bench) -> None:
    from django.db import transaction

    from demo.volume import generate

    header("scaling: the same figures at growing volumes (rows per table)")
    sizes = [int(size) for size in bench.args.tiers.split(",")] + ([1_000_000] if bench.args.full else [])
    have = {"wf": 0, "open": 0, "steps": 0, "other": 0}
    client = bench.operator_client()
    bench.curve = []
    for size in sizes:
        t = time.perf_counter()
        generate(
            agents=20,
            workflows=size + 2 * (size // 10) - have["wf"],
            steps=size - have["steps"],
            open_checkpoints=size - have["open"],
            decided=size // 10 - have["other"],
            resolved=size // 10 - have["other"],
            seed=SEED + size,
        )
        have = {"wf": size + 2 * (size // 10), "open": size, "steps": size, "other": size // 10}
        loaded = time.perf_counter() - t
        queue = bench.page_ms(client, "/?per=50")
        with transaction.atomic():
            sweep = sweep_ms(due=bench.args.due)
            transaction.set_rollback(True)
        point = {"size": size, "queue_ms": queue, "sweep_ms": sweep, "load_s": loaded}
        bench.curve.append(point)
        print(
            f"{size:>9,} rows: queue first page {queue:6.1f} ms · SLA sweep of {bench.args.due:,} due {sweep:7.1f} ms "
            f"· loaded in {loaded:5.1f}s",
            flush=True,
        )
    base = next(p for p in bench.curve if p["size"] == 10_000)
    top = bench.curve[-1]
    line(
        f"SLA sweep, {bench.args.due:,} due among {top['size']:,} vs 10k",
        top["sweep_ms"],
        base["sweep_ms"],
        "ms",
        target="<= 1.5x",
        holds=top["sweep_ms"] <= 1.5 * base["sweep_ms"],
        note="" if top["size"] >= 1_000_000 else "the 1M tier runs with --full or --tiers",
    )


def sweep_ms(due: int) -> float:
    from django.db import connection
    from django.utils import timezone

    from workflows.tasks import record_sla

    now = timezone.now()
    # The generated history holds checkpoints already past due that no sweep has seen (5,628 of them at
    # the 1M tier): a first sweep records those, untimed, so the timed one meets exactly ``due`` rows.
    record_sla(now)
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE workflows_checkpoint SET due_at = %s, warn_at = %s, breached_at = NULL,
                          warned_at = NULL WHERE id IN (SELECT id FROM workflows_checkpoint
                          WHERE status IN ('open', 'claimed') ORDER BY id DESC LIMIT %s)""",
            [now - timedelta(seconds=30), now - timedelta(seconds=60), due],
        )
    t = time.perf_counter()
    warned, breached = record_sla(now)
    elapsed = (time.perf_counter() - t) * 1000
    if breached != due:
        raise RuntimeError(f"the sweep recorded {breached} breaches of {due} due")
    return elapsed


def chart(bench: Bench) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not bench.curve:
        return
    sizes = [p["size"] for p in bench.curve]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(sizes, [p["queue_ms"] for p in bench.curve], marker="o", label="queue first page (ms)")
    ax.plot(sizes, [p["sweep_ms"] for p in bench.curve], marker="s", label=f"SLA sweep, {bench.args.due:,} due (ms)")
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
