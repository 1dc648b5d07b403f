"""A small SQLite file shared by threads and processes (the demo's own storage, not the console's)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path


def demo_dir() -> Path:
    """``VAR_DIR/demo``, read at call time so tests can point ``settings.VAR_DIR`` at a temp dir."""
    from django.conf import settings

    return Path(settings.VAR_DIR) / "demo"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class SqliteFile:
    """One connection per operation: cheap in SQLite, and nothing is shared between threads.

    WAL lets readers (the /ledgers page) run beside writers; the busy timeout makes
    concurrent writers from several threads or processes wait instead of failing.
    """

    SCHEMA = ""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(self.SCHEMA)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        # Autocommit: single statements commit on their own; multi-statement work says BEGIN IMMEDIATE.
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as conn:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
