"""The outbox relay: hands due decisions to Celery, and keeps doing so when the broker comes back."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from workflows.tasks import reclaim_stuck_deliveries, relay_outbox

log = logging.getLogger("workflows.relay")


class Command(BaseCommand):
    help = "Relay queued decisions from the database outbox to the Celery broker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.SWEEP_INTERVAL_SECONDS,
            help="Polling interval in seconds (LISTEN/NOTIFY wakes it sooner on PostgreSQL).",
        )
        parser.add_argument("--once", action="store_true", help="Relay what is due and exit.")

    def handle(self, *args: Any, interval: float, once: bool, **options: Any) -> None:
        self.stdout.write(
            f"outbox relay: polling every {interval:g}s"
            + (", woken by NOTIFY recovery_outbox" if connection.vendor == "postgresql" else "")
        )
        while True:
            try:
                sent = relay_outbox()
                reclaimed = reclaim_stuck_deliveries()
                if sent or reclaimed:
                    log.info("relayed %d decision(s), reclaimed %d stuck delivery(ies)", sent, reclaimed)
            except Exception as exc:  # broker or database down: keep the rows, try again next tick
                log.warning("relay tick failed, will retry: %s", exc)
                connection.close()
            if once:
                return
            self.wait(interval)

    def wait(self, interval: float) -> None:
        if connection.vendor != "postgresql":
            time.sleep(interval)
            return
        try:
            connection.ensure_connection()
            raw = connection.connection
            raw.autocommit = True
            raw.execute("LISTEN recovery_outbox")
            gen = raw.notifies(timeout=interval)
            for _ in gen:
                gen.close()
                break
        except Exception as exc:
            log.warning("LISTEN failed, polling instead: %s", exc)
            connection.close()
            time.sleep(interval)
