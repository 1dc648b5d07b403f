"""Profile batched step reports in-process: Django's handler with the whole middleware stack, PostgreSQL, Redis.

    DATABASE_URL=postgres://…/rc_prof CACHE_URL=redis://…/5 ALLOWED_HOSTS=testserver SECRET_KEY=x \\
        .venv/bin/python scripts/profile_step_batch.py 10 /tmp/batch.prof

The batch endpoint's model of scripts/profile_step_report.py: migrates DATABASE_URL, registers an agent and a
workflow, sends one warming batch, times N batches of 500 steps (the bench's step shape, scripts/bench/rows.py),
then profiles N more with cProfile and prints the cumulative and own-time tops.
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time

SIZE = 500


def main(n: int, dump: str | None) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from scripts.profiling import print_tops, set_up

    rng = set_up()
    from django.test import Client

    from scripts.bench.rows import step_report
    from workflows.models import Agent, Workflow

    agent, token = Agent.register(f"prof-{rng.getrandbits(32):08x}")
    workflow = Workflow.objects.create(
        agent=agent, external_id=f"prof-{rng.getrandbits(40):x}", kind="refund", title="profile"
    )
    client = Client(headers={"Authorization": f"Bearer {token}"})
    url = f"/api/v1/workflows/{workflow.pk}/steps/batch"
    bodies = [
        json.dumps({"steps": [step_report(rng, workflow.pk, seq) for seq in range(first, first + SIZE)]})
        for first in range(1, (2 * n + 1) * SIZE + 1, SIZE)
    ]

    def send(body: str) -> None:
        response = client.post(url, body, content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"batch answered {response.status_code}: {response.content[:300]!r}")

    send(bodies[0])
    started = time.perf_counter()
    for body in bodies[1 : n + 1]:
        send(body)
    plain = (time.perf_counter() - started) / (n * SIZE) * 1000
    profile = cProfile.Profile()
    profile.enable()
    for body in bodies[n + 1 :]:
        send(body)
    profile.disable()
    print(f"{plain:.3f} ms per step in-process, batches of {SIZE} (unprofiled, {n} batches)")
    print_tops(profile, dump, 35)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, sys.argv[2] if len(sys.argv) > 2 else None)
