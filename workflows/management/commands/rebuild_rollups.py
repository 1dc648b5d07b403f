"""Rebuild the daily rollups of the resume dashboard and readiness over a range of days.

    python manage.py rebuild_rollups                                 # every day since the first record
    python manage.py rebuild_rollups --start 2026-11-01 --end 2026-11-30

Idempotent: each day's rows are deleted and inserted again in one transaction. The first run
rolls the whole history whatever the range (the pages trust every rolled day); Celery beat then
keeps the recent days rolled (``workflows.tasks.roll_figures``).
"""

from __future__ import annotations

import time
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows import rollups


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{value!r} is not a date (YYYY-MM-DD)") from None


class Command(BaseCommand):
    help = "Rebuild the daily rollups of the recovery figures over a range of days (default: all)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--start", type=_date, help="first day (UTC), default: the first day recorded")
        parser.add_argument("--end", type=_date, help="last day (UTC), default: today")
        parser.add_argument("--quiet", action="store_true", help="no line per day")

    def handle(self, *args: Any, start: date | None, end: date | None, quiet: bool, **options: Any) -> None:
        if start and end and start > end:
            raise CommandError("--start is after --end")
        started = time.perf_counter()
        covered = rollups.rebuild(start, end, say=None if quiet else self.stdout.write)
        if covered:
            self.stdout.write(f"rolled {covered[0]} .. {covered[1]} in {time.perf_counter() - started:.1f}s")
