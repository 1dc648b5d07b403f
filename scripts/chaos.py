"""The demo fleet under chaos: faults at every step, processes killed at random, operators working the queue.

    make chaos                                        # 1,000 workflows
    make chaos CHAOS_ARGS="--workflows 200 --seed 7"  # or: .venv/bin/python scripts/chaos.py --help

What runs: a fresh PostgreSQL database (``DATABASE_URL``, default
``postgres://postgres@127.0.0.1:5432/recovery_chaos``, dropped and created
again, so its name must contain "chaos"), a flushed Redis database
(``CELERY_BROKER_URL``, default ``redis://127.0.0.1:6379/7``: FLUSHDB, so never
point it at a broker in use), a fresh VAR_DIR, ``migrate`` and ``seed_demo``;
then real processes: gunicorn (2 workers), two Celery workers (prefork), beat,
the outbox relay and the demo fleet (``run_demo_fleet --total N``: simulated
agents doing the worked example through the real HTTP API, with faults
injected at every step boundary: model timeouts, garbage tool output, rate
limits, effects whose outcome is unknown because the call timed out before or
after it committed). A killer SIGKILLs, at random intervals and in shuffled
rounds, a Celery worker, the web server or the fleet itself (the agent process
killed mid-step), each with its whole process group, and starts it again.
Scripted operators log in over HTTP and work the queue through the same forms
a person uses: claim, confirm every unknown effect from what the simulated
systems really recorded (the ledgers: executed -> "happened" with its
reference, not executed -> "did not happen"), then mostly resume, sometimes
retry the step or hand off to another operator, rarely abort; a second
operator approves four-eyes proposals from the queue's Awaiting approval tab (the money
runbooks require them here; the tab never lists an operator's own proposals).
The hard profile (``--hard``; each fault also has a flag of its own) takes down
what sits under the stack too, in the same shuffled kill rounds: a private
Redis (broker and cache) SIGKILLed and started again empty, so queued Celery
messages vanish and the outbox must send them again; the run's PostgreSQL
database refusing new sessions with every open one cut, as in a restart (only
that database: ``ALLOW_CONNECTIONS`` and ``pg_terminate_backend``, never the
shared cluster); deliveries crossing a seeded slow and lossy proxy
(``workflows.demo.netfaults``) that delays every connection and cuts answers
mid-response or never answers, after the agent acted; and the second worker's
clock five minutes ahead (``scripts/skewed_clock.py``); then a second, shorter run on
the embedded default's broker (kombu's filesystem transport, its folder a small
tmpfs, so root) whose folder is filled to the last byte in the kill rounds and
given room again (``--disk-pressure``). Its extra targets: every
step report the console answered 2xx is still stored (the fleet journals each
acknowledgement), no record is stamped ahead of the database's clock, and no
delivery lease is longer than configured; while the broker's disk is full and a
decision is refused, the queue page says so (with how many decisions wait) and
says nothing once there is room again; a table names each fault, how often it
was injected, its target and whether it held.
When the fleet has launched N workflows the killer stops and the run drains:
until every workflow is terminal, bounded by ``--timeout``. Then it prints
the report and exits 1 when a target is missed.

The figures are the resume dashboard's, from ``workflows.metrics`` (its
docstring and the README define each one) over the whole run as one period;
the run prints the dashboard's four headline shares too. Its targets:

- **reached a checkpoint** (target 100 %): the "preserved a user-visible
  checkpoint" share: degraded workflows with no blank-state failure.
- **blank state** (target none): a blank-state failure (reported failed while
  running); at the end, a workflow that is neither terminal nor paused at an
  unresolved checkpoint; a workflow the fleet launched (its journal says so)
  that the console does not know. Listed by id.
- **resumed and completed cleanly** (target 100 %): of the resumed workflows
  (an operator's later handoff or abort aside), the share "resumed without
  data loss" counts: completed, no duplicate-effect attempt, no lost effect.
- **same owner** (target 100 %): of those resumed workflows, the ones whose
  owner did not change (the dashboard also counts handoffs, where an
  operator chose another owner).
- **ledger cross-check** (target none): what the console recorded, checked
  against what the simulated systems really did: an idempotency key they
  executed more than once (they never dedupe); an effect committed in the
  console with no execution or with a reference they never issued; an effect
  an operator confirmed as happened that has no execution; an effect of a
  completed workflow's plan that never executed.
- **acted on twice** (target none): a delivery an agent's resume endpoint
  acted on more than once, however often the console (or the lossy proxy's
  cut answers) made it send the decision again; the demo runtime journals
  each act apart from the dedupe that allows it. The demo agent would not
  execute an effect twice even then (it works from the console's record of
  what committed), so the ledgers alone would not show a broken dedupe.
- **decisions lost** (target 0): decisions an operator was answered 302
  (recorded) for that are not in the database, plus decisions not finished
  (queued or running) after the drain.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import io
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console import watchdog  # noqa: E402 - no Django needed: the mark its exits carry

BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/recovery_chaos"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/7"
KILL_TARGETS = ("worker", "web", "fleet")
HARD_TARGETS = ("redis", "postgres")  # the stores under the stack: with --kill-redis and --kill-postgres
OBSERVER = "chaos-observer"  # this script's own database sessions: never cut, the figures are read through them
HARD_CLOCK_SKEW = 300.0
# --lossy-network: every delivery waits 50-400 ms; one in eight is cut mid-answer and one in ten never answered
# (the console gives up after DELIVERY_TIMEOUT_SECONDS) -- both after the agent received and acted on it.
NETWORK = {"latency": (0.05, 0.4), "drop_mid_response": 0.12, "black_hole": 0.10, "hold_seconds": 30.0}
APPROVE_FORM = re.compile(r'action="/decisions/(\d+)/approve/"')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflows", type=int, default=1000, help="Workflows the fleet launches in all.")
    parser.add_argument("--seed", type=int, default=None, help="Seed faults, kills and operator choices.")
    parser.add_argument("--kill-interval", type=float, default=6.0,
                        help="Mean seconds between two kills (0: no kills).")
    parser.add_argument("--kill-rounds", type=int, default=0,
                        help="Keep killing until this many rounds (each kind once, shuffled) are done, even when "
                             "every workflow is launched: a short run still kills each kind that often.")
    parser.add_argument("--timeout", type=float, default=1200.0,
                        help="Deadline of the whole run in seconds, drain included.")
    parser.add_argument("--drain", type=float, default=0.0,
                        help="The drain gets at least this many seconds after the last launch, even past "
                             "--timeout: on a slow machine the launches take longer, not the settling.")
    parser.add_argument("--operators", type=int, default=2, help="Scripted operators working the queue.")
    parser.add_argument("--fault-rate", type=float, default=0.7, help="Probability that a workflow hits a fault.")
    parser.add_argument("--interval", type=float, default=0.9,
                        help="Mean seconds between two launches of one agent (three agents).")
    parser.add_argument("--step-delay", type=float, default=0.1, help="Mean seconds an agent spends on a step.")
    parser.add_argument("--silence", type=int, default=15,
                        help="AGENT_SILENCE_SECONDS: a killed agent's workflows are paused after this.")
    parser.add_argument("--think", type=float, default=0.6,
                        help="Mean seconds an operator reads a checkpoint before deciding.")
    parser.add_argument("--delivery-attempts", type=int, default=4,
                        help="DELIVERY_MAX_ATTEMPTS: few enough that a delivery to a killed fleet sometimes fails "
                             "and its checkpoint goes back to the queue.")
    hard = parser.add_argument_group(
        "hard faults", "The stores and the network under the stack fail too. --hard turns every one on; "
                       "each flag also works alone, and --no-<flag> leaves one out of --hard.")
    hard.add_argument("--hard", action="store_true", help="The hard profile: every fault below.")
    hard.add_argument("--kill-redis", action=argparse.BooleanOptionalAction, default=None,
                      help="Run a private Redis (broker and cache) and SIGKILL it in the kill rounds; it comes "
                           "back EMPTY: queued Celery messages are gone and the outbox must send them again.")
    hard.add_argument("--kill-postgres", action=argparse.BooleanOptionalAction, default=None,
                      help="In the kill rounds, PostgreSQL goes away for the run's database: new connections "
                           "refused (ALLOW_CONNECTIONS false) and every session cut (pg_terminate_backend) for "
                           "the outage, as in a restart; never the shared cluster itself.")
    hard.add_argument("--lossy-network", action=argparse.BooleanOptionalAction, default=None,
                      help="Deliveries cross a slow, lossy proxy to the agents: latency, connections dropped "
                           "mid-response and black holes, after the agent acted.")
    hard.add_argument("--clock-skew", type=float, default=None, metavar="SECONDS",
                      help=f"One Celery worker's clock runs this far ahead (--hard: {HARD_CLOCK_SKEW:g}).")
    hard.add_argument("--disk-pressure", action=argparse.BooleanOptionalAction, default=None,
                      help="After the run, a shorter one on the embedded default's broker (the filesystem "
                           "transport) in a small tmpfs folder (needs root to mount it) that the kill rounds fill "
                           "to the last byte and free again: the console must say so and lose nothing.")
    hard.add_argument("--disk-workflows", type=int, default=None,
                      help="Workflows of the disk-pressure run (default: a tenth of --workflows, 20 to 300).")
    hard.add_argument("--filesystem-broker", action="store_true",
                      help="Run on the filesystem broker in a tmpfs folder, no Redis (the disk-pressure run is one; "
                           "with --disk-pressure, this run's own kill rounds fill its disk).")
    parser.add_argument("--rss-interval", type=float, default=30.0,
                        help="Seconds between two samples of each process's resident memory (the soak's figure: "
                             "every process that lived 10 minutes must stay within 10 %% of its RSS after 2).")
    parser.add_argument("--var-dir", default=None, help="VAR_DIR for this run (default: a fresh temp dir).")
    parser.add_argument("--json", dest="json_path", default=None, help="Also write the figures to this file.")
    args = parser.parse_args(argv)
    if args.workflows < 1 or args.operators < 1:
        parser.error("--workflows and --operators must be at least 1")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    for flag in ("kill_redis", "kill_postgres", "lossy_network", "disk_pressure"):
        if getattr(args, flag) is None:
            setattr(args, flag, args.hard)
    if args.filesystem_broker and args.kill_redis:
        parser.error("--filesystem-broker runs without Redis: add --no-kill-redis")
    if args.disk_workflows is None:
        args.disk_workflows = min(300, max(20, args.workflows // 10))
    if args.clock_skew is None:
        args.clock_skew = HARD_CLOCK_SKEW if args.hard else 0.0
    return args


def kill_targets(args: argparse.Namespace) -> tuple[str, ...]:
    disk = ("disk",) if args.filesystem_broker and args.disk_pressure else ()
    return KILL_TARGETS + tuple(t for t in HARD_TARGETS if getattr(args, f"kill_{t}")) + disk


def say(message: str) -> None:
    print(message, flush=True)


# --- a fresh world -------------------------------------------------------------------------

def database_name(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    name = parts.path.lstrip("/")
    if not parts.scheme.startswith("postgres") or not name:
        raise SystemExit(f"DATABASE_URL must be a postgres://…/<name> URL, not {url!r}")
    if "chaos" not in name:  # it is dropped: never the console's own database by mistake
        raise SystemExit(f"refusing to drop the database {name!r}: the chaos run drops and creates its database, "
                         "so its name must contain 'chaos' (e.g. recovery_chaos)")
    return name


def recreate_database(url: str, *, create: bool = True) -> None:
    """Drop the run's database (its name checked by ``database_name``) and, unless told not to, create it."""
    import psycopg
    from psycopg import sql

    name = database_name(url)
    parts = urllib.parse.urlsplit(url)
    maintenance = urllib.parse.urlunsplit(parts._replace(scheme="postgresql", path="/postgres", query=""))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def flush_broker(url: str) -> None:
    import redis

    if not url.startswith("redis://"):
        raise SystemExit(f"CELERY_BROKER_URL must be a redis:// URL, not {url!r}")
    client = redis.Redis.from_url(url, socket_timeout=5)
    client.flushdb()
    client.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class World:
    args: argparse.Namespace
    var_dir: Path
    web_port: int
    fleet_port: int
    env: dict[str, str]
    users: dict[str, str]  # operator username -> password
    redis: PrivateRedis | None = None  # --kill-redis: the broker and cache this script owns and kills
    disk: FullDisk | None = None  # --filesystem-broker: the broker folder's tmpfs, filled by --disk-pressure
    proxy: Any = None  # --lossy-network: the LossyProxy the deliveries cross

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


