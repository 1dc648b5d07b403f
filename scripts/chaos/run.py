"""The run: the stack up, operators at work, the killer in its rounds, until every workflow settles."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

from .cli import kill_targets
from .common import say
from .incident import Commander, Outage, Scenario
from .operators import Logbook, Operator
from .stack import Killer, MemorySampler, Service, Supervisor, fault_targets, services
from .world import World

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
    return (
        f"  {time.monotonic() - started:6.0f}s  launched {journal.launched()}  workflows "
        f"{dict(sorted(workflows.items()))}  unresolved checkpoints {checkpoints}  decisions "
        f"{dict(sorted(decisions.items()))}  kills {dict(killer.kills)}"
    )


def run(
    world: World, outage: Outage | None = None, scenario: Scenario | None = None
) -> tuple[dict[str, Service], Killer, Logbook, float, bool]:
    """The run; with ``outage`` and ``scenario`` (--incident), the incident commander works beside the operators
    and the run settles only once it is done."""
    from demo.journal import Journal

    args = world.args
    rng = random.Random(args.seed)
    stack: dict[str, Any] = {**services(world), **fault_targets(world)}
    journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")
    record = Logbook()
    sampler = MemorySampler(stack, args.rss_interval)
    stop_operators = threading.Event()
    # A disk-pressure run's first kill fills the disk: its workflows may all be done before a later one.
    killer = Killer(
        stack,
        args.kill_interval,
        random.Random(rng.random()),
        kill_targets(args),
        first="disk" if "disk" in stack else None,
    )
    supervisor = Supervisor(stack, killer)
    started = time.monotonic()
    deadline = started + args.timeout
    operators: list[Operator] = []
    settled_in_time = False
    try:
        for name in ("web", "worker1", "worker2", "beat", "relay", "fleet"):
            stack[name].start()
        say(
            f"stack up in {time.monotonic() - started:.0f}s: web :{world.web_port}, fleet :{world.fleet_port}, "
            f"logs in {world.var_dir / 'logs'}"
        )
        names = sorted(world.users)
        for name in names:
            operators.append(
                Operator(
                    name,
                    world.users[name],
                    world,
                    [n for n in names if n != name],
                    random.Random(rng.random()),
                    record,
                    stop_operators,
                    outage,
                )
            )
        if outage is not None and scenario is not None:
            operators.append(Commander(world, outage, scenario, random.Random(rng.random()), record, stop_operators))
        for operator in operators:
            operator.start()
        if args.kill_interval > 0:
            killer.start()
        sampler.start()
        supervisor.start()
        next_report = time.monotonic() + 15
        while time.monotonic() < deadline:
            if (
                journal.launched() >= args.workflows
                and killer.is_alive()
                and not killer.stop.is_set()
                and killer.rounds >= args.kill_rounds
            ):
                killer.stop.set()
                say(f"  all {args.workflows} launched after {time.monotonic() - started:.0f}s: no more kills; draining")
                if time.monotonic() + args.drain > deadline:
                    deadline = time.monotonic() + args.drain
                    say(f"  the drain gets its {args.drain:.0f}s: deadline moved to {deadline - started:.0f}s")
            scenario_done = scenario is None or scenario.done.is_set()
            if (not killer.is_alive() or killer.stop.is_set()) and scenario_done and settled(journal, args.workflows):
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
