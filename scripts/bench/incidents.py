"""Incidents at scale: the incident page of a large incident beside the queue page, and a rollout's delivery
throughput beside bare Celery tasks on the same worker and broker.

The members are made in bulk from one checkpoint opened the real way (``Checkpoint.open_for``): the same
resume state, SLA terms and signature, each on a workflow of its own with its own ticket and customer, so
the pages read what a real outage leaves. The rollout then goes through the real path: the sweep's
rollout step (``Rollout.advance_due``, run here in a loop as beat runs it every few seconds), each member's
decision through ``Decider`` and the outbox, the relay woken by NOTIFY, and a Celery worker POSTing to the
bench's endpoint.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from .context import Bench
from .delivery import ReadyFile
from .endpoint import Receiver
from .environment import BIN, ROOT
from .output import header, line

if TYPE_CHECKING:
    from workflows.shapes import PlanStep

# What the agent says it will do after the failed step: no money, so a resume needs no confirmation.
PLAN: list[PlanStep] = [
    {"name": "write_ticket_note", "kind": "effect", "amount": None, "currency": None, "moves_money": False}
]


def outage(bench: Bench, agent, n: int):
    """An incident of ``n`` members of one agent: one opened by the API's path, the rest copied from it."""
    from django.utils import timezone

    from workflows.models import Checkpoint, Incident, Workflow

    agent.incident_threshold = 1  # the first checkpoint opens the incident
    agent.save(update_fields=["incident_threshold"])
    now = timezone.now()
    first = Workflow.objects.create(
        agent=agent, external_id="OUT-0", kind="refund", title="bench outage 0", context={"customer": "C-0"}
    )
    template = Checkpoint.open_for(
        first, reason="tool_error", at_seq=4, plan=PLAN, detail="payments provider answered 502 Bad Gateway for OUT-0"
    )
    incident = Incident.objects.get(members=template)
    workflows = Workflow.objects.bulk_create(
        [
            Workflow(
                agent=agent,
                external_id=f"OUT-{i}",
                kind="refund",
                title=f"bench outage {i}",
                status=Workflow.Status.PAUSED,
                context={"customer": f"C-{i % (n // 3 + 1)}"},
            )
            for i in range(1, n)
        ],
        batch_size=2000,
    )
    copied = {  # at_stake too: what open_for read of the resume state, which the incident page sums
        f.attname: getattr(template, f.attname)
        for f in Checkpoint._meta.concrete_fields
        if f.attname not in ("id", "workflow_id", "opened_at", "detail")
    }
    Checkpoint.objects.bulk_create(
        [
            Checkpoint(
                **{
                    **copied,
                    "workflow_id": w.pk,
                    "detail": f"payments provider answered 502 Bad Gateway for {w.external_id}",
                    # Arrived over the minutes before now, 30 ms apart, as an outage's checkpoints do.
                    "opened_at": now - timedelta(milliseconds=30 * (n - i)),
                }
            )
            for i, w in enumerate(workflows, start=1)
        ],
        batch_size=2000,
    )
    assert incident.members.count() == n
    return incident


