"""The processes of the stack, started and killed whole; the killer, the supervisor and the memory sampler."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from console import watchdog  # no Django needed: the mark its exits carry

from .common import BIN, KILL_TARGETS, ROOT, say
from .stores import PostgresOutage
from .world import World


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
            self.popen = subprocess.Popen(
                argv, cwd=ROOT, env=self.world.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
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
        # The production config (console/gunicorn.py: gthread, 4 threads, its shared-cache guard), two workers.
        "web": Service(
            "web",
            [
                str(BIN / "gunicorn"),
                "-c",
                "python:console.gunicorn",
                "console.wsgi",
                "-b",
                f"127.0.0.1:{world.web_port}",
                "-w",
                "2",
            ],
            world,
            answers_health,
        ),
        "beat": Service(
            "beat", [str(BIN / "celery"), "-A", "console", "beat", "--loglevel=INFO"], world, printed("beat: Starting")
        ),
        "relay": Service("relay", [python, manage, "run_relay", "--interval", "1"], world, printed("outbox relay")),
        "fleet": Service(
            "fleet",
            [
                python,
                manage,
                "run_demo_fleet",
                "--console",
                world.console_url,
                "--port",
                str(world.fleet_port),
                "--agents",
                "3",
                "--interval",
                str(args.interval),
                "--max-open",
                "100000",
                "--seed",
                f"{args.seed}{{start}}",  # a restarted fleet does not replay the same faults
                "--fault-rate",
                str(args.fault_rate),
                "--step-delay",
                str(args.step_delay),
                "--total",
                str(args.workflows),
                "--poll-interval",
                "0.5",
                "--reconcile-interval",
                "2",
            ],
            world,
            printed("demo fleet:"),
        ),
    }
    for n in (1, 2):
        # --clock-skew: the second worker's clock runs ahead (time-machine in that process and its pool).
        skewed = (
            [python, str(ROOT / "scripts" / "skewed_clock.py"), f"{args.clock_skew:g}"]
            if n == 2 and args.clock_skew
            else []
        )
        stack[f"worker{n}"] = Service(
            f"worker{n}",
            [
                *skewed,
                str(BIN / "celery"),
                "-A",
                "console",
                "worker",
                "-P",
                "prefork",
                "-c",
                "2",
                "-n",
                f"chaos{n}@%h",
                "-Q",
                "chaos",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            world,
            printed("ready."),
        )
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
            rows.append(
                {
                    "process": key,
                    "minutes": round((series[-1][0] - born) / 60, 1),
                    "rss_after_warmup_mb": round(first / 2**20, 1),
                    "rss_at_end_mb": round(last / 2**20, 1),
                    "growth_pct": round(100.0 * (last - first) / first, 1),
                }
            )
        return rows


class Killer(threading.Thread):
    """SIGKILL a worker, the web server or the fleet at random intervals; start it again at once."""

    def __init__(
        self,
        stack: dict[str, Any],
        interval: float,
        rng: random.Random,
        targets: tuple[str, ...] = KILL_TARGETS,
        first: str | None = None,
    ) -> None:
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
            target = rounds[-1]
            name = self.rng.choice(["worker1", "worker2"]) if target == "worker" else target
            service = self.stack[name]
            with self.lock:
                if name in self.down:
                    # The supervisor is starting it again after an exit of its own (a watchdog exit): a kill now
                    # would land on a process mid-start and read as a failed restart. The round waits a turn.
                    continue
                self.down.add(name)  # the supervisor leaves it alone: it is down on purpose
            rounds.pop()
            self.rounds += not rounds
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
                    say(
                        f"  ~ {name}: its Celery consumer stalled beside queued messages; it left on its watchdog "
                        "and was started again"
                    )
                else:
                    self.report_exit(name, service, output)
                self.killer.restart(service)
                with self.killer.lock:
                    self.killer.down.discard(name)

    def report_exit(self, name: str, service: Service, output: str) -> None:
        """A crash: counted, and reported with the last error line the process printed."""
        errors = [line for line in output.splitlines() if "Error" in line or "CRITICAL" in line]
        self.exits.append(f"{name}: {(errors[-1] if errors else 'no error printed').strip()[:300]}")
        say(
            f"  ! {name} exited by itself (code {service.popen.returncode}); started again, as a supervisor "
            f"would: {self.exits[-1]}"
        )
