"""What every part of the chaos run shares: where things are, its defaults, the run's database and broker."""

from __future__ import annotations

import socket
import sys
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/recovery_chaos"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/7"
KILL_TARGETS = ("worker", "web", "fleet")
HARD_TARGETS = ("redis", "postgres")  # the stores under the stack: with --kill-redis and --kill-postgres
OBSERVER = "chaos-observer"  # this script's own database sessions: never cut, the figures are read through them
HARD_CLOCK_SKEW = 300.0
# --lossy-network: every delivery waits 50-400 ms; one in eight is cut mid-answer and one in ten never answered
# (the console gives up after DELIVERY_TIMEOUT_SECONDS) -- both after the agent received and acted on it.
NETWORK: dict[str, Any] = {"latency": (0.05, 0.4), "drop_mid_response": 0.12, "black_hole": 0.10, "hold_seconds": 30.0}


def say(message: str) -> None:
    print(message, flush=True)


def database_name(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    name = parts.path.lstrip("/")
    if not parts.scheme.startswith("postgres") or not name:
        raise SystemExit(f"DATABASE_URL must be a postgres://…/<name> URL, not {url!r}")
    if "chaos" not in name:  # it is dropped: never the console's own database by mistake
        raise SystemExit(
            f"refusing to drop the database {name!r}: the chaos run drops and creates its database, "
            "so its name must contain 'chaos' (e.g. recovery_chaos)"
        )
    return name


def recreate_database(url: str, *, create: bool = True) -> None:
    """Drop the run's database (its name checked by ``database_name``) and, unless told not to, create it."""
    import psycopg
    from psycopg import sql

    name = database_name(url)
    parts = urllib.parse.urlsplit(url)
    maintenance = urllib.parse.urlunsplit(parts._replace(scheme="postgresql", path="/postgres", query=""))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def flush_broker(url: str) -> None:
    import redis

    if not url.startswith("redis://"):
        raise SystemExit(f"CELERY_BROKER_URL must be a redis:// URL, not {url!r}")
    client = redis.Redis.from_url(url, socket_timeout=5)
    client.flushdb()
    client.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def next_database(redis_url: str) -> str:
    """redis://host:port/7 -> redis://host:port/8 (database 0 when the URL names none)."""
    parts = urllib.parse.urlsplit(redis_url)
    number = int(parts.path.strip("/") or 0)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{number + 1}"))


def observed(url: str) -> str:
    """The database URL with this script's sessions named, so an outage spares them."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), ("application_name", OBSERVER)])
    return urllib.parse.urlunsplit(parts._replace(query=query))
