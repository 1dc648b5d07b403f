"""Two versions of the console side by side: the queue page and a step report, measured alternately.

    make bench BENCH_ARGS=...                                       # the full suite (scripts/bench/)
    .venv/bin/python scripts/bench_versions.py --base 05ffc70^ --head HEAD   # this script, ~3 minutes

Issue 12 (security) may not slow the queue page or the agent API. Figures from two runs on a shared
machine are not comparable, so this script runs both versions at once: each is exported with
``git archive`` into a temporary folder, migrated into a database of its own on DATABASE_URL's server
(``<name>_vbench_base`` / ``_head``, dropped afterwards), seeded through its own API with the same
workflows (steps and an open checkpoint each), and served by gunicorn with the same arguments (DEBUG off,
Redis cache). Then, round after round with the order swapped each round, the same client measures on
each: the first queue page (50 rows) as a signed-in operator, and a new step reported with the agent's
token. Each line: median and p95 in ms for both, and head / base, then the web server's CPU time per
request (user + system time of gunicorn's processes over each batch, read from /proc): the wall-clock
figures move with the machine's load, the CPU time much less, so it is the one to believe on a shared
machine. The seed of the request bodies is fixed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SEED = 2026
PASSWORD = "bench-operator-password-2026"  # noqa: S105  # a throwaway database's user

SEED_USERS = """
from django.contrib.auth import get_user_model
from console.roles import set_role
from workflows.models import Agent
user = get_user_model().objects.create_user("bench-op", password={password!r})
set_role(user, "operator")
agent, token = Agent.register("bench-bot")
print("TOKEN", token)
"""


def database(server_url: str, label: str, *, drop_only: bool = False) -> str:
    import psycopg

    parsed = urlparse(server_url)
    name = f"{parsed.path.strip('/') or 'recovery_console'}_vbench_{label}"
    with psycopg.connect(urlunparse(parsed._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def redis_db(url: str, db: int) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{db}"))


class Version:
    def __init__(self, label: str, rev: str, port: int, redis_number: int, workdir: Path) -> None:
        self.label, self.rev, self.port = label, rev, port
        self.commit = subprocess.check_output(["git", "rev-parse", "--short", rev], cwd=ROOT, text=True).strip()
        self.tree = workdir / label
        self.tree.mkdir()
        archive = subprocess.run(["git", "archive", self.commit], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(self.tree)], input=archive, check=True)
        redis = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "PYTHONPATH": f"{self.tree}{os.pathsep}{self.tree / 'clients/python/src'}",
            "DATABASE_URL": database(os.environ["DATABASE_URL"], label),
            "CACHE_URL": redis_db(redis, redis_number),
            "CELERY_BROKER_URL": redis_db(redis, redis_number),
            "SECRET_KEY": "bench-only-secret-key",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_COOKIES": "false",
            "MANIFEST_STATIC": "false",
            "LOG_LEVEL": "WARNING",
            "API_RATE_LIMIT_PER_MINUTE": "100000000",
            "API_AUTH_FAILURES_PER_MINUTE": "0",
            "DJANGO_SETTINGS_MODULE": "console.settings",
        }
        self.url = f"http://127.0.0.1:{port}"
        self.server: subprocess.Popen[bytes] | None = None

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=self.tree,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def start(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")
        out = self.manage("shell", "-c", SEED_USERS.format(password=PASSWORD))
        self.token = next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN"))
        empty = self.tree / "bench-gunicorn.conf.py"
        empty.write_text("")  # the same server arguments for both versions, whatever their gunicorn.conf.py says
        self.server = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "-c",
                str(empty),
                "console.wsgi",
                "-b",
                f"127.0.0.1:{self.port}",
                "-w",
                "1",
                "--threads",
                "2",
            ],
            cwd=self.tree,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{self.url}/login/", timeout=10).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or still importing
                pass
            if time.monotonic() > deadline or self.server.poll() is not None:
                raise SystemExit(f"{self.label} ({self.commit}) did not start")
            time.sleep(0.3)
        self.agent = requests.Session()
        self.agent.headers.update({"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        self.operator = requests.Session()
        self.operator.get(f"{self.url}/login/")
        self.operator.post(
            f"{self.url}/login/",
            data={
                "username": "bench-op",
                "password": PASSWORD,
                "csrfmiddlewaretoken": self.operator.cookies["csrftoken"],
            },
            headers={"Referer": f"{self.url}/login/"},
        )
        assert "sessionid" in self.operator.cookies, f"{self.label}: the operator could not sign in"

    def seed(self, workflows: int) -> None:
        """The same workflows for both: three steps each and an open checkpoint, through the API."""

        def one(n: int) -> str:
            session = requests.Session()
            session.headers.update(self.agent.headers)
            created = session.post(
                f"{self.url}/api/v1/workflows",
                json={"external_id": f"T-{n}", "kind": "refund", "title": f"Refund for ticket T-{n}"},
            ).json()
            wid = created["id"]
            for seq, (name, kind) in enumerate(
                (("read_ticket", "tool"), ("decide", "model"), ("issue_refund", "effect")), 1
            ):
                session.post(
                    f"{self.url}/api/v1/workflows/{wid}/steps",
                    json={
                        "seq": seq,
                        "name": name,
                        "kind": kind,
                        "status": "committed",
                        "input": {"ticket": f"T-{n}", "amount": "42.00"},
                        "output": {"ok": True},
                        "idempotency_key": f"T-{n}:{name}" if kind == "effect" else None,
                    },
                ).raise_for_status()
            if n:  # workflow 0 stays running: the step reports go there
                session.post(
                    f"{self.url}/api/v1/workflows/{wid}/checkpoints",
                    json={"reason": "model_timeout", "detail": "the model timed out", "at_seq": 3, "state": {}},
                ).raise_for_status()
            return str(wid)

        with ThreadPoolExecutor(4) as pool:
            self.running = list(pool.map(one, range(workflows)))[0]
        self.next_seq = 4

    def cpu_ms(self) -> float:
        """User + system CPU time so far of the server's processes (gunicorn's master and its worker), in ms."""
        assert self.server is not None
        pids = [self.server.pid]
        children = Path(f"/proc/{self.server.pid}/task/{self.server.pid}/children")
        pids += [int(pid) for pid in children.read_text().split()]
        ticks = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
        return ticks * 1000 / os.sysconf("SC_CLK_TCK")

    def queue_page(self) -> float:
        start = time.perf_counter()
        response = self.operator.get(f"{self.url}/?per=50")
        elapsed = (time.perf_counter() - start) * 1000
        assert response.status_code == 200 and "T-1" in response.text, (self.label, response.status_code)
        return elapsed

    def step_report(self, rng: random.Random) -> float:
        body: dict[str, Any] = {
            "seq": self.next_seq,
            "name": "note",
            "kind": "tool",
            "status": "committed",
            "input": {"text": "x" * rng.randrange(50, 250)},
            "output": {"ok": True},
        }
        self.next_seq += 1
        start = time.perf_counter()
        response = self.agent.post(f"{self.url}/api/v1/workflows/{self.running}/steps", json=body)
        elapsed = (time.perf_counter() - start) * 1000
        assert response.status_code == 201, (self.label, response.status_code, response.text[:200])
        return elapsed

    def stop(self) -> None:
        if self.server and self.server.poll() is None:
            self.server.terminate()
            self.server.wait(20)
        database(os.environ["DATABASE_URL"], self.label, drop_only=True)


def summary(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="05ffc70^", help="the earlier version (default: before issue 12)")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--workflows", type=int, default=300, help="workflows seeded in each version")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=30, help="of each kind, per version and round")
    parser.add_argument("--port", type=int, default=8790, help="base serves here, head on the next port")
    args = parser.parse_args()
    print(f"seed {SEED}", flush=True)
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="rc-vbench-") as workdir:
        versions = [
            Version("base", args.base, args.port, 12, Path(workdir)),
            Version("head", args.head, args.port + 1, 13, Path(workdir)),
        ]
        try:
            for version in versions:
                version.start()
                began = time.monotonic()
                version.seed(args.workflows)
                print(
                    f"{version.label} = {version.rev} ({version.commit}): seeded {args.workflows} workflows "
                    f"in {time.monotonic() - began:.0f} s",
                    flush=True,
                )
            figures: dict[tuple[str, str], list[float]] = {}
            cpu: dict[tuple[str, str], float] = {}
            for round_ in range(args.rounds):
                for version in versions if round_ % 2 == 0 else versions[::-1]:
                    for _ in range(3):  # warm the connection and the caches, unmeasured
                        version.queue_page()
                        version.step_report(rng)
                    began_cpu = version.cpu_ms()
                    figures.setdefault(("queue", version.label), []).extend(
                        version.queue_page() for _ in range(args.requests)
                    )
                    middle_cpu = version.cpu_ms()
                    figures.setdefault(("step", version.label), []).extend(
                        version.step_report(rng) for _ in range(args.requests)
                    )
                    cpu[("queue", version.label)] = cpu.get(("queue", version.label), 0.0) + middle_cpu - began_cpu
                    cpu[("step", version.label)] = cpu.get(("step", version.label), 0.0) + version.cpu_ms() - middle_cpu
        finally:
            for version in versions:
                version.stop()
    print(f"\n{'what':<40} {'base p50':>9} {'head p50':>9} {'head/base':>9} {'base p95':>9} {'head p95':>9}")
    for what, title in (("queue", "queue first page (50 of the open rows)"), ("step", "agent API: POST a new step")):
        base50, base95 = summary(figures[(what, "base")])
        head50, head95 = summary(figures[(what, "head")])
        print(f"{title:<40} {base50:>9.1f} {head50:>9.1f} {head50 / base50:>8.2f}x {base95:>9.1f} {head95:>9.1f}")
    print(f"({args.rounds} rounds x {args.requests} requests of each kind per version, alternating; ms)")
    measured = args.rounds * args.requests
    print(f"\n{'server CPU per request (ms)':<40} {'base':>9} {'head':>9} {'head/base':>9}")
    for what, title in (("queue", "queue first page (50 of the open rows)"), ("step", "agent API: POST a new step")):
        base_cpu, head_cpu = cpu[(what, "base")] / measured, cpu[(what, "head")] / measured
        print(f"{title:<40} {base_cpu:>9.2f} {head_cpu:>9.2f} {head_cpu / base_cpu:>8.2f}x")


if __name__ == "__main__":
    main()