def incidents(bench: Bench) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    n = bench.args.incident_members
    header(f"incidents: the incident page of {n:,} members vs the queue page, same process")
    agent, _ = bench.agent("outage", allow_plain_http=True)  # the bench's endpoint is http on loopback
    incident = outage(bench, agent, n)
    client = bench.operator_client()
    urls = {"queue": "/?per=50", "incident": f"/incidents/{incident.pk}/"}
    times: dict[str, list[float]] = {k: [] for k in urls}
    rounds = max(3, bench.args.rounds // 3)
    for _ in range(rounds):  # interleaved: both sides see the same machine
        for key, url in urls.items():
            times[key].append(bench.page_ms(client, url, rounds=1))
    med = {k: statistics.median(v) for k, v in times.items()}
    queries = {}
    for key, url in urls.items():
        with CaptureQueriesContext(connection) as ctx:
            client.get(url)
        queries[key] = len(ctx.captured_queries)
    line(
        f"incident page, {n:,} members vs queue page",
        med["incident"],
        med["queue"],
        "ms",
        target="<= 5x",
        holds=med["incident"] <= 5 * med["queue"],
        note=f"{queries['incident']} vs {queries['queue']} queries; medians of {rounds}",
    )
    rollout_throughput(bench, incident)


def rollout_throughput(bench: Bench, incident) -> None:
    from celery import current_app
    from django.contrib.auth import get_user_model
    from django.db import connection

    from workflows.models import Decision, Rollout

    n = incident.members.open().count()
    header(f"incidents: a {n:,}-member rollout's deliveries vs bare Celery tasks, same worker and broker")
    section_procs = len(bench.procs.procs)
    receiver = Receiver()
    incident.agent.resume_url = receiver.url
    incident.agent.save(update_fields=["resume_url"])
    with current_app.connection_for_write() as conn:  # nothing left over from an earlier run in the queue
        conn.default_channel.queue_purge("bench")  # type: ignore[attr-defined]  # kombu types the channel loosely
    worker_env = {**bench.env, "PYTHONPATH": str(ROOT / "scripts"), "CELERY_QUEUE": "bench"}
    bench.procs.env = worker_env
    bench.procs.start(
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
            f"bench-incidents-{os.getpid()}@%h",
        ],
        ReadyFile().exists_after(worker_env),
        "celery worker",
    )
    bench.procs.start([str(BIN / "python"), "manage.py", "run_relay", "--interval", "5"], lambda: True, "relay")
    bench.procs.env = bench.env
    time.sleep(2)
    # Baseline: as many bare tasks, all sent at once, each POSTing to the same endpoint.
    begun = time.time()
    for i in range(n):
        current_app.send_task("bench_tasks.post", (receiver.url, f"bare-{i}"), queue="bench")
    for i in range(n):
        receiver.wait(f"bare-{i}", timeout=3600)
    bare_s = max(receiver.arrived[f"bare-{i}"] for i in range(n)) - begun
    # The rollout: a canary and growing waves with the rate limit set out of the way (every member in
    # the window, no watch window), so that what is measured is the path each member's decision takes.
    operator, _ = get_user_model().objects.get_or_create(username="bench-commander")
    from django.conf import settings

    window = settings.ROLLOUT_RATE_WINDOW_SECONDS
    settings.ROLLOUT_RATE_WINDOW_SECONDS = 0  # this process runs the sweep's step: no wait between waves
    rollout = Rollout.start(
        incident, action="resume", by=operator, per_minute=n, watch_seconds=0, instructions="the provider is back"
    )
    begun = time.time()
    while rollout.status == Rollout.Status.RUNNING:
        Rollout.advance_due()  # beat's sweep runs this step every SWEEP_INTERVAL_SECONDS
        rollout.refresh_from_db()
        time.sleep(0.05)
    decided = time.time() - begun
    settings.ROLLOUT_RATE_WINDOW_SECONDS = window
    keys = [
        str(k) for k in Decision.objects.filter(checkpoint__incident=incident).values_list("delivery_id", flat=True)
    ]
    for key in keys:
        receiver.wait(key, timeout=3600)
    rollout_s = max(receiver.arrived[k] for k in keys) - begun
    waves = [len(w["checkpoints"]) for w in rollout.waves]
    line(
        f"rollout of {len(keys):,} deliveries/s vs bare Celery",
        len(keys) / rollout_s,
        n / bare_s,
        "/s",
        target=">= 50 %",
        holds=len(keys) / rollout_s >= 0.5 * n / bare_s,
        note=f"waves {waves}; all decided after {decided:.0f}s; bare {bare_s:.0f}s, rollout {rollout_s:.0f}s",
    )
    deadline = time.monotonic() + 60
    while Decision.objects.exclude(status__in=["succeeded", "failed"]).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    connection.close()
    bench.procs.stop(since=section_procs)
    receiver.close()
