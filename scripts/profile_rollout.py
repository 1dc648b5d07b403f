"""Profile a rollout's waves in-process: the sweep's step deciding every member of a wave, on PostgreSQL and Redis.

    DATABASE_URL=postgres://…/rc_prof CELERY_BROKER_URL=redis://…/4 CACHE_URL=redis://…/5 SECRET_KEY=x \\
        .venv/bin/python scripts/profile_rollout.py 2000 /tmp/rollout.prof
    (the same with PROFILE=0: timed and counted without cProfile's overhead)

Migrates DATABASE_URL, makes an incident of N members as the incidents bench does (scripts/bench/incidents.py),
starts a resume rollout with every member in one rate window and no watch window, then runs the sweep's step
(``Rollout.advance_due``) under cProfile until every member is decided, counting the statements it sent. Nothing
delivers: the decisions wait in the broker's queue, which the script purges before and after.
"""

from __future__ import annotations

import cProfile
import os
import sys
import time
from collections import deque


def main(n: int, dump: str | None) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from scripts.profiling import print_tops, set_up

    rng = set_up()
    from celery import current_app
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scripts.bench.incidents import outage
    from workflows.models import Agent, Rollout

    agent, _ = Agent.register(f"prof-{rng.getrandbits(32):08x}", allow_plain_http=True)
    agent.resume_url = "http://127.0.0.1:9/resume"  # nothing delivers: no worker takes the queue
    agent.save(update_fields=["resume_url"])
    incident = outage(None, agent, n)  # outage reads nothing of the bench
    operator, _ = get_user_model().objects.get_or_create(username="profile-commander")
    settings.ROLLOUT_RATE_WINDOW_SECONDS = 0
    rollout = Rollout.start(incident, action="resume", by=operator, per_minute=n, watch_seconds=0)
    profile = cProfile.Profile()
    profiling = os.environ.get("PROFILE", "1") != "0"
    started = time.perf_counter()
    connection.queries_log = deque(maxlen=None)  # every statement counted, not the last 9,000
    with CaptureQueriesContext(connection) as ctx:
        if profiling:
            profile.enable()
        while rollout.status == Rollout.Status.RUNNING:
            Rollout.advance_due()
            rollout.refresh_from_db()
        profile.disable()
    spent = time.perf_counter() - started
    decided = sum(len(w["checkpoints"]) for w in rollout.waves)
    how = "profiled" if profiling else "not profiled"
    print(
        f"{decided} of {n} members decided in {spent:.1f} s ({how}): {spent / decided * 1000:.2f} ms and "
        f"{len(ctx.captured_queries) / decided:.1f} statements a member; waves "
        f"{[len(w['checkpoints']) for w in rollout.waves]}, {rollout.status}"
    )
    with current_app.connection_for_write() as conn:
        conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)  # type: ignore[attr-defined]
    if profiling:
        print_tops(profile, dump)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, sys.argv[2] if len(sys.argv) > 2 else None)
