"""Time a delivery's success record in-process, the one statement against the ORM's moves, side by side.

    DATABASE_URL=postgres://…/rc_prof CELERY_BROKER_URL=redis://…/4 CACHE_URL=redis://…/5 SECRET_KEY=x \\
        .venv/bin/python scripts/profile_success_record.py 400

Migrates DATABASE_URL, decides N resumes of the worked example and takes each one's lease as a worker does
(``leases.take``), then records the success of each, alternating ``leases.record_delivered`` (PostgreSQL: the
decision, checkpoint and workflow moves and their events in one statement) and ``Decision.mark_succeeded``
(the read and three moves the worker made before), so both see the same machine at the same moment. Prints
each path's median and p95, their ratio, and the statements of one record each way. Nothing is POSTed.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable


def main(n: int) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from scripts.profiling import set_up

    rng = set_up()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
    from workflows.models import Decider, Decision, leases

    operator = make_user("profile-operator")
    agent, _ = make_agent(
        f"record-{rng.getrandbits(32):08x}", resume_url="http://127.0.0.1:9/resume", allow_plain_http=True
    )
    leased = []
    for _ in range(n + 2):
        checkpoint = make_checkpoint(make_worked_example(agent=agent))
        decision = Decider(checkpoint).decide(by=operator, action="resume", instructions="Go on.", money_confirmed=True)
        taken = leases.take(decision.pk)
        assert isinstance(taken, Decision), taken
        leased.append(taken)
    paths: dict[str, Callable[[Decision], bool]] = {
        "one statement": leases.record_delivered,
        "ORM moves": Decision.mark_succeeded,
    }
    statements = {}
    for (name, record), decision in zip(paths.items(), leased[-2:], strict=True):
        with CaptureQueriesContext(connection) as queries:
            assert record(decision)
        statements[name] = [q["sql"].split()[0] for q in queries.captured_queries]
    times: dict[str, list[float]] = {name: [] for name in paths}
    order = list(paths.items())
    for i, decision in enumerate(leased[:n]):
        name, record = order[i % 2] if rng.random() < 0.5 else order[1 - i % 2]
        started = time.perf_counter()
        assert record(decision)
        times[name].append((time.perf_counter() - started) * 1000)
    for name, values in times.items():
        values.sort()
        p95 = values[int(len(values) * 0.95) - 1]
        print(
            f"{name:>14}: median {statistics.median(values):.2f} ms, p95 {p95:.2f} ms over {len(values)}; "
            f"{len(statements[name])} round trips: {' '.join(statements[name])}"
        )
    one, orm = (statistics.median(times[name]) for name in paths)
    print(f"one statement / ORM moves, medians: {one / orm:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
