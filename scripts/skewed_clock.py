"""Run a Python program with this process's clock ahead of everyone else's (``make chaos --clock-skew``).

    python scripts/skewed_clock.py 300 .venv/bin/celery -A console worker ...

time-machine moves the clock of this process only (``time.time``, ``datetime.now``…; not
``time.monotonic``, not the database's): a Celery worker started this way, and the pool
processes it forks, believe it is five minutes later than it is. The console must not care:
its leases and SLA clocks are read from the database's clock.
"""

from __future__ import annotations

import runpy
import sys
from datetime import UTC, datetime, timedelta

import time_machine


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    seconds = float(sys.argv[1])
    time_machine.travel(datetime.now(UTC) + timedelta(seconds=seconds), tick=True).start()
    sys.argv = sys.argv[2:]
    print(f"skewed clock: this process runs {seconds:+g} s ahead", flush=True)
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
