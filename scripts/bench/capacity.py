"""Capacity: simulated operators and agents against gunicorn, growing until a page or a step report is too slow.

Each operator has a signed-in session and keeps the queue and one workbench open: it loads both, then polls
both every 3 s as the pages do (``hx-get`` with the version the page carries: a 204 while nothing changed, a
render when something did). Every tenth of a second one operator claims or releases a row, so the queue's
version moves and polls do render. Each agent reports ~250 B steps to its own workflow at a steady pace over
a keep-alive connection. Every level runs ``--capacity-seconds``; the next level doubles both, until the p95
of page requests passes 300 ms or the p95 of step reports passes 100 ms. The largest level held is the
capacity: operators and steps/s for this machine, and per core.

Clients are threads of this process (their CPU counts against the machine too: the figure is conservative).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field

from .context import Bench
from .environment import BIN, answers, cpu_of, free_port
from .output import SEED, header, pct
from .rows import made_reports

PAGE_P95_MS = 300.0
STEP_P95_MS = 100.0
POLL_SECONDS = 3.0
VERSION = re.compile(r'hx-vals=\'\{"v": "([^"]+)"\}\'')


@dataclass
class Level:
    operators: int
    steps_per_second: float
    page_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    errors: int = 0


def _request(
    conn: http.client.HTTPConnection, method: str, path: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, bytes, float]:
    begun = time.perf_counter()
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, data, (time.perf_counter() - begun) * 1000


def _operator(
    port: int, cookie: str, workbench: str, level: Level, stop: threading.Event, lock: threading.Lock, offset: float
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    base = {"Cookie": cookie}
    poll = {**base, "HX-Request": "true"}
    versions: dict[str, str] = {}
    stop.wait(offset)  # spread the operators over the poll interval
    for path in ("/?per=50", workbench):
        status, html, ms = _request(conn, "GET", path, base)
        with lock:
            level.page_ms.append(ms)
            level.errors += status != 200
        found = VERSION.search(html.decode(errors="replace"))
        versions[path] = found.group(1) if found else ""
    while not stop.wait(POLL_SECONDS):
        for path, target in (("/?per=50", "queue-table"), (workbench, "workbench-live")):
            sep = "&" if "?" in path else "?"
            status, html, ms = _request(
                conn, "GET", f"{path}{sep}v={versions[path]}", {**poll, "HX-Target": target, "HX-Trigger": target}
            )
            if status == 200:
                found = VERSION.search(html.decode(errors="replace"))
                versions[path] = found.group(1) if found else versions[path]
            with lock:
                level.page_ms.append(ms)
                level.errors += status not in (200, 204)


def _agent(
    port: int,
    token: str,
    workflow_id: int,
    first_seq: int,
    per_second: float,
    level: Level,
    stop: threading.Event,
    lock: threading.Lock,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    reports = made_reports(SEED, workflow_id, 50)
    seq, next_at = first_seq, time.perf_counter()
    while not stop.is_set():
        body = json.dumps({**reports[seq % len(reports)], "seq": seq}).encode()
        status, _, ms = _request(conn, "POST", f"/api/v1/workflows/{workflow_id}/steps", headers, body)
        with lock:
            level.step_ms.append(ms)
            level.errors += status != 201
        seq += 1
        next_at += 1 / per_second
        stop.wait(max(0.0, next_at - time.perf_counter()))


def _churn(rows: list, other, stop: threading.Event) -> None:
    """Another operator claims and releases rows: the queue's version moves, polls render."""
    i = 0
    while not stop.wait(0.1):
        row = rows[i % len(rows)]
        row.refresh_from_db()
        row.release(by=other) if row.assignee_id else row.claim(by=other)
        i += 1


