"""python -m scripts.chaos: prepare the world, run it, read the figures, report."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

from .cli import parse_args
from .common import say
from .disk import disk_pressure_run
from .figures import analyse
from .incident import Outage, Scenario, incident_figures
from .report import report
from .run import run
from .world import prepare


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    # Stopped with SIGTERM (kill, a CI timeout): unwind as on Ctrl-C, so the stack it started goes with it.
    # Once: a second SIGTERM (``timeout`` passing one on beside a direct kill) must not cut that cleanup short.
    def stop(*_: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)
    say(
        f"chaos: {args.workflows} workflows, seed {args.seed}, fault rate {args.fault_rate}, kills every "
        f"~{args.kill_interval:g}s, {args.operators} operator(s), deadline {args.timeout:.0f}s"
    )
    world = prepare(args)
    outage, scenario = (Outage(args.outage_agent), Scenario()) if args.incident else (None, None)
    try:
        _stack, killer, record, duration, settled_in_time = run(world, outage, scenario)
        figures = analyse(world, record, killer, duration, settled_in_time)
        figures["incident"] = incident_figures(world, outage, scenario) if outage and scenario else None
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