def next_database(redis_url: str) -> str:
    """redis://host:port/7 -> redis://host:port/8 (database 0 when the URL names none)."""
    parts = urllib.parse.urlsplit(redis_url)
    number = int(parts.path.strip("/") or 0)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{number + 1}"))


class PrivateRedis:
    """A Redis of this run's own, keeping nothing on disk: SIGKILLed, it comes back empty."""

    name = "redis"

    def __init__(self, rng: random.Random) -> None:
        self.port = free_port()
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.lost_messages = 0  # Celery messages in its queues when it was killed
        self.rng = rng

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        import redis

        self.starts += 1
        self.popen = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",  # noqa: S607
                                       "--save", "", "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline or self.popen.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.1)

    def kill(self) -> None:
        import redis

        with suppress(redis.RedisError):  # what is lost with it: the messages waiting in its queues
            client = redis.Redis(port=self.port, socket_timeout=1)
            # Waiting in the queue, and taken by a worker but not yet acknowledged (kombu's "unacked" hash).
            self.lost_messages += int(client.llen("chaos")) + int(client.hlen("unacked"))
        if self.popen is not None:
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def stop(self) -> None:
        self.kill()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class PostgresOutage:
    """The run's database goes away as in a restart: new sessions refused, every session cut; then back.

    Only the run's own database: ``ALLOW_CONNECTIONS false`` and ``pg_terminate_backend`` on its sessions, never
    a restart of a cluster that others share. This script's own sessions (``OBSERVER``) are spared: the operators
    and the figures read through them.
    """

    name = "postgres"

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.database = database_name(url)
        self.maintenance = urllib.parse.urlunsplit(parts._replace(scheme="postgresql", path="/postgres", query=""))
        self.outages = 0
        self.sessions_cut = 0

    def allow(self, allowed: bool) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.maintenance, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
                sql.Identifier(self.database), sql.SQL("true" if allowed else "false")))
            if not allowed:
                cut = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                    "AND pid <> pg_backend_pid() AND application_name <> %s", (self.database, OBSERVER)).fetchall()
                self.sessions_cut += len(cut)

    def kill(self) -> None:
        self.outages += 1
        self.allow(False)

    def start(self) -> None:
        self.allow(True)

    def stop(self) -> None:
        self.allow(True)


BROKER_DISK_BYTES = 8 * 2**20  # the tmpfs under the filesystem broker: small, so filling it is quick
BANNER = "Decisions are not reaching the workers."  # templates/base.html, on every page while the broker refuses


class FullDisk:
    """The embedded default's broker folder, a tmpfs of its own, filled to the last byte; then room again.

    A kill fills it; ``hold`` keeps it full until the console has refused a decision on it (or a while
    passed) and a few seconds more, and meanwhile reads the queue page the way an operator would: a refusal must
    be said there, with the folder out of space. ``start`` deletes the filler.
    """

    name = "disk"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.filler = folder / "chaos-filler"
        self.fills = 0
        self.refused = 0  # fills during which the console refused a decision (BrokerStatus failing)
        self.said = 0  # of those, the fills the queue page said so on
        self.unsaid: list[str] = []  # what the queue page showed instead
        self.refused_before: Any = None
        self.page_at_end = ""  # the queue page once the run drained
        self.reader: Browser | None = None
        self.login: tuple[str, str] = ("", "")
        self.base_url = ""

    def mount(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={BROKER_DISK_BYTES}", "tmpfs",  # noqa: S607
                                  str(self.folder)], capture_output=True, text=True)
        if mounted.returncode != 0:
            raise SystemExit(f"--disk-pressure fills a tmpfs mounted on the broker folder, and mounting one needs "
                             f"root: {mounted.stderr.strip()} (leave it out with --no-disk-pressure)")
        for sub in ("out", "processed", "control"):  # what the settings make, under the mount
            (self.folder / sub).mkdir()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.folder)], check=False, capture_output=True)  # noqa: S607

    @staticmethod
    def last_refusal() -> Any:
        from workflows.models import BrokerStatus

        return BrokerStatus.objects.values_list("last_failure_at", flat=True).first()

    def kill(self) -> None:
        self.fills += 1
        self.refused_before = self.last_refusal()
        self.top_up()

    def top_up(self) -> None:
        """Write the filler until not one byte is left (a worker taking a message frees its bytes)."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for chunk in (65536, 512):  # the last few bytes too, so not even a small message fits
                with suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * chunk)
        finally:
            os.close(fd)

    def hold(self, rng: random.Random) -> None:
        """Full until the console refuses a decision on it, then 2-8 s more; a refusal must be said on the
        queue page while the console still refuses (a page read after it took one again proves nothing: read
        again). Until one fill has been refused, a fill waits up to 60 s for a decision; later ones 10 s."""
        from workflows.models import BrokerStatus

        wait = 10.0 if self.refused else 60.0
        deadline, refused, said, shown = time.monotonic() + wait, False, False, ""
        while time.monotonic() < deadline and not said:
            self.top_up()
            if BrokerStatus.failing() is not None and self.last_refusal() != self.refused_before:
                refused = True
                page = self.queue_page()
                said = BANNER in page and "is out of disk space" in page and "decision" in page
                if not said and BrokerStatus.failing() is not None:
                    shown = page
                    break
            time.sleep(0.5)
        if refused:
            self.refused += 1
            self.said += said
            if not said:
                self.unsaid.append(f"fill {self.fills}: {snippet(shown)[:200] or 'no page'}")
        until = time.monotonic() + rng.uniform(2.0, 8.0)
        while time.monotonic() < until:
            self.top_up()
            time.sleep(0.5)

    def queue_page(self) -> str:
        """The queue as an operator sees it, tried for a while: the web server may be restarting."""
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            try:
                if self.reader is None:
                    self.reader = Browser(self.base_url)
                    self.reader.login(*self.login)
                answer = self.reader.request("GET", "/")
                if answer.status == 200:
                    return " ".join(answer.body.split())
                self.reader = None  # logged out (a restart does not do that, but a person would log in again)
            except (Down, RuntimeError):
                self.reader = None
            time.sleep(1.0)
        return ""

    def start(self) -> None:
        self.filler.unlink(missing_ok=True)

    def stop(self) -> None:
        self.start()

    def alive(self) -> bool:
        return True


def observed(url: str) -> str:
    """The database URL with this script's sessions named, so an outage spares them."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), ("application_name", OBSERVER)])
    return urllib.parse.urlunsplit(parts._replace(query=query))


