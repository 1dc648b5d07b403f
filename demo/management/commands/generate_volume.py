"""Load realistic volumes with COPY: agents, workflows, 1M+ steps, checkpoints in every state, decisions, events.

    python manage.py generate_volume                       # 1M steps, 100k open checkpoints (about a minute)
    python manage.py generate_volume --steps 10000 --open 1000 --workflows 5000 --resolved 2000

It appends to what is there (ids continue after the existing ones) and is meant for
benchmark and capacity databases, never for production: generated agents have tokens
nobody knows. PostgreSQL only.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from demo.volume import generate


class Command(BaseCommand):
    help = "Append realistic volumes (workflows, steps, checkpoints, decisions, events) with PostgreSQL COPY."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", type=int, default=20)
        parser.add_argument("--workflows", type=int, default=250_000)
        parser.add_argument(
            "--steps", type=int, default=1_000_000, help="spread over the workflows, ~250 B of JSON each"
        )
        parser.add_argument(
            "--open",
            type=int,
            default=100_000,
            dest="open_checkpoints",
            help="checkpoints on the queue (open or claimed; some breached, some warned)",
        )
        parser.add_argument("--decided", type=int, default=10_000, help="checkpoints with a decision in flight")
        parser.add_argument("--resolved", type=int, default=100_000, help="resolved checkpoints (history)")
        parser.add_argument("--due", type=int, default=0, help="open checkpoints past due, breach not recorded yet")
        parser.add_argument("--seed", type=int, default=2026)

    def handle(self, *args: Any, seed: int, **counts: int) -> None:
        started = time.perf_counter()
        self.stdout.write(f"generate_volume: seed {seed}")
        try:
            volume = generate(
                seed=seed,
                progress=lambda m: self.stdout.write(f"  {m}"),
                agents=counts["agents"],
                workflows=counts["workflows"],
                steps=counts["steps"],
                open_checkpoints=counts["open_checkpoints"],
                decided=counts["decided"],
                resolved=counts["resolved"],
                due=counts["due"],
            )
        except (RuntimeError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        elapsed = time.perf_counter() - started
        self.stdout.write(
            self.style.SUCCESS(f"loaded {volume.rows:,} rows in {elapsed:.1f}s ({volume.rows / elapsed:,.0f} rows/s)")
        )
