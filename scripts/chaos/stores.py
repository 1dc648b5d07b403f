"""The stores under the stack as kill targets: a private Redis, and the run's PostgreSQL database."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import urllib.parse
from contextlib import suppress

from .common import OBSERVER, database_name, free_port


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
        self.popen = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
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
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
                    sql.Identifier(self.database), sql.SQL("true" if allowed else "false")
                )
            )
            if not allowed:
                cut = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                    "AND pid <> pg_backend_pid() AND application_name <> %s",
                    (self.database, OBSERVER),
                ).fetchall()
                self.sessions_cut += len(cut)

    def kill(self) -> None:
        self.outages += 1
        self.allow(False)

    def start(self) -> None:
        self.allow(True)

    def stop(self) -> None:
        self.allow(True)