def prepare(args: argparse.Namespace) -> World:
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    broker_url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER_URL
    database_name(database_url)  # checked before anything is flushed
    recreate_database(database_url)
    private_redis = disk = None
    args.given = {key: os.environ[key] for key in ("CELERY_BROKER_URL", "CACHE_URL") if key in os.environ}
    var_dir = Path(args.var_dir or tempfile.mkdtemp(prefix="rc-chaos-")).resolve()
    if var_dir.exists() and any(var_dir.iterdir()):  # an earlier run's journal would count as this run's launches
        raise SystemExit(f"--var-dir {var_dir} holds an earlier run's files: give a new or empty folder")
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "logs").mkdir(exist_ok=True)
    if args.filesystem_broker:  # the embedded default's broker, in a folder whose disk this run may fill
        disk = FullDisk(var_dir / "broker")
        disk.mount()
        # The web workers share a cache, Redis (CACHE_URL, or the database after CELERY_BROKER_URL's): no broker.
        cache_url = os.environ.get("CACHE_URL") or next_database(broker_url)
        broker_url = "filesystem://"
    else:
        if args.kill_redis:  # a Redis this run may kill: never the one CELERY_BROKER_URL names
            private_redis = PrivateRedis(random.Random(args.seed))
            private_redis.start()
            broker_url = private_redis.url
        flush_broker(broker_url)
        # Two gunicorn workers need a shared cache (the console refuses to start without one): the
        # broker's Redis, the next database number, unless CACHE_URL names one.
        cache_url = next_database(broker_url) if private_redis else (os.environ.get("CACHE_URL")
                                                                      or next_database(broker_url))
    env = {
        "DJANGO_SETTINGS_MODULE": "console.settings", "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url, "CELERY_QUEUE": "chaos", "VAR_DIR": str(var_dir),
        "CACHE_URL": cache_url,
        "SECRET_KEY": secrets.token_urlsafe(40), "DEBUG": "false", "MANIFEST_STATIC": "false",
        "SECURE_COOKIES": "false", "ALLOWED_HOSTS": "127.0.0.1", "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO",
        "PYTHONPATH": str(ROOT),  # every process imports this tree, whatever else is on the path
        # Short clocks, so a killed agent's workflows reach the queue and stuck deliveries come back quickly.
        "AGENT_SILENCE_SECONDS": str(args.silence), "DELIVERY_LEASE_SECONDS": "10",
        "SWEEP_INTERVAL_SECONDS": "1", "DELIVERY_BACKOFF_SECONDS": "0.5",
        "DELIVERY_MAX_ATTEMPTS": str(args.delivery_attempts),
        "DELIVERY_TIMEOUT_SECONDS": "5",
        # A worker whose Celery consumer stalls after a Redis kill exits within this and is started again.
        "WORKER_WATCHDOG_SECONDS": "30",
        # The faults under test are the simulated systems' rate limits, not the console's own.
        "API_RATE_LIMIT_PER_MINUTE": "0",
        # The demo fleet listens on loopback over plain http: allow exactly that for deliveries.
        "DELIVERY_ALLOWED_NETWORKS": "127.0.0.1/32", "DELIVERY_REQUIRE_HTTPS": "false",
    }
    os.environ.update({**env, "DATABASE_URL": observed(database_url)})
    import django

    django.setup()
    from django.core.management import call_command

    world = World(args=args, var_dir=var_dir, web_port=free_port(), fleet_port=free_port(),
                  env={**os.environ, **env}, users={}, redis=private_redis, disk=disk)
    resume_port = world.fleet_port
    if args.lossy_network:  # the agents' resume endpoints, as the console knows them, are behind the proxy
        from workflows.demo.netfaults import LossyProxy

        world.proxy = LossyProxy(world.fleet_port, rng=random.Random(f"{args.seed}-network"), **NETWORK).start()
        resume_port = world.proxy.port
    call_command("migrate", verbosity=0)
    call_command("seed_demo", port=world.web_port, fleet_port=resume_port, stdout=io.StringIO())
    world.users = configure(args, var_dir)
    if disk is not None:
        disk.base_url, disk.login = world.console_url, ("operator", world.users["operator"])
    return world


def configure(args: argparse.Namespace, var_dir: Path) -> dict[str, str]:
    """What an admin would set for this run: the global silence limit, operators, four eyes on money."""
    from django.contrib.auth import get_user_model

    from console.roles import set_role
    from workflows.models import Agent, Runbook

    Agent.objects.update(silence_seconds=None)  # seed_demo's 300 s would outlast the run's clocks
    users = {"operator": json.loads((var_dir / "demo" / "users.json").read_text())["operator"]}
    for n in range(2, args.operators + 1):
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.create_user(f"operator{n}", password=password)
        set_role(user, "operator")
        users[user.username] = password
    if args.operators > 1:  # someone must be there to approve
        for runbook in Runbook.objects.filter(slug__in=["refund-unknown-refund", "billing-unknown-credit"]):
            runbook.requires_four_eyes = True
            runbook.save()  # a save, not an update(): the checkpoints follow the runbook's new version
    return users


# --- processes -------------------------------------------------------------------------------

