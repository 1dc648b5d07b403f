"""Time the incident page of a large incident beside the queue page in-process, as the incidents bench does,
without the rest of the bench (and optionally profile the incident page).

    DATABASE_URL=postgres://…/rc_prof CACHE_URL=redis://…/5 ALLOWED_HOSTS=testserver SECRET_KEY=x \\
        MANIFEST_STATIC=false .venv/bin/python scripts/profile_incident_page.py 10000 [/tmp/incident.prof]
    (PROFILE=1: then profile 5 more renders of the incident page with cProfile and print the tops)

Migrates DATABASE_URL and makes an incident of N members as the bench does (``scripts.bench.incidents.outage``),
unless one made by an earlier run with N members is still there (``REUSE=0`` makes a new one). The other
unresolved incidents of earlier runs are marked resolved, so the queue page reads what the bench's reads: one
incident of N members. Then it times both pages with Django's test client, interleaved, and prints the medians
of 5 and their ratio.
"""

from __future__ import annotations

import cProfile
import os
import statistics
import sys
import time

PREFIX = "prof-incident-page-"
ROUNDS = 5


def _incident(n: int):
    from scripts.bench.incidents import outage
    from workflows.models import Agent, Incident

    ours = Incident.objects.filter(agent__name__startswith=PREFIX).unresolved().order_by("-pk")
    reused = next((i for i in ours[:5] if i.members.count() == n), None) if os.environ.get("REUSE") != "0" else None
    if reused is None:
        agent, _ = Agent.register(f"{PREFIX}{time.time_ns():x}", allow_plain_http=True)
        reused = outage(None, agent, n)  # outage reads nothing of the bench
    # Only this incident on the queue, as in the bench's fresh database.
    Incident.objects.unresolved().exclude(pk=reused.pk).update(status=Incident.Status.RESOLVED)
    return reused


def main(n: int, dump: str | None) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from scripts.profiling import print_tops, set_up, timed_get

    set_up()
    from scripts.bench.context import Bench

    incident = _incident(n)
    client = Bench.operator_client(None)  # it reads nothing of the run
    urls = {"queue": "/?per=50", "incident": f"/incidents/{incident.pk}/"}

    def timed(url: str) -> float:
        return timed_get(client, url)

    for url in urls.values():  # warm up: the queue's rows are rendered once per content
        timed(url)
    times: dict[str, list[float]] = {key: [] for key in urls}
    for _ in range(ROUNDS):  # interleaved: both pages see the same machine
        for key, url in urls.items():
            times[key].append(timed(url))
    med = {key: statistics.median(v) for key, v in times.items()}
    print(
        f"incident page, {n:,} members: {med['incident']:.1f} ms; queue page: {med['queue']:.1f} ms; "
        f"ratio {med['incident'] / med['queue']:.2f}x (medians of {ROUNDS}, load {os.getloadavg()[0]:.1f})"
    )
    if os.environ.get("PROFILE") == "1":
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(ROUNDS):
            client.get(urls["incident"])
        profile.disable()
        print_tops(profile, dump)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, sys.argv[2] if len(sys.argv) > 2 else None)
