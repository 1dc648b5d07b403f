"""What the in-process profiling scripts share (scripts/profile_rollout.py, profile_step_batch.py,
profile_pages.py): Django set up on DATABASE_URL, a seeded generator whose seed is printed, and the profile's
cumulative and own-time tops."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import random
import time


def set_up(*, migrate: bool = True) -> random.Random:
    """Django on the environment's settings, DATABASE_URL migrated (``migrate``), and a generator seeded by the
    clock (names stay unique in a reused database) with its seed printed, so a run can be replayed."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    seed = time.time_ns()
    print(f"seed {seed}")
    return random.Random(seed)


def print_tops(profile: cProfile.Profile, dump: str | None, lines: int = 40) -> None:
    """Dump the profile to ``dump`` (for snakeviz or flameprof) and print its cumulative and own-time tops."""
    if dump:
        profile.dump_stats(dump)
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(lines)
        print(out.getvalue())


def timed_get(client: object, path: str) -> float:
    """Milliseconds for ``client.get(path)`` (a Django test client); exits unless it answers 200."""
    begun = time.perf_counter()
    response = client.get(path)  # type: ignore[attr-defined]
    if response.status_code != 200:
        raise SystemExit(f"{path} answered {response.status_code}")
    return (time.perf_counter() - begun) * 1000