class Service:
    """One process of the stack, in its own process group: started, killed whole, started again."""

    def __init__(self, name: str, argv: list[str], world: World, ready: Callable[[Service], bool]) -> None:
        self.name, self.argv, self.world, self.ready = name, argv, world, ready
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.log_path = world.var_dir / "logs" / f"{name}.log"

    def start(self, timeout: float = 90.0) -> None:
        self.starts += 1
        self.log_path = self.world.var_dir / "logs" / f"{self.name}-{self.starts}.log"
        argv = [arg.format(start=self.starts) for arg in self.argv]  # "{start}": which start this is
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(argv, cwd=ROOT, env=self.world.env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.ready(self):
            if not self.alive():
                raise RuntimeError(f"{self.name} died on start:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s:\n{self.output()[-3000:]}")
            time.sleep(0.2)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole group: a killed worker takes its pool children with it, gunicorn its workers."""
        if self.popen is None:
            return
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)
        if sig == signal.SIGKILL:
            self.popen.wait()

    def stop(self, timeout: float = 15.0) -> None:
        if self.alive():
            self.kill(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        self.kill(signal.SIGKILL)


def printed(text: str) -> Callable[[Service], bool]:
    return lambda service: text in service.output()


def answers_health(service: Service) -> bool:
    try:
        with urllib.request.urlopen(f"{service.world.console_url}/healthz", timeout=2) as response:  # noqa: S310
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def services(world: World) -> dict[str, Service]:
    args, python, manage = world.args, str(BIN / "python"), str(ROOT / "manage.py")
    stack = {
        "web": Service("web", [str(BIN / "gunicorn"), "console.wsgi", "-b", f"127.0.0.1:{world.web_port}",
                               "-w", "2", "-k", "gthread", "--threads", "4", "--timeout", "30"],
                       world, answers_health),
        "beat": Service("beat", [str(BIN / "celery"), "-A", "console", "beat", "--loglevel=INFO"],
                        world, printed("beat: Starting")),
        "relay": Service("relay", [python, manage, "run_relay", "--interval", "1"], world, printed("outbox relay")),
        "fleet": Service("fleet", [
            python, manage, "run_demo_fleet", "--console", world.console_url, "--port", str(world.fleet_port),
            "--agents", "3", "--interval", str(args.interval), "--max-open", "100000",
            "--seed", f"{args.seed}{{start}}",  # a restarted fleet does not replay the same faults
            "--fault-rate", str(args.fault_rate), "--step-delay", str(args.step_delay),
            "--total", str(args.workflows), "--poll-interval", "0.5", "--reconcile-interval", "2"],
            world, printed("demo fleet:")),
    }
    for n in (1, 2):
        # --clock-skew: the second worker's clock runs ahead (time-machine in that process and its pool).
        skewed = [python, str(ROOT / "scripts" / "skewed_clock.py"), f"{args.clock_skew:g}"] \
            if n == 2 and args.clock_skew else []
        stack[f"worker{n}"] = Service(f"worker{n}", [
            *skewed, str(BIN / "celery"), "-A", "console", "worker", "-P", "prefork", "-c", "2",
            "-n", f"chaos{n}@%h", "-Q", "chaos", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel=INFO"], world, printed("ready."))
    return stack


def fault_targets(world: World) -> dict[str, Any]:
    """What the killer may also take down, besides the stack's processes."""
    targets: dict[str, Any] = {}
    if world.redis is not None:
        targets["redis"] = world.redis
    if world.args.kill_postgres:
        targets["postgres"] = PostgresOutage(world.env["DATABASE_URL"])
    if world.disk is not None and world.args.disk_pressure:
        targets["disk"] = world.disk
    return targets


def group_rss(pgid: int) -> int:
    """Resident memory of every process in a process group, in bytes (a gunicorn or a worker with its pool)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == pgid:
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24 of stat: rss, in pages
    return total


class MemorySampler(threading.Thread):
    """Every ``interval`` seconds, the RSS of each process of the stack (each start of it apart)."""

    def __init__(self, stack: dict[str, Any], interval: float) -> None:
        super().__init__(name="rss", daemon=True)
        self.stack, self.interval = stack, interval
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.samples: dict[str, list[tuple[float, int]]] = {}  # "worker1#3" (name#start) -> [(seconds, bytes)]

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        now = time.monotonic() - self.started
        for name, service in self.stack.items():
            popen = getattr(service, "popen", None)
            if popen is None or popen.poll() is not None:
                continue
            rss = group_rss(popen.pid)
            if rss:
                self.samples.setdefault(f"{name}#{service.starts}", []).append((now, rss))

    def report(self, warmup: float = 120.0, lived: float = 600.0) -> list[dict[str, Any]]:
        """Per process that lived at least ``lived`` s: RSS after ``warmup`` s against its last sample."""
        rows = []
        for key, series in sorted(self.samples.items()):
            born = series[0][0]
            settled = [(t, rss) for t, rss in series if t - born >= warmup]
            if len(settled) < 2 or series[-1][0] - born < lived:
                continue
            first, last = settled[0][1], settled[-1][1]
            rows.append({"process": key, "minutes": round((series[-1][0] - born) / 60, 1),
                         "rss_after_warmup_mb": round(first / 2**20, 1), "rss_at_end_mb": round(last / 2**20, 1),
                         "growth_pct": round(100.0 * (last - first) / first, 1)})
        return rows


class Killer(threading.Thread):
    """SIGKILL a worker, the web server or the fleet at random intervals; start it again at once."""

    def __init__(self, stack: dict[str, Any], interval: float, rng: random.Random,
                 targets: tuple[str, ...] = KILL_TARGETS, first: str | None = None) -> None:
        super().__init__(name="killer", daemon=True)
        self.stack, self.interval, self.rng, self.targets = stack, interval, rng, targets
        self.first = first  # the first kill of the run, while work flows (the disk run's fill)
        self.stop = threading.Event()
        self.kills: Counter[str] = Counter()
        self.rounds = 0  # complete rounds: every kind killed once more
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.down: set[str] = set()  # what the killer took down and has not started again yet

    def run(self) -> None:
        rounds: list[str] = []
        while not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.interval):
            if not rounds:  # shuffled rounds: every kind gets killed, in no fixed order
                rounds = self.rng.sample(self.targets, len(self.targets))
                if self.first in rounds and not self.kills:
                    rounds.remove(self.first)
                    rounds.append(self.first)  # popped first
            target = rounds.pop()
            self.rounds += not rounds
            name = self.rng.choice(["worker1", "worker2"]) if target == "worker" else target
            service = self.stack[name]
            with self.lock:
                self.down.add(name)  # the supervisor leaves it alone: it is down on purpose
            service.kill()
            self.kills[target] += 1
            # Down for a moment, sometimes for longer than a delivery's retries last; then back, even when stopping.
            if hasattr(service, "hold"):  # a full disk stays full until the console has said so
                service.hold(self.rng)
            else:
                time.sleep(self.rng.uniform(5.0, 12.0) if self.rng.random() < 0.25 else self.rng.uniform(0.2, 2.0))
            self.restart(service)
            with self.lock:
                self.down.discard(name)

    def restart(self, service: Any) -> None:
        for attempt in range(5):
            try:
                service.start()
                return
            except RuntimeError as exc:  # reported: a stack that cannot come back is a failed run
                self.errors.append(str(exc)[-500:])
                say(f"  ! restart {attempt + 1} of {service.name} failed: {str(exc)[-300:]}")
                service.kill()
                time.sleep(2)


class Supervisor(threading.Thread):
    """What systemd or docker compose's ``restart: unless-stopped`` does in production: a process of the stack
    that exits by itself is started again. Each such exit is counted and reported with its last error line,
    never hidden: the killer's kills are on purpose, these are findings."""

    def __init__(self, stack: dict[str, Any], killer: Killer) -> None:
        super().__init__(name="supervisor", daemon=True)
        self.stack, self.killer = stack, killer
        self.stop = threading.Event()
        self.exits: list[str] = []  # "worker1: <last error line>"
        self.watchdog: list[str] = []  # workers that left on their consumer watchdog (console/watchdog.py)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for name, service in self.stack.items():
                if not isinstance(service, Service) or service.popen is None or self.stop.is_set():
                    continue
                with self.killer.lock:
                    if name in self.killer.down or service.alive():
                        continue
                    self.killer.down.add(name)
                output = service.output()
                if watchdog.MARK in output:  # not a crash: the worker saw its consumer stall and left to be restarted
                    self.watchdog.append(name)
                    say(f"  ~ {name}: its Celery consumer stalled beside queued messages; it left on its watchdog "
                        "and was started again")
                else:
                    self.report_exit(name, service, output)
                self.killer.restart(service)
                with self.killer.lock:
                    self.killer.down.discard(name)

    def report_exit(self, name: str, service: Service, output: str) -> None:
        """A crash: counted, and reported with the last error line the process printed."""
        errors = [line for line in output.splitlines() if "Error" in line or "CRITICAL" in line]
        self.exits.append(f"{name}: {(errors[-1] if errors else 'no error printed').strip()[:300]}")
        say(f"  ! {name} exited by itself (code {service.popen.returncode}); started again, as a supervisor "
            f"would: {self.exits[-1]}")


# --- the operators -----------------------------------------------------------------------------

class Down(Exception):
    """The console did not answer (killed mid-request, restarting): try again shortly."""


@dataclass
class Answer:
    status: int
    location: str
    body: str


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a person sees where the 302 points; so do we


class Browser:
    """A person's browser: cookies (session, CSRF), forms posted as forms, redirects not followed."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, method: str, path: str, fields: dict | None = None) -> Answer:
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)  # noqa: S310
        try:
            with self.opener.open(request, timeout=20) as response:
                return Answer(response.status, response.headers.get("Location", ""),
                              response.read().decode(errors="replace"))
        except urllib.error.HTTPError as exc:
            answer = Answer(exc.code, exc.headers.get("Location", ""), exc.read().decode(errors="replace"))
            if answer.status >= 500:
                raise Down(f"{method} {path}: {answer.status}") from None
            return answer
        except (urllib.error.URLError, OSError, ConnectionError, TimeoutError) as exc:
            raise Down(f"{method} {path}: {exc}") from None

    def csrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def login(self, username: str, password: str) -> None:
        self.request("GET", "/login/")
        answer = self.request("POST", "/login/", {"username": username, "password": password,
                                                  "csrfmiddlewaretoken": self.csrf()})
        if answer.status != 302:
            raise RuntimeError(f"login of {username} failed: {answer.status}")

    def post(self, path: str, fields: dict) -> Answer:
        return self.request("POST", path, {**fields, "csrfmiddlewaretoken": self.csrf()})


@dataclass
class Logbook:
    """What the operators saw and did, for the report."""

    acknowledged: list[tuple[int, str, str]] = field(default_factory=list)  # (checkpoint, operator, action)
    counts: Counter[str] = field(default_factory=Counter)
    invalid: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    long_leases: set[int] = field(default_factory=set)  # decisions seen with a lease longer than configured
    memory: list[dict[str, Any]] = field(default_factory=list)  # MemorySampler.report() of the run
    exits: list[str] = field(default_factory=list)  # processes that exited by themselves (Supervisor)
    watchdog: list[str] = field(default_factory=list)  # workers restarted by their consumer watchdog

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def sample_leases(self) -> None:
        """A delivery lease must end DELIVERY_LEASE_SECONDS after it was taken, on the database's clock: one
        longer than that was taken on a clock that runs ahead (a killed holder would block its decision)."""
        from datetime import timedelta

        from django.conf import settings
        from django.db.models.functions import Now

        from workflows.models import Decision

        limit = Now() + timedelta(seconds=settings.DELIVERY_LEASE_SECONDS + 2)
        self.long_leases.update(Decision.objects.filter(status="running", lease_expires_at__gt=limit)
                                .values_list("pk", flat=True))


class Operator(threading.Thread):
    """A scripted person working the queue through the console's forms."""

    RETRY_FOR = 90.0  # seconds a person keeps trying while the console restarts

    def __init__(self, username: str, password: str, world: World, others: list[str], rng: random.Random,
                 record: Logbook, stop: threading.Event) -> None:
        super().__init__(name=f"operator-{username}", daemon=True)
        self.username, self.password, self.others, self.rng = username, password, others, rng
        self.record, self.stop = record, stop
        self.think = world.args.think
        self.browser = Browser(world.console_url)
        from workflows.demo.systems import Ledgers

        self.ledgers = Ledgers(world.var_dir / "demo" / "ledgers.sqlite3")
        self.user: Any = None

    def run(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db import connection

        self.user = get_user_model().objects.get(username=self.username)
        self.persist(lambda: self.browser.login(self.username, self.password), "login")
        while not self.stop.is_set():
            try:
                busy = self.approve_one() or self.work_one()
            except Exception as exc:  # a person shrugs and goes on with the next one
                self.record.count("operator_errors")
                say(f"  ! {self.username}: {type(exc).__name__}: {exc}")
                connection.close()
                busy = False
            if not busy:
                self.stop.wait(0.3)
        connection.close()

    def persist(self, attempt: Callable[[], Any], what: str, done: Callable[[], bool] = lambda: False) -> Any:
        """Try until the console answers; ``done`` tells when an attempt whose answer was lost did apply."""
        deadline = time.monotonic() + self.RETRY_FOR
        while True:
            try:
                return attempt()
            except Down:
                self.record.count(f"retried_{what}")
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                time.sleep(self.rng.uniform(0.5, 1.5))
                if done():
                    self.record.count(f"applied_unanswered_{what}")
                    return None

    def post(self, path: str, fields: dict, what: str, done: Callable[[], bool] = lambda: False) -> Answer | None:
        def attempt() -> Answer:
            answer = self.browser.post(path, fields)
            if answer.status == 403 or (answer.status == 302 and answer.location.startswith("/login/")):
                self.browser.login(self.username, self.password)  # session or CSRF cookie gone: log in again
                answer = self.browser.post(path, fields)
            return answer

        return self.persist(attempt, what, done)

    # --- four eyes --------------------------------------------------------------------------------
    def approve_one(self) -> bool:
        """Open the queue's Awaiting approval tab, as a person does, and approve the first proposal listed
        (the tab never lists one's own proposals)."""
        from workflows.models import Checkpoint, Decision

        # The tab's count, as a person glances at it: the page itself is opened only when it is not zero.
        if not Checkpoint.objects.awaiting_approval(by=self.user).exists():
            return False
        tab = "/?scope=approval"

        def look() -> Answer:
            page = self.browser.request("GET", tab)
            if page.status == 302 and page.location.startswith("/login/"):  # the session is gone: log in again
                self.browser.login(self.username, self.password)
                page = self.browser.request("GET", tab)
            return page

        page = self.persist(look, "approvals_tab")
        listed = [int(pk) for pk in APPROVE_FORM.findall(page.body if page else "")]
        if not listed:
            return False
        self.record.count("approvals_tab_listed")
        pk = listed[0]

        def answered() -> bool:
            return Decision.objects.filter(pk=pk).exclude(status=Decision.Status.PROPOSED).exists()

        answer = self.post(f"/decisions/{pk}/approve/", {"next": tab}, "approve", done=answered)
        self.record.count("approved" if answer is None or answer.status == 302 else f"approve_{answer.status}")
        return True

    # --- the queue ----------------------------------------------------------------------------------
    def work_one(self) -> bool:
        from workflows.models import Checkpoint

        checkpoint = Checkpoint.objects.filter(status=Checkpoint.Status.CLAIMED, assignee=self.user).first()
        if checkpoint is None:
            first = list(Checkpoint.objects.filter(status=Checkpoint.Status.OPEN)
                         .order_by("due_at", "pk").values_list("pk", flat=True)[:6])
            if not first:
                return False
            pk = self.rng.choice(first)  # two people on one queue do not all pick the top row
            if not self.claim(pk):
                return True
            checkpoint = Checkpoint.objects.get(pk=pk)
        self.decide(checkpoint)
        return True

    def claim(self, pk: int) -> bool:
        from workflows.models import Checkpoint

        def mine() -> bool:
            return Checkpoint.objects.filter(pk=pk, status=Checkpoint.Status.CLAIMED, assignee=self.user).exists()

        self.post(f"/checkpoints/{pk}/claim/", {}, "claim", done=mine)
        if mine():
            self.record.count("claimed")
            return True
        self.record.count("claim_lost")
        return False

    def confirmations(self, checkpoint: Any) -> dict[str, str]:
        """Every unknown effect, as the simulated systems really recorded it."""
        fields = {}
        for i, effect in enumerate(checkpoint.unknown_effects):
            executions = self.ledgers.executions_for(effect["idempotency_key"])
            if executions:
                fields.update({f"confirm_{i}": "happened", f"ref_{i}": executions[0].ref})
                self.record.count("confirmed_happened")
            else:
                fields[f"confirm_{i}"] = "did_not_happen"
                self.record.count("confirmed_did_not_happen")
        return fields

    def choose(self, checkpoint: Any) -> dict[str, str]:
        roll = self.rng.random()
        if roll < 0.80:
            action = "resume"
        elif roll < 0.88:
            action = "retry_step"
        elif roll < 0.97:
            action = "handoff"
        else:
            action = "abort"
        if checkpoint.runbook_version and not checkpoint.runbook_version.allows(action):
            action = "resume"
        fields = {"action": action, "money_confirmed": "on",
                  "instructions": f"chaos: {action} after checking the ledgers"}
        if action == "handoff":
            if self.others:
                fields["new_owner"] = self.rng.choice(self.others)
            else:
                fields["handoff_to"] = "Tier-2 support"
        return fields

    def decide(self, checkpoint: Any) -> None:
        from workflows.models import Decision

        self.stop.wait(self.rng.uniform(0.5, 1.5) * self.think)  # reading the resume state and the runbook
        fields = {**self.choose(checkpoint), **self.confirmations(checkpoint)}

        def recorded() -> bool:  # earlier decisions of this checkpoint failed or were rejected: not active
            return Decision.objects.filter(checkpoint=checkpoint, decided_by=self.user).active().exists()

        answer = self.post(f"/checkpoints/{checkpoint.pk}/decide/", fields, "decide", done=recorded)
        action = fields["action"]
        if answer is None:
            self.record.count(f"decided_{action}")  # applied, its answer lost with the web server
        elif answer.status == 302 and answer.location.rstrip("/").endswith(f"/checkpoints/{checkpoint.pk}"):
            with self.record.lock:
                self.record.acknowledged.append((checkpoint.pk, self.username, action))
            self.record.count(f"decided_{action}")
        elif answer.status == 409:
            self.record.count("decide_conflict")
        else:
            self.record.count(f"decide_{answer.status}")
            with self.record.lock:
                self.record.invalid.append(f"checkpoint {checkpoint.pk} {action}: {answer.status} "
                                           f"{snippet(answer.body)}")


def snippet(html: str) -> str:
    """The form errors of a re-rendered page, roughly."""
    import re

    errors = re.findall(r'class="[^"]*error[^"]*"[^>]*>([^<]{1,200})<', html)
    return "; ".join(e.strip() for e in errors if e.strip())[:300] or html[:200]


# --- the run ----------------------------------------------------------------------------------

TERMINAL = ("completed", "failed", "handed_off", "aborted")


def settled(journal: Any, total: int) -> bool:
    from workflows.models import Decision, Workflow

    if journal.launched() < total or Workflow.objects.count() < journal.launched():
        return False
    unfinished = Decision.objects.filter(status__in=["proposed", "queued", "running"])
    return not Workflow.objects.exclude(status__in=TERMINAL).exists() and not unfinished.exists()


def progress(started: float, journal: Any, killer: Killer) -> str:
    from workflows.models import Checkpoint, Decision, Workflow

    workflows = Counter(Workflow.objects.values_list("status", flat=True))
    checkpoints = Checkpoint.objects.exclude(status="resolved").count()
    decisions = Counter(Decision.objects.values_list("status", flat=True))
    return (f"  {time.monotonic() - started:6.0f}s  launched {journal.launched()}  workflows "
            f"{dict(sorted(workflows.items()))}  unresolved checkpoints {checkpoints}  decisions "
            f"{dict(sorted(decisions.items()))}  kills {dict(killer.kills)}")


def run(world: World) -> tuple[dict[str, Service], Killer, Logbook, float, bool]:
    from workflows.demo.journal import Journal

    args = world.args
    rng = random.Random(args.seed)
    stack: dict[str, Any] = {**services(world), **fault_targets(world)}
    journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")
    record = Logbook()
    sampler = MemorySampler(stack, args.rss_interval)
    stop_operators = threading.Event()
    # A disk-pressure run's first kill fills the disk: its workflows may all be done before a later one.
    killer = Killer(stack, args.kill_interval, random.Random(rng.random()), kill_targets(args),
                    first="disk" if "disk" in stack else None)
    supervisor = Supervisor(stack, killer)
    started = time.monotonic()
    deadline = started + args.timeout
    operators: list[Operator] = []
    settled_in_time = False
    try:
        for name in ("web", "worker1", "worker2", "beat", "relay", "fleet"):
            stack[name].start()
        say(f"stack up in {time.monotonic() - started:.0f}s: web :{world.web_port}, fleet :{world.fleet_port}, "
            f"logs in {world.var_dir / 'logs'}")
        names = sorted(world.users)
        for name in names:
            operators.append(Operator(name, world.users[name], world, [n for n in names if n != name],
                                      random.Random(rng.random()), record, stop_operators))
        for operator in operators:
            operator.start()
        if args.kill_interval > 0:
            killer.start()
        sampler.start()
        supervisor.start()
        next_report = time.monotonic() + 15
        while time.monotonic() < deadline:
            if journal.launched() >= args.workflows and killer.is_alive() and not killer.stop.is_set() \
                    and killer.rounds >= args.kill_rounds:
                killer.stop.set()
                say(f"  all {args.workflows} launched after {time.monotonic() - started:.0f}s: no more kills; draining")
                if time.monotonic() + args.drain > deadline:
                    deadline = time.monotonic() + args.drain
                    say(f"  the drain gets its {args.drain:.0f}s: deadline moved to {deadline - started:.0f}s")
            if (not killer.is_alive() or killer.stop.is_set()) and settled(journal, args.workflows):
                settled_in_time = True
                break
            record.sample_leases()
            if time.monotonic() >= next_report:
                say(progress(started, journal, killer))
                next_report = time.monotonic() + 15
            time.sleep(1.0)
        killer.stop.set()
        sampler.sample()
        sampler.stop.set()
        record.memory = sampler.report()
        if killer.is_alive():
            killer.join(120)
        if not settled_in_time:
            say(f"  ! deadline of {deadline - started:.0f}s reached before the run settled")
        say(progress(started, journal, killer))
        if world.disk is not None:  # drained, with room: what the queue says now
            world.disk.page_at_end = world.disk.queue_page()
    finally:
        supervisor.stop.set()
        supervisor.join(120)
        record.exits, record.watchdog = supervisor.exits, supervisor.watchdog
        stop_operators.set()
        for operator in operators:
            operator.join(30)
        killer.stop.set()
        if killer.is_alive():
            killer.join(120)  # it may be starting a process again: stop that one too
        if "postgres" in stack:
            stack["postgres"].stop()  # the database open again, whatever the killer was doing
        for name in ("fleet", "relay", "beat", "worker1", "worker2", "web"):
            stack[name].stop()
    return stack, killer, record, time.monotonic() - started, settled_in_time


# --- the report ------------------------------------------------------------------------------------

def share(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 100.0


def run_period() -> Any:
    """The whole run as one period of the dashboard: every day a workflow of this fresh database was made."""
    from django.db.models import Min

    from workflows import metrics
    from workflows.models import Workflow

    first = Workflow.objects.aggregate(first=Min("created_at"))["first"]
    today = metrics.Filters.last(1).end
    return metrics.Filters(start=first.date() if first else today, end=today)


def analyse(world: World, record: Logbook, killer: Killer, duration: float, settled_in_time: bool) -> dict:
    """The figures of workflows.metrics (the dashboard's), and a cross-check against the simulated ledgers."""
    from django.db import connection
    from django.db.models import Prefetch
    from django.db.models.functions import Now

    from workflows import metrics
    from workflows.demo.agent import PLANS
    from workflows.demo.journal import Journal
    from workflows.demo.systems import Ledgers
    from workflows.models import Checkpoint, Decision, Step, Workflow

    ledgers = Ledgers(world.var_dir / "demo" / "ledgers.sqlite3")
    journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")
    executions: dict[str, list[str]] = {}
    with ledgers.connect() as conn:
        for key, ref in conn.execute("SELECT idempotency_key, ref FROM executions ORDER BY id"):
            executions.setdefault(key, []).append(ref)
    duplicates = {key: len(refs) for key, refs in executions.items() if len(refs) > 1}

    period = run_period()
    summary = metrics.summary(period)

    def ids(figure: str) -> set[int]:
        return set(metrics.workflows_behind(period, figure).values_list("pk", flat=True))

    resumed = ids("resumed") - ids("ended_by_operator")  # an operator's later handoff or abort is not a resume
    resumed_clean = resumed & ids("resumed_without_data_loss:met")
    other_owner = ids("owner_changed") - ids("handed_off")  # an operator choosing another owner is not a loss

    workflows = list(Workflow.objects.select_related("owner", "agent").prefetch_related(
        "steps", Prefetch("checkpoints__decisions", Decision.objects.all())))
    known = {(w.agent.name, w.external_id) for w in workflows}
    missing = [f"{r['agent']}:{r['external_id']}" for r in journal.runs()
               if r["status"] not in ("skipped", "refused") and (r["agent"], r["external_id"]) not in known]
    blank: list[str] = list(missing)
    lost: list[str] = []
    for workflow in workflows:
        checkpoints = list(workflow.checkpoints.all())
        unresolved = [c for c in checkpoints if c.status != "resolved"]
        if workflow.status not in TERMINAL and not (workflow.status == "paused" and unresolved):
            blank.append(f"{workflow.pk} ({workflow.external_id}, {workflow.status})")
        decisions = [d for c in checkpoints for d in c.decisions.all()]
        lost.extend(lost_effects(workflow, list(workflow.steps.all()), decisions, executions, PLANS))
    blank += [f"{pk} (failed while running)" for pk in sorted(ids("blank_failure"))]

    def described(pks: set[int]) -> list[str]:
        return [f"{w.pk} ({w.external_id}, {w.status})" for w in workflows if w.pk in pks]

    all_decisions = list(Decision.objects.select_related("decided_by"))
    recorded = {(d.checkpoint_id, d.decided_by.get_username(), d.action) for d in all_decisions}
    unrecorded = [a for a in record.acknowledged if a not in recorded]
    unfinished = [f"{d.pk} ({d.action}, {d.status})" for d in all_decisions if d.status in ("queued", "running")]
    proposed = [d.pk for d in all_decisions if d.status == "proposed"]
    checkpoints = Checkpoint.objects.all()
    preserved = summary["preserved_checkpoint"]
    stored = {(str(w), q): st for w, q, st in Step.objects.values_list("workflow_id", "seq", "status")}
    acknowledged = journal.acknowledged()
    # A report the console answered 2xx for must be there; a committed one must still be committed.
    unstored = [f"{w}#{q} {st}" for w, q, st in acknowledged
                if (w, q) not in stored or (st == "committed" and stored[(w, q)] != "committed")]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        database_bytes = int(cursor.fetchone()[0])
    ahead = {  # stamps a process clock running ahead would leave in the future of the database's clock
        "checkpoints opened": checkpoints.filter(opened_at__gt=Now()).count(),
        "checkpoints warned": checkpoints.filter(warned_at__gt=Now()).count(),
        "checkpoints breached": checkpoints.filter(breached_at__gt=Now()).count(),
        "decisions finished": Decision.objects.filter(finished_at__gt=Now()).count(),
    }
    return {
        "seed": world.args.seed, "duration_seconds": round(duration), "settled": settled_in_time,
        "workflows_requested": world.args.workflows, "workflows": len(workflows),
        "launched": journal.launched(),
        "workflows_by_status": dict(Counter(w.status for w in workflows)),
        "period": [period.start.isoformat(), period.end.isoformat()],
        # The dashboard's four headline shares for the same period, as part/whole.
        "headline": {slug: [share.part, share.whole] for slug, share in summary.shares.items()},
        "degraded": summary.counts["degraded"], "reached_checkpoint": preserved.part,
        "reached_checkpoint_pct": share(preserved.part, preserved.whole),
        "blank_states": blank,
        "resumed": len(resumed), "resumed_clean": len(resumed_clean),
        "resumed_clean_pct": share(len(resumed_clean), len(resumed)),
        "resumed_not_clean": described(resumed - resumed_clean),
        "same_owner": len(resumed - other_owner), "same_owner_pct": share(len(resumed - other_owner), len(resumed)),
        "other_owner": described(other_owner),
        "duplicate_effect_attempts": summary.counts["duplicate_attempt"],
        "duplicate_keys": duplicates, "lost_effects": lost,
        "decisions_acknowledged": len(record.acknowledged), "decisions_unrecorded": unrecorded,
        "decisions_unfinished": unfinished, "decisions_awaiting_approval": proposed,
        "decisions_lost": len(unrecorded) + len(unfinished),
        "decisions_by_action_state": {f"{a}/{s}": n for (a, s), n in sorted(
            metrics.decisions_by_action_and_outcome(period).items())},
        "checkpoints": checkpoints.count(),
        "checkpoints_by_reason": dict(Counter(checkpoints.values_list("reason", flat=True))),
        "checkpoints_opened_by_console": checkpoints.filter(opened_by_console=True).count(),
        "effects_executed": sum(len(refs) for refs in executions.values()),
        "kills": {target: killer.kills.get(target, 0) for target in killer.targets},
        "kill_restart_errors": killer.errors,
        "operator": dict(sorted(record.counts.items())), "operator_invalid": record.invalid[:20],
        "reports_acknowledged": len(acknowledged), "reports_acknowledged_not_stored": unstored,
        "deliveries_acted_on_twice": journal.acted_more_than_once(),
        "stamped_ahead_of_database_clock": {k: v for k, v in ahead.items() if v},
        "leases_longer_than_configured": sorted(record.long_leases),
        "redis_restarts": world.redis.starts - 1 if world.redis else 0,
        "redis_messages_lost": world.redis.lost_messages if world.redis else 0,
        "postgres_outages": getattr(killer.stack.get("postgres"), "outages", 0),
        "postgres_sessions_cut": getattr(killer.stack.get("postgres"), "sessions_cut", 0),
        "network": asdict(world.proxy.counts) if world.proxy else {},
        "disk": disk_figures(world),
        "clock_skew_seconds": world.args.clock_skew,
        "memory": record.memory,
        "exited_by_themselves": record.exits,
        "restarted_by_watchdog": record.watchdog,
        "database_bytes": database_bytes, "database_bytes_per_workflow": database_bytes // max(1, len(workflows)),
    }


def disk_figures(world: World) -> dict[str, Any]:
    """--filesystem-broker --disk-pressure: how often the broker's disk was filled, and what the console said."""
    from workflows.models import BrokerStatus

    disk = world.disk
    if disk is None or not world.args.disk_pressure:
        return {}
    page = disk.page_at_end  # after the drain, with room: the banner must be gone
    return {"fills": disk.fills, "refused": disk.refused, "said": disk.said, "unsaid": disk.unsaid,
            "failing_at_end": BrokerStatus.failing() is not None, "banner_at_end": BANNER in page,
            "page_read_at_end": bool(page)}


def lost_effects(workflow: Any, steps: list, decisions: list, executions: dict[str, list[str]],
                 plans: dict) -> list[str]:
    lost = set()
    for step in steps:
        if step.kind == "effect" and step.status == "committed":
            refs = executions.get(step.idempotency_key, [])
            if not refs or (step.external_ref and step.external_ref not in refs):
                lost.add(step.idempotency_key)
    for decision in decisions:
        for key, verdict in (decision.confirmations or {}).items():
            if verdict == "happened" and not executions.get(key):
                lost.add(key)
    if workflow.status == "completed":
        for spec in plans.get(workflow.kind, ()):
            key = f"{workflow.external_id}:{spec.key}"
            if spec.kind == "effect" and not executions.get(key):
                lost.add(key)
    return sorted(lost)


def report(figures: dict) -> bool:
    """Print the report; True when every target is met."""
    def line(label: str, value: str, target: str, ok: bool) -> None:
        say(f"  {label:<46} {value:<28} target {target:<6} {'ok' if ok else 'MISSED'}")

    checks = {
        "launched": figures["workflows"] >= figures["workflows_requested"] and not figures["blank_states"],
        "reached": figures["reached_checkpoint"] == figures["degraded"],
        "clean": figures["resumed_clean"] == figures["resumed"],
        "owner": figures["same_owner"] == figures["resumed"],
        "decisions": figures["decisions_lost"] == 0,
        "effects": not figures["duplicate_keys"] and not figures["lost_effects"],
        "dedupe": not figures["deliveries_acted_on_twice"],
        "settled": figures["settled"],
        "restarts": not figures["kill_restart_errors"],
        "acknowledged": not figures["reports_acknowledged_not_stored"],
        "clock": not figures["stamped_ahead_of_database_clock"] and not figures["leases_longer_than_configured"],
        "memory": all(abs(row["growth_pct"]) <= 10.0 for row in figures["memory"]),
        "exits": not figures["exited_by_themselves"],
    }
    if figures["disk"]:
        disk = figures["disk"]
        checks["disk"] = (disk["refused"] > 0 and disk["said"] == disk["refused"] and not disk["failing_at_end"]
                          and disk["page_read_at_end"] and not disk["banner_at_end"])
    if figures.get("disk_run"):
        checks["disk_run"] = figures["disk_run"]["ok"]
    say("")
    say(f"Chaos run: seed {figures['seed']}, {figures['duration_seconds']} s, "
        f"{'settled' if figures['settled'] else 'NOT settled before the deadline'}")
    say(f"  workflows {figures['workflows']} of {figures['workflows_requested']} "
        f"{figures['workflows_by_status']}; kills {figures['kills']}")
    line("degraded workflows", f"{figures['degraded']} of {figures['workflows']}", "", True)
    line("degraded that reached a checkpoint", f"{figures['reached_checkpoint_pct']:.1f} % "
         f"({figures['reached_checkpoint']}/{figures['degraded']})", "100 %", checks["reached"])
    line("blank-state workflows", str(len(figures["blank_states"])), "0", checks["launched"])
    line("resumed that completed, 0 duplicate, 0 lost", f"{figures['resumed_clean_pct']:.1f} % "
         f"({figures['resumed_clean']}/{figures['resumed']})", "100 %", checks["clean"])
    line("resumed returned to the same owner", f"{figures['same_owner_pct']:.1f} % "
         f"({figures['same_owner']}/{figures['resumed']})", "100 %", checks["owner"])
    line("decisions lost", str(figures["decisions_lost"]), "0", checks["decisions"])
    line("duplicate effect keys (ledgers)", str(len(figures["duplicate_keys"])), "0", not figures["duplicate_keys"])
    line("lost effects (ledgers)", str(len(figures["lost_effects"])), "0", not figures["lost_effects"])
    line("deliveries an agent acted on twice", str(len(figures["deliveries_acted_on_twice"])), "0",
         checks["dedupe"])
    line("step reports answered 2xx, then not stored", f"{len(figures['reports_acknowledged_not_stored'])} "
         f"of {figures['reports_acknowledged']}", "0", checks["acknowledged"])
    line("stamps ahead of the database clock", str(sum(figures["stamped_ahead_of_database_clock"].values())),
         "0", not figures["stamped_ahead_of_database_clock"])
    line("delivery leases longer than configured", str(len(figures["leases_longer_than_configured"])), "0",
         not figures["leases_longer_than_configured"])
    fault_table(figures, checks)
    line("processes that exited by themselves", f"{len(figures['exited_by_themselves'])} (each started again)",
         "0", checks["exits"])
    say(f"  workers whose consumer stalled and that left on their watchdog (console/watchdog.py), started again: "
        f"{len(figures['restarted_by_watchdog'])} {figures['restarted_by_watchdog'] or ''}")
    for row in figures["memory"]:
        line(f"RSS of {row['process']} over {row['minutes']:g} min", f"{row['rss_after_warmup_mb']:g} -> "
             f"{row['rss_at_end_mb']:g} MB ({row['growth_pct']:+g} %)", "±10 %", abs(row["growth_pct"]) <= 10.0)
    say(f"  database size {figures['database_bytes'] / 2**20:.1f} MB, "
        f"{figures['database_bytes_per_workflow'] / 1024:.1f} KB per workflow")
    say("  the resume dashboard's headline for this run (workflows.metrics):")
    for slug, (part, whole) in figures["headline"].items():
        say(f"    {slug.replace('_', ' '):<44} {share(part, whole):5.1f} % ({part}/{whole})")
    say(f"  duplicate-effect attempts refused by the API {figures['duplicate_effect_attempts']}")
    say(f"  checkpoints {figures['checkpoints']} (opened by the silence sweep: "
        f"{figures['checkpoints_opened_by_console']}) by reason {figures['checkpoints_by_reason']}")
    say(f"  decisions by action/state {figures['decisions_by_action_state']}")
    say(f"  effects executed {figures['effects_executed']}; operators {figures['operator']}")
    for label, key in (("blank states", "blank_states"), ("resumed, not clean", "resumed_not_clean"),
                       ("another owner", "other_owner"), ("duplicated keys", "duplicate_keys"),
                       ("lost effects", "lost_effects"), ("acted on twice", "deliveries_acted_on_twice"),
                       ("acknowledged, not recorded", "decisions_unrecorded"),
                       ("decisions not finished", "decisions_unfinished"),
                       ("decisions awaiting approval", "decisions_awaiting_approval"),
                       ("operator form errors", "operator_invalid"), ("restart errors", "kill_restart_errors"),
                       ("step reports lost after a 2xx", "reports_acknowledged_not_stored"),
                       ("stamped ahead of the database clock", "stamped_ahead_of_database_clock"),
                       ("leases longer than configured", "leases_longer_than_configured"),
                       ("exited by themselves, restarted", "exited_by_themselves")):
        if key == "stamped_ahead_of_database_clock" and figures["disk"].get("unsaid"):
            say(f"  full disk, not said on the queue page: {'; '.join(figures['disk']['unsaid'][:10])}")
        if figures[key]:
            say(f"  {label}: {figures[key] if isinstance(figures[key], dict) else ', '.join(map(str, figures[key][:50]))}")
    ok = all(checks.values())
    say("  all targets met" if ok else "  TARGETS MISSED: " + ", ".join(k for k, v in checks.items() if not v))
    return ok


def fault_rows(figures: dict, checks: dict[str, bool]) -> list[tuple[str, str, str, bool]]:
    """(fault, what was injected, the target, held) for every fault this run injected."""
    kills, network = figures["kills"], figures["network"]
    no_loss = checks["decisions"] and checks["effects"] and checks["acknowledged"]
    rows = [
        ("worker SIGKILLed", f"{kills.get('worker', 0)}", "no decision lost or delivered twice",
         checks["decisions"] and checks["effects"] and checks["dedupe"]),
        ("web server SIGKILLed", f"{kills.get('web', 0)}", "every 2xx kept, no decision lost", no_loss),
        ("agent fleet SIGKILLed mid-step", f"{kills.get('fleet', 0)}", "every run checkpointed or finished",
         checks["launched"] and checks["reached"]),
    ]
    if "redis" in kills:
        rows.append(("Redis SIGKILLed, back empty", f"{kills['redis']} ({figures['redis_messages_lost']} Celery "
                     "messages lost with it)", "the outbox sends every decision again", checks["decisions"]
                     and checks["settled"]))
    if "postgres" in kills:
        rows.append(("PostgreSQL gone (refused, sessions cut)", f"{kills['postgres']} ({figures['postgres_sessions_cut']}"
                     " sessions cut)", "every 2xx kept, all recover", no_loss and checks["restarts"]))
    if network:
        rows.append(("lossy network to the agents", f"{network.get('connections', 0)} connections: "
                     f"{network.get('dropped_mid_response', 0)} cut mid-answer, {network.get('black_holed', 0)} "
                     "never answered", "no delivery acted on twice", checks["effects"] and checks["dedupe"]))
    if figures["clock_skew_seconds"]:
        rows.append(("worker clock ahead", f"+{figures['clock_skew_seconds']:g} s on worker2",
                     "leases and SLA stamps on the database clock", checks["clock"]))
    if figures["disk"]:  # this run is the disk-pressure run
        disk = figures["disk"]
        rows.append(("broker disk full (filesystem transport)", f"{disk['fills']} fills, {disk['refused']} "
                     f"refused a decision, {disk['said']} said on the queue", "said while full, nothing lost",
                     checks["disk"] and no_loss))
    if figures.get("disk_run"):  # the disk-pressure run that followed this one, in its own words above
        run_ = figures["disk_run"]
        disk = run_.get("disk") or {}
        rows.append(("broker disk full (filesystem transport)", f"{disk.get('fills', 0)} fills, "
                     f"{disk.get('refused', 0)} refused a decision, {disk.get('said', 0)} said on the queue (run "
                     f"of {run_.get('workflows', 0)}, seed {run_['seed']})", "said while full, nothing lost",
                     run_["ok"]))
    return rows


def fault_table(figures: dict, checks: dict[str, bool]) -> None:
    say(f"  {'fault':<40} {'injected':<50} {'target':<44} held")
    for fault, injected, target, held in fault_rows(figures, checks):
        say(f"  {fault:<40} {injected:<50} {target:<44} {'yes' if held else 'NO'}")


def disk_pressure_run(world: World) -> dict[str, Any]:
    """--disk-pressure: the embedded default's broker with its disk filled, a run of its own after this one.

    This script again, with ``--filesystem-broker``: a database of its own (this one's name and ``_disk``,
    dropped after), no Redis, the same operators and kills, and the broker folder's disk filled in its rounds.
    """
    args = world.args
    parts = urllib.parse.urlsplit(world.env["DATABASE_URL"])
    name = f"{database_name(world.env['DATABASE_URL'])[:58]}_disk"
    database_url = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    seed, figures_path = args.seed + 1, world.var_dir / "disk-run.json"
    kill_interval = min(args.kill_interval, 6.0) if args.kill_interval > 0 else 6.0
    say("")
    say(f"== the embedded default's broker under disk pressure: {args.disk_workflows} workflows, seed {seed} ==")
    argv = [sys.executable, str(Path(__file__).resolve()), "--filesystem-broker", "--disk-pressure",
            "--no-kill-redis", "--no-kill-postgres", "--no-lossy-network", "--clock-skew", "0",
            "--workflows", str(args.disk_workflows), "--seed", str(seed), "--kill-interval", f"{kill_interval:g}",
            "--kill-rounds", "2", "--operators", str(args.operators), "--interval", f"{args.interval:g}",
            "--fault-rate", f"{args.fault_rate:g}", "--step-delay", f"{args.step_delay:g}",
            "--silence", str(args.silence), "--think", f"{args.think:g}",
            "--delivery-attempts", str(args.delivery_attempts), "--timeout", f"{min(args.timeout, 1200.0):g}",
            "--drain", f"{min(args.drain, 300.0):g}", "--rss-interval", f"{args.rss_interval:g}",
            "--var-dir", str(world.var_dir / "disk-run"), "--json", str(figures_path)]
    env = {key: value for key, value in os.environ.items() if key not in ("CELERY_BROKER_URL", "CACHE_URL")}
    env.update({**args.given, "DATABASE_URL": database_url})  # as this run was given them, not its private Redis
    child = subprocess.Popen(argv, cwd=ROOT, env=env)
    try:
        returncode = child.wait(timeout=min(args.timeout, 1200.0) + 600)
    except BaseException as exc:  # out of time, or this run stopped: the child stops its own stack on SIGTERM
        child.terminate()
        with suppress(subprocess.TimeoutExpired):
            child.wait(120)
        child.kill()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        returncode = -1
        say("  ! the disk-pressure run did not end in time")
    finally:
        recreate_database(database_url, create=False)
    sub = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    say("== end of the disk-pressure run ==")
    return {"ok": returncode == 0 and bool(sub), "returncode": returncode, "seed": seed,
            "workflows": sub.get("workflows", 0), "disk": sub.get("disk") or {},
            "decisions_lost": sub.get("decisions_lost"), "duration_seconds": sub.get("duration_seconds")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Stopped with SIGTERM (kill, a CI timeout): unwind as on Ctrl-C, so the stack it started goes with it.
    # Once: a second SIGTERM (``timeout`` passing one on beside a direct kill) must not cut that cleanup short.
    def stop(*_: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)
    say(f"chaos: {args.workflows} workflows, seed {args.seed}, fault rate {args.fault_rate}, kills every "
        f"~{args.kill_interval:g}s, {args.operators} operator(s), deadline {args.timeout:.0f}s")
    world = prepare(args)
    try:
        _stack, killer, record, duration, settled_in_time = run(world)
        figures = analyse(world, record, killer, duration, settled_in_time)
    finally:
        if world.proxy is not None:
            world.proxy.stop()
        if world.redis is not None:
            world.redis.stop()
        if world.disk is not None:
            world.disk.unmount()
    if args.disk_pressure and not args.filesystem_broker:
        figures["disk_run"] = disk_pressure_run(world)
    ok = report(figures)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(figures, indent=2, default=str))
    say(f"  VAR_DIR (ledgers, journal, logs): {world.var_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