def _warm(port: int, cookie: str, workbench: str, connections: int = 12) -> None:
    """Every gunicorn worker renders both pages a few times before anything is measured: a fresh worker's first
    requests load templates, URL patterns and code (seen: a p95 of 660 ms at one operator on an idle machine,
    all of it the first renders; the next were 20-40 ms). Not counted."""

    def warm() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(3):
            for path in ("/?per=50", workbench):
                _request(conn, "GET", path, {"Cookie": cookie})

    threads = [threading.Thread(target=warm, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def _web_cpu(webs: list) -> float:
    """The web servers' CPU seconds so far (psutil, the bench extra), or NaN without it."""
    try:
        return sum(cpu_of(web.pid) for web in webs)
    except ImportError:
        return float("nan")


def _more_webs(bench: Bench, count: int) -> tuple[list, list[int]]:
    """The bench's web server and ``count - 1`` more on the same database and Redis (``--scale web=N``)."""
    webs, ports = [bench.web], [bench.web_port]
    for n in range(1, count):
        port = free_port()
        bench.procs.env = {**bench.env, "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_ACCESS_LOG": ""}
        webs.append(
            bench.procs.start(
                [str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "console.wsgi"],
                answers(port),
                f"gunicorn {n + 1}",
            )
        )
        ports.append(port)
    bench.procs.env = bench.env
    return webs, ports


def capacity(bench: Bench) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.roles import OPERATOR, set_role
    from demo.volume import generate
    from workflows.models import Checkpoint

    header(
        f"capacity: operators polling queue + workbench every {POLL_SECONDS:.0f} s and agents reporting steps, "
        f"doubling until p95 page > {PAGE_P95_MS:.0f} ms or p95 step > {STEP_P95_MS:.0f} ms"
    )
    if not Checkpoint.objects.open().exists():
        generate(agents=20, workflows=1_200, steps=1_000, open_checkpoints=1_000, decided=100, resolved=100, seed=SEED)
    if not bench.web:
        bench.start_web()
    webs, ports = _more_webs(bench, max(1, bench.args.capacity_webs))
    users = get_user_model()
    open_rows = list(Checkpoint.objects.open().filter(assignee__isnull=True).order_by("due_at", "pk")[:60])
    other, _ = users.objects.get_or_create(username="bench-churn")
    set_role(other, OPERATOR)
    cores = os.cpu_count() or 1
    print(
        f"{'operators':>9} {'steps/s':>8} {'p95 page':>9} {'p95 step':>9} {'errors':>6} {'web CPU':>8}  held",
        flush=True,
    )
    held: Level | None = None
    operators, agents, rate = 1, 1, 5.0  # per agent: steps per second
    made_ops: list[str] = []
    seq = 1
    while operators <= bench.args.capacity_max:
        while len(made_ops) < operators:
            user, _ = users.objects.get_or_create(username=f"bench-op-{len(made_ops)}")
            set_role(user, OPERATOR)
            client = Client()
            client.force_login(user)
            made_ops.append(f"sessionid={client.cookies['sessionid'].value}")
        if operators == 1:
            for port in ports:
                _warm(port, made_ops[0], f"/checkpoints/{open_rows[0].pk}/")
        fleet = [bench.agent("capacity") for _ in range(agents)]
        flows = [(token, bench.workflow(agent, "capacity").pk) for agent, token in fleet]
        level, stop, lock = Level(operators, agents * rate), threading.Event(), threading.Lock()
        threads = [
            threading.Thread(
                target=_operator,
                daemon=True,
                args=(
                    ports[i % len(ports)],
                    cookie,
                    f"/checkpoints/{open_rows[i % len(open_rows)].pk}/",
                    level,
                    stop,
                    lock,
                    POLL_SECONDS * i / operators,
                ),
            )
            for i, cookie in enumerate(made_ops[:operators])
        ]
        threads += [
            threading.Thread(
                target=_agent, daemon=True, args=(ports[j % len(ports)], token, wf, seq, rate, level, stop, lock)
            )
            for j, (token, wf) in enumerate(flows)
        ]
        threads.append(threading.Thread(target=_churn, daemon=True, args=(open_rows, other, stop)))
        cpu_before, begun = _web_cpu(webs), time.perf_counter()
        for t in threads:
            t.start()
        stop.wait(bench.args.capacity_seconds)
        stop.set()
        for t in threads:
            t.join(35)
        wall = time.perf_counter() - begun
        web_cores = (_web_cpu(webs) - cpu_before) / wall
        seq += 100_000
        page95, step95 = pct(level.page_ms, 0.95), pct(level.step_ms, 0.95)
        achieved = len(level.step_ms) / wall
        ok = page95 <= PAGE_P95_MS and step95 <= STEP_P95_MS and not level.errors
        print(
            f"{operators:>9} {achieved:>8.0f} {page95:>7.0f}ms {step95:>7.0f}ms {level.errors:>6} "
            f"{web_cores:>6.2f}c  {'yes' if ok else 'NO'}",
            flush=True,
        )
        if not ok:
            break
        held = level
        held.steps_per_second = achieved
        operators, agents = operators * 2, agents * 2
    load = os.getloadavg()[0]
    if held is None:
        print(f"capacity: not even the first level held (load {load:.1f})", flush=True)
        return
    print(
        f"capacity: {held.operators} operators and {held.steps_per_second:.0f} steps/s held on {cores} cores "
        f"= {held.operators / cores:.1f} operators and {held.steps_per_second / cores:.0f} steps/s per core "
        f"(web: {len(webs)} gunicorn{'s' if len(webs) > 1 else ''}, console/gunicorn.py; load {load:.1f})",
        flush=True,
    )
