"""The queue and the workbench beside a trivial authenticated view, and the web process's memory over renders."""

from __future__ import annotations

import statistics
import time
import tracemalloc

from .context import Bench
from .output import header, line
from .rows import step_report


def pages(bench: Bench) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from workflows.models import Checkpoint, Event, Step

    header("queue and workbench vs a trivial authenticated view, same process")
    client = bench.operator_client()
    open_now = Checkpoint.objects.open().count()
    # The workbench of a 1,000-step workflow.
    checkpoint = Checkpoint.objects.open().select_related("workflow").order_by("-pk").first()
    agent = checkpoint.workflow.agent
    Step.objects.filter(workflow=checkpoint.workflow).delete()
    Step.objects.bulk_create(
        [Step(workflow=checkpoint.workflow, **step_report(bench.rng, 1, seq)) for seq in range(1, 1001)]
    )
    Event.objects.bulk_create(
        [
            Event(
                workflow=checkpoint.workflow,
                actor_type="agent",
                actor_agent=agent,
                verb="step_committed",
                data={"seq": s},
            )
            for s in range(1, 1001)
        ]
    )
    urls = {"trivial": "/bench/trivial", "queue": "/?per=50", "workbench": f"/checkpoints/{checkpoint.pk}/"}
    medians: dict[str, list[float]] = {k: [] for k in urls}
    for _ in range(bench.args.rounds):  # interleaved: both sides see the same machine
        for key, url in urls.items():
            medians[key].append(bench.page_ms(client, url, rounds=1))
    med = {k: statistics.median(v) for k, v in medians.items()}
    # The same first page after another operator claimed or released one of its rows: the version moved, so
    # the counts are counted again and that row is rendered again; the other 49 rows are as they were.
    from django.contrib.auth import get_user_model

    other, _ = get_user_model().objects.get_or_create(username="bench-other")
    first_row = Checkpoint.objects.open().filter(assignee__isnull=True).order_by("due_at", "pk").first()
    changed, trivial_beside = [], []
    for i in range(bench.args.rounds):
        first_row.refresh_from_db()
        if not (first_row.release(by=other) if i % 2 else first_row.claim(by=other)):
            raise RuntimeError("the bench's operator could not claim or release its row")
        changed.append(bench.page_ms(client, urls["queue"], rounds=1))
        trivial_beside.append(bench.page_ms(client, urls["trivial"], rounds=1))
    if first_row.status == Checkpoint.Status.CLAIMED:
        first_row.release(by=other)
    queries = {}
    for key, url in urls.items():
        with CaptureQueriesContext(connection) as ctx:
            client.get(url)
        queries[key] = len(ctx.captured_queries)
    # The live poll while nothing changed: the version it carries is current, so it answers 204 unrendered.
    from console.views.queue import _queue_version

    poll_headers = {"HX-Request": "true", "HX-Target": "queue-table", "HX-Trigger": "queue-table"}
    polls = []
    for _ in range(bench.args.rounds):
        begun = time.perf_counter()
        if client.get(f"/?per=50&v={_queue_version()}", headers=poll_headers).status_code != 204:
            raise RuntimeError("the queue's poll rendered although nothing changed")
        polls.append((time.perf_counter() - begun) * 1000)
    line(
        "queue poll, nothing changed, vs trivial",
        statistics.median(polls),
        med["trivial"],
        "ms",
        note=f"204, not rendered; the render it saves: {med['queue']:.1f} ms",
    )
    small = bench.page_ms(client, "/?per=25")
    line(
        f"queue first page at {open_now:,} open vs trivial",
        med["queue"],
        med["trivial"],
        "ms",
        target="<= 3x",
        holds=med["queue"] <= 3 * med["trivial"],
        note=f"{queries['queue']} vs {queries['trivial']} queries",
    )
    line(
        "queue first page, one row just changed, vs trivial",
        statistics.median(changed),
        statistics.median(trivial_beside),
        "ms",
        target="<= 3x",
        holds=statistics.median(changed) <= 3 * statistics.median(trivial_beside),
        note="another operator claimed or released a row before each render",
    )
    line(
        "workbench, 1,000 steps vs trivial",
        med["workbench"],
        med["trivial"],
        "ms",
        target="<= 5x",
        holds=med["workbench"] <= 5 * med["trivial"],
        note=f"{queries['workbench']} queries",
    )
    # The queue figures this suite started with.
    near_end = Checkpoint.objects.open().order_by("-due_at", "-pk")[60]
    from console.views.queue import QUEUE_PAGES

    deep = bench.page_ms(client, f"/?per=50&after={QUEUE_PAGES.cursor(near_end)}")
    big = bench.page_ms(client, "/?per=200")
    line("queue deep page vs first page", deep, med["queue"], "ms")
    line("queue page size 200 vs 25", big, small, "ms", note="8x the rows")
    first = bench.curve[0]["queue_ms"] if bench.curve else None
    if first:
        line(f"queue first page, {open_now:,} vs 1k open", bench.curve[-1]["queue_ms"], first, "ms")
    _large_states(bench, client, med["queue"])
    tracemalloc.start()
    client.get("/?per=50")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"peak Python memory of one queue request: {peak / 1024:.0f} KiB", flush=True)


def _large_states(bench: Bench, client, plain_ms: float) -> None:
    """The first page again with an agent's raw state of a real run on each row (a conversation: 27 KB of
    JSON), beside the same page with the bench's small states. No row shows the raw state: the page should not
    pay for it (the query leaves it out since 2026-12-08; it cost 47-60 vs 32-35 ms before)."""
    from workflows.models import Checkpoint

    first = list(Checkpoint.objects.open().order_by("due_at", "pk").values_list("pk", "state")[:60])
    conversation = {"messages": [{"role": "user", "content": "lorem ipsum " * 20, "n": n} for n in range(100)]}
    Checkpoint.objects.filter(pk__in=[pk for pk, _ in first]).update(state=conversation)
    try:
        large = [bench.page_ms(client, "/?per=50", rounds=1) for _ in range(bench.args.rounds)]
        plain = [bench.page_ms(client, "/bench/trivial", rounds=1) for _ in range(bench.args.rounds)]
    finally:
        for pk, state in first:
            Checkpoint.objects.filter(pk=pk).update(state=state)
    line(
        "queue first page, 27 KB agent states vs small",
        statistics.median(large),
        plain_ms,
        "ms",
        note=f"no row shows the raw state; trivial view {statistics.median(plain):.1f} ms",
    )


def web_memory(bench: Bench) -> None:
    import psutil

    header("web memory over many queue renders (in-process, the code a web worker runs)")
    client = bench.operator_client()
    n = bench.args.renders
    me = psutil.Process()
    for i in range(1, n + 1):
        client.get("/?per=50")
        if i == n // 10:
            first = me.memory_info().rss
    last = me.memory_info().rss
    line(
        f"web RSS after {n:,} vs {n // 10:,} queue renders",
        last / 2**20,
        first / 2**20,
        "MiB",
        target="<= 1.10x (flat)",
        holds=last <= 1.10 * first,
    )
