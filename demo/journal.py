"""The demo agent runtime's own memory: its runs, the deliveries it accepted, its ticket counter.

A real agent runtime keeps this in its own store, so it survives a restart: a
delivery the console retries after a crash is recognised (and acted on once),
and a polling agent picks its paused runs up again.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from .store import SqliteFile, demo_dir, now_iso

if TYPE_CHECKING:
    from .shapes import Decision, JournalDelivery, JournalRun, ResumeState, RunState

WAITING = "waiting"  # a checkpoint is open and the agent waits for the decision
CREATING = "creating"  # journaled before the console is asked, so a crash in between leaves a trace
ORPHANED = "orphaned"  # nobody drives it any more (the process died): the console's sweep pauses it
# Runs that never became a workflow: not counted as launches.
NOT_LAUNCHED = ("skipped", "refused")


class Journal(SqliteFile):
    SCHEMA = """
    CREATE TABLE IF NOT EXISTS runs (
        external_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        kind TEXT NOT NULL,
        workflow_id TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT '{}',
        resume_state TEXT NOT NULL DEFAULT '{}',
        updated_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, agent);
    CREATE TABLE IF NOT EXISTS deliveries (
        delivery_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL,
        received_at TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    -- Every step report the console answered 2xx: what it must still hold after any crash of its own.
    CREATE TABLE IF NOT EXISTS acknowledged (
        workflow_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        status TEXT NOT NULL,
        PRIMARY KEY (workflow_id, seq, status)
    );
    -- Every delivery the resume endpoint acted on, one row each time: the audit of the dedupe above.
    CREATE TABLE IF NOT EXISTS acted (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id TEXT NOT NULL,
        acted_at TEXT NOT NULL
    );
    """

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path or demo_dir() / "runtime.sqlite3")

    # --- ticket numbers ----------------------------------------------------------
    def next_number(self, name: str, start: int = 1000) -> int:
        with self.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO counters (name, value) VALUES (?, ?)", (name, start))
            conn.execute("UPDATE counters SET value = value + 1 WHERE name = ?", (name,))
            value: int = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()[0]
            return value

    # --- runs ------------------------------------------------------------------------
    def save_run(
        self,
        external_id: str,
        *,
        agent: str,
        kind: str,
        status: str,
        workflow_id: str = "",
        checkpoint_id: str = "",
        state: RunState | None = None,
        resume_state: ResumeState | None = None,
    ) -> None:
        with self.connect() as conn:
            conn.execute(
                "INSERT INTO runs (external_id, agent, kind, workflow_id, checkpoint_id, status, state,"
                " resume_state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (external_id) DO UPDATE SET workflow_id = excluded.workflow_id,"
                " checkpoint_id = excluded.checkpoint_id, status = excluded.status, state = excluded.state,"
                " resume_state = excluded.resume_state, updated_at = excluded.updated_at",
                (
                    external_id,
                    agent,
                    kind,
                    workflow_id,
                    checkpoint_id,
                    status,
                    json.dumps(state or {}),
                    json.dumps(resume_state or {}),
                    now_iso(),
                ),
            )

    def set_status(self, external_id: str, status: str, *, workflow_id: str | None = None) -> None:
        with self.connect() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, workflow_id = COALESCE(?, workflow_id), updated_at = ?"
                " WHERE external_id = ?",
                (status, workflow_id, now_iso(), external_id),
            )

    def run(self, external_id: str) -> JournalRun | None:
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM runs WHERE external_id = ?", (external_id,)).fetchone()
        return self._decode(row) if row else None

    @staticmethod
    def _decode(row: sqlite3.Row) -> JournalRun:
        return {  # the columns of ``runs``, the JSON ones read back
            "external_id": row["external_id"],
            "agent": row["agent"],
            "kind": row["kind"],
            "workflow_id": row["workflow_id"],
            "checkpoint_id": row["checkpoint_id"],
            "status": row["status"],
            "state": json.loads(row["state"]),
            "resume_state": json.loads(row["resume_state"]),
            "updated_at": row["updated_at"],
        }

    def runs(self, *, status: str | None = None, agent: str | None = None) -> list[JournalRun]:
        sql, args = "SELECT * FROM runs WHERE 1 = 1", list[str]()
        if status:
            sql, args = sql + " AND status = ?", [*args, status]
        if agent:
            sql, args = sql + " AND agent = ?", [*args, agent]
        with self.connect() as conn:
            rows = conn.execute(sql + " ORDER BY updated_at", args).fetchall()
        return [self._decode(r) for r in rows]

    def launched(self) -> int:
        """Workflows started so far, across restarts of the runtime (what ``--total`` counts)."""
        marks = ", ".join("?" for _ in NOT_LAUNCHED)
        with self.connect() as conn:
            count: int = conn.execute(
                f"SELECT COUNT(*) FROM runs WHERE status NOT IN ({marks})",  # noqa: S608
                NOT_LAUNCHED,
            ).fetchone()[0]
        return count

    # --- what the console acknowledged ---------------------------------------------------
    def acknowledge(self, workflow_id: str, seq: int, status: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO acknowledged (workflow_id, seq, status) VALUES (?, ?, ?)",
                (workflow_id, seq, status),
            )

    def acknowledged(self) -> list[tuple[str, int, str]]:
        """(workflow id, seq, status) of every step report the console answered with a 2xx."""
        with self.connect() as conn:
            return [
                (str(w), int(q), str(s))
                for w, q, s in conn.execute(
                    "SELECT workflow_id, seq, status FROM acknowledged ORDER BY workflow_id, seq"
                )
            ]

    def wait_again(self, external_id: str, *, workflow_id: str, checkpoint_id: str, resume_state: ResumeState) -> None:
        """An orphaned run found paused at a checkpoint: wait for its decision, keeping the saved state."""
        with self.connect() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, workflow_id = ?, checkpoint_id = ?, resume_state = ?,"
                " updated_at = ? WHERE external_id = ?",
                (WAITING, workflow_id, checkpoint_id, json.dumps(resume_state), now_iso(), external_id),
            )

    def waiting_count(self) -> int:
        with self.connect() as conn:
            count: int = conn.execute("SELECT COUNT(*) FROM runs WHERE status = ?", (WAITING,)).fetchone()[0]
        return count

    # --- deliveries ----------------------------------------------------------------------
    def accept_delivery(self, delivery_id: str, *, agent: str, payload: Decision) -> bool:
        """Record a delivery; False when it was accepted before (the console retried it)."""
        with self.connect() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO deliveries (delivery_id, agent, payload, status, received_at)"
                " VALUES (?, ?, ?, 'accepted', ?)",
                (delivery_id, agent, json.dumps(payload), now_iso()),
            )
            return cursor.rowcount == 1

    def acted(self, delivery_id: str) -> None:
        """The resume endpoint acts on this delivery (an audit row, apart from the dedupe that decided it)."""
        with self.connect() as conn:
            conn.execute("INSERT INTO acted (delivery_id, acted_at) VALUES (?, ?)", (delivery_id, now_iso()))

    def acted_more_than_once(self) -> dict[str, int]:
        """Deliveries the resume endpoint acted on more than once: each must be acted on once, however
        often the console sends it (a restart carrying an unfinished one out again is not counted here)."""
        with self.connect() as conn:
            return {
                str(d): int(n)
                for d, n in conn.execute(
                    "SELECT delivery_id, COUNT(*) FROM acted GROUP BY delivery_id HAVING COUNT(*) > 1"
                )
            }

    def finish_delivery(self, delivery_id: str, status: str = "done") -> None:
        with self.connect() as conn:
            conn.execute(
                "UPDATE deliveries SET status = ?, finished_at = ? WHERE delivery_id = ?",
                (status, now_iso(), delivery_id),
            )

    def unfinished_deliveries(self) -> list[JournalDelivery]:
        """Accepted but never carried out: the process died in between. Picked up again at start."""
        with self.connect() as conn:
            rows = conn.execute("SELECT * FROM deliveries WHERE status = 'accepted' ORDER BY received_at")
            return [
                {
                    "delivery_id": r["delivery_id"],
                    "agent": r["agent"],
                    "payload": json.loads(r["payload"]),
                    "status": r["status"],
                    "received_at": r["received_at"],
                    "finished_at": r["finished_at"],
                }
                for r in rows
            ]

    def delivery_count(self, delivery_id: str) -> int:
        with self.connect() as conn:
            count: int = conn.execute(
                "SELECT COUNT(*) FROM deliveries WHERE delivery_id = ?", (delivery_id,)
            ).fetchone()[0]
        return count
