"""Profile step reports in-process: Django's handler with the whole middleware stack, PostgreSQL, Redis.

    DATABASE_URL=postgres://…/rc_prof CACHE_URL=redis://…/5 ALLOWED_HOSTS=testserver SECRET_KEY=x \\
        .venv/bin/python scripts/profile_step_report.py 300 /tmp/step.prof

Migrates DATABASE_URL, registers an agent and a workflow, sends 50 reports (the token cache warms),
times N reports, then profiles N more with cProfile and prints the cumulative top. Run from another
checkout's directory (PYTHONPATH=that directory) to profile that version: docs/profile-step-report.txt
compares main before issue 25's first slice with after, run one after the other.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import random
import sys
import time


def main(n: int, dump: str | None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from workflows.models import Agent, Workflow

    call_command("migrate", verbosity=0)
    seed = time.time_ns()  # unique names in a reused database
    print(f"seed {seed}")
    rng = random.Random(seed)
    agent, token = Agent.register(f"prof-{rng.getrandbits(32):08x}")
    workflow = Workflow.objects.create(
        agent=agent, external_id=f"prof-{rng.getrandbits(40):x}", kind="refund", title="profile"
    )
    client = Client(headers={"Authorization": f"Bearer {token}"})
    body = {
        "name": "lookup_order",
        "kind": "tool",
        "status": "committed",
        "input": {"order": "O-1", "q": "x" * 80},
        "output": {"ok": True, "items": [1, 2, 3], "note": "y" * 60},
        "verified": True,
    }
    url = f"/api/v1/workflows/{workflow.pk}/steps"

    def report(seq: int) -> None:
        response = client.post(url, json.dumps({**body, "seq": seq}), content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"step {seq} answered {response.status_code}: {response.content[:300]!r}")

    for seq in range(1, 51):
        report(seq)
    started = time.perf_counter()
    for seq in range(51, 51 + n):
        report(seq)
    plain = (time.perf_counter() - started) / n * 1000
    profile = cProfile.Profile()
    profile.enable()
    for seq in range(51 + n, 51 + 2 * n):
        report(seq)
    profile.disable()
    print(f"{plain:.2f} ms per step report in-process (unprofiled, {n} reports)")
    if dump:
        profile.dump_stats(dump)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(45)
    print(out.getvalue())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, sys.argv[2] if len(sys.argv) > 2 else None)
