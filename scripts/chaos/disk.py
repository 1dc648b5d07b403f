"""Disk pressure: the filesystem broker's tmpfs filled to the last byte, and the run that does it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import urllib.parse
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import ROOT, database_name, recreate_database, say
from .operators import Browser, Down, snippet

if TYPE_CHECKING:
    from .world import World

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
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={BROKER_DISK_BYTES}", "tmpfs", str(self.folder)],
            capture_output=True,
            text=True,
        )
        if mounted.returncode != 0:
            raise SystemExit(
                f"--disk-pressure fills a tmpfs mounted on the broker folder, and mounting one needs "
                f"root: {mounted.stderr.strip()} (leave it out with --no-disk-pressure)"
            )
        for sub in ("out", "processed", "control"):  # what the settings make, under the mount
            (self.folder / sub).mkdir()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.folder)], check=False, capture_output=True)

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


def disk_figures(world: World) -> dict[str, Any]:
    """--filesystem-broker --disk-pressure: how often the broker's disk was filled, and what the console said."""
    from workflows.models import BrokerStatus

    disk = world.disk
    if disk is None or not world.args.disk_pressure:
        return {}
    page = disk.page_at_end  # after the drain, with room: the banner must be gone
    return {
        "fills": disk.fills,
        "refused": disk.refused,
        "said": disk.said,
        "unsaid": disk.unsaid,
        "failing_at_end": BrokerStatus.failing() is not None,
        "banner_at_end": BANNER in page,
        "page_read_at_end": bool(page),
    }


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
    argv = [
        sys.executable,
        "-m",
        "scripts.chaos",
        "--filesystem-broker",
        "--disk-pressure",
        "--no-kill-redis",
        "--no-kill-postgres",
        "--no-lossy-network",
        "--no-incident",  # the incident scenario ran in the run before: this one is about the broker's disk
        "--clock-skew",
        "0",
        "--workflows",
        str(args.disk_workflows),
        "--seed",
        str(seed),
        "--kill-interval",
        f"{kill_interval:g}",
        "--kill-rounds",
        "2",
        "--operators",
        str(args.operators),
        "--interval",
        f"{args.interval:g}",
        "--fault-rate",
        f"{args.fault_rate:g}",
        "--step-delay",
        f"{args.step_delay:g}",
        "--silence",
        str(args.silence),
        "--think",
        f"{args.think:g}",
        "--delivery-attempts",
        str(args.delivery_attempts),
        "--timeout",
        f"{min(args.timeout, 1200.0):g}",
        "--drain",
        f"{min(args.drain, 300.0):g}",
        "--rss-interval",
        f"{args.rss_interval:g}",
        "--var-dir",
        str(world.var_dir / "disk-run"),
        "--json",
        str(figures_path),
    ]
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
    return {
        "ok": returncode == 0 and bool(sub),
        "returncode": returncode,
        "seed": seed,
        "workflows": sub.get("workflows", 0),
        "disk": sub.get("disk") or {},
        "decisions_lost": sub.get("decisions_lost"),
        "duration_seconds": sub.get("duration_seconds"),
    }
