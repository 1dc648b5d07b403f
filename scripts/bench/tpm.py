"""The TPM pages and the breach review, over an empty database and over generated volumes."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

from .output import RESULTS, SEED, header, line

TPM_PAGES = {
    "resume dashboard": "/resumes/",
    "drill-down (degraded)": "/resumes/workflows/?figure=degraded",
    "readiness": "/readiness/",
    "staffing budget": "/staffing/",
    "breach review": "/breaches/",
}


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
    from demo.volume import generate

    user = get_user_model().objects.create_user("bench-tpm", password="x" * 16)
    set_role(user, TPM)
    client = Client()
    client.force_login(user)

    def measure(url: str, n: int) -> dict:
        return time_page(client, url, n)

    empty = {name: measure(url, rounds) for name, url in TPM_PAGES.items()}
    t = time.perf_counter()
    scale = workflows / 1_000_000
    volume = generate(
        workflows=workflows,
        steps=workflows,
        open_checkpoints=int(100_000 * scale),
        decided=int(10_000 * scale),
        resolved=int(300_000 * scale),
        seed=2026,
        progress=lambda m: print(f"  {m}", flush=True),
    )
    print(f"loaded {volume.rows:,} rows for {workflows:,} workflows in {time.perf_counter() - t:.0f}s")
    # The rollups the dashboard and readiness read, built by the real code (what beat and rebuild_rollups run).
    from django.utils import timezone

    from workflows import rollups
    from workflows.models import DailyRollup

    t = time.perf_counter()
    covered = rollups.rebuild()
    print(
        f"rolled {covered[0]} .. {covered[1]} into {DailyRollup.objects.count():,} rollup rows in "
        f"{time.perf_counter() - t:.0f}s (rollups.rebuild, as manage.py rebuild_rollups)"
    )
    today = timezone.now().date()
    live = rollups.live_days(today - timedelta(days=27), today)
    print(f"days of the default 28-day period computed live (touched since the roll): {len(live)}")
    full = {name: measure(url, max(3, rounds // 3)) for name, url in TPM_PAGES.items()}
    print(f"\n{'page':<26} {'ratio':>8}   median empty -> {workflows:,}   SQL queries")
    for name in TPM_PAGES:
        a, b = empty[name], full[name]
        print(
            f"{name:<26} {b['median'] / a['median']:>7.1f}x   {a['median'] * 1000:7.0f} ms -> "
            f"{b['median'] * 1000:7.0f} ms   {a['queries']} -> {b['queries']}"
        )
        RESULTS.append(
            {
                "name": f"tpm page: {name}",
                "figure": b["median"] * 1000,
                "baseline": a["median"] * 1000,
                "unit": "ms",
                "ratio": b["median"] / a["median"],
                "queries": [a["queries"], b["queries"]],
            }
        )


def breach_review(checkpoints: int, days: int, rounds: int) -> None:
    """The breach review over an empty table, then over ``checkpoints`` generated over ``days``: ratios."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.roles import TPM, set_role
    from demo.volume import generate_breach_history
    from workflows.models import Checkpoint

    user = get_user_model().objects.create_user("bench-tpm-breaches", password="x" * 16)
    set_role(user, TPM)
    client = Client()
    client.force_login(user)
    pages = {
        "breach review, last 30 days": "/breaches/",
        "filtered by kind": "/breaches/?kind=refund",
        "last 7 days": "/breaches/?start={week}",
    }

    def measure(url: str) -> dict:
        client.get(url)  # warm: templates, the session
        return time_page(client, url, rounds)

    from django.utils import timezone

    week = (timezone.now() - timedelta(days=6)).date().isoformat()
    urls = {name: url.format(week=week) for name, url in pages.items()}
    empty = {name: measure(url) for name, url in urls.items()}
    print(f"generating {checkpoints:,} checkpoints over {days} days (seed {SEED})", flush=True)
    t = time.perf_counter()
    volume = generate_breach_history(
        checkpoints=checkpoints, days=days, seed=SEED, progress=lambda m: print(f"  {m}", flush=True)
    )
    print(f"loaded {volume.rows:,} rows in {time.perf_counter() - t:.0f}s")
    since = timezone.now() - timedelta(days=30)
    print(
        f"in the table: {Checkpoint.objects.count():,} checkpoints; opened in the last 30 days: "
        f"{Checkpoint.objects.filter(opened_at__gte=since).count():,}, breached in them: "
        f"{Checkpoint.objects.filter(breached_at__gte=since).count():,}"
    )
    older = urls["breach review, last 30 days"]
    first = client.get(older).content.decode()
    marker = 'data-testid="breach-next"'
    if marker in first:  # the second page: the keyset cursor the page links to
        import html
        import re

        urls["second page (cursor)"] = "/breaches/" + html.unescape(
            re.search(r'href="(\?[^"]*)" ' + marker, first).group(1)
        )
        empty["second page (cursor)"] = empty["breach review, last 30 days"]
    full = {name: measure(url) for name, url in urls.items()}
    header(f"breach review: empty table vs {checkpoints:,} checkpoints (same process, medians of {rounds})")
    for name in urls:
        a, b = empty[name], full[name]
        line(f"{name}", b["median"] * 1000, a["median"] * 1000, "ms", note=f"{a['queries']} -> {b['queries']} queries")
