"""Profile the queue's first page and a workbench in-process, beside the bench's trivial view.

    DATABASE_URL=postgres://…/rc_perf_bench CACHE_URL=redis://…/5 ALLOWED_HOSTS=testserver SECRET_KEY=x \\
        MANIFEST_STATIC=false PYTHONPATH=. .venv/bin/python scripts/profile_pages.py queue 100 /tmp/queue.prof

Runs over a database the bench filled (``python -m scripts.bench --only tiers,pages`` leaves
``<name>_bench`` behind): signs in its operator, warms up, times N renders of the page (the median beside
the trivial view's), then profiles N more with cProfile and prints the cumulative and own-time tops.
``queue`` is ``/?per=50``; ``workbench`` the checkpoint whose workflow has the most steps.
"""

from __future__ import annotations

import cProfile
import os
import statistics
import sys


def main(page: str, n: int, dump: str | None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.db.models import Count

    from scripts.bench.context import Bench
    from scripts.bench.environment import install_trivial_view
    from scripts.profiling import print_tops, timed_get
    from workflows.models import Checkpoint, Workflow

    install_trivial_view()
    client = Bench.operator_client(None)  # it reads nothing of the run
    if page == "queue":
        url = "/?per=50"
    else:
        workflow = Workflow.objects.annotate(n=Count("steps")).order_by("-n").first()
        checkpoint = Checkpoint.objects.filter(workflow=workflow).order_by("-pk").first()
        url = f"/checkpoints/{checkpoint.pk}/"

    def timed(path: str) -> float:
        return timed_get(client, path)

    for _ in range(10):
        timed(url), timed("/bench/trivial")
    pairs = [(timed(url), timed("/bench/trivial")) for _ in range(n)]
    page_ms, trivial_ms = statistics.median(p for p, _ in pairs), statistics.median(t for _, t in pairs)
    print(
        f"{url}: {page_ms:.2f} ms vs trivial {trivial_ms:.2f} ms = {page_ms / trivial_ms:.1f}x "
        f"(medians of {n}, load {os.getloadavg()[0]:.1f})"
    )
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        client.get(url)
    profile.disable()
    print_tops(profile, dump)


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "queue",
        int(sys.argv[2]) if len(sys.argv) > 2 else 100,
        sys.argv[3] if len(sys.argv) > 3 else None,
    )
