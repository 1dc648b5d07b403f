"""Simulated external systems: payments (refunds, credits), tickets (reads, notes), messaging.

These stand for *someone else's* systems, so they keep their own ledger in their
own SQLite file and deliberately do **not** dedupe on the idempotency key: every
call that commits is recorded, and a refund issued twice shows up twice. Keeping
effects single is the job of the agent and the console, and ``duplicates()`` is
how the demo and the tests check that they did.

Every call can be told to fail the way real integrations fail (``Fault``): a
timeout *after* the commit (the caller cannot tell, but the money moved), a
timeout *before* it (nothing happened), garbage instead of an answer, a rate
limit or a plain error.
"""

from __future__ import annotations

import random
import re
import secrets
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, overload

from .store import SqliteFile, demo_dir, now_iso

if TYPE_CHECKING:
    from .shapes import Ticket

# A fork's external id is its original's with ``~fork<n>`` (workflows.models.Workflow.fork), as are its keys.
LINEAGE = re.compile(r"~fork\d+")

__all__ = ["Execution", "Fault", "Ledgers", "RateLimited", "ServiceError", "SystemFailure", "SystemTimeout"]


class Fault(StrEnum):
    TIMEOUT_BEFORE_COMMIT = "timeout_before_commit"
    TIMEOUT_AFTER_COMMIT = "timeout_after_commit"
    GARBAGE = "garbage"
    RATE_LIMIT = "rate_limit"
    ERROR = "error"


class SystemFailure(Exception):
    """Any failure of a simulated system, as the caller sees it."""


class SystemTimeout(SystemFailure, TimeoutError):
    """No answer in time. Deliberately the same whether or not the call committed."""


class RateLimited(SystemFailure):
    """429: nothing was done."""


class ServiceError(SystemFailure):
    """500: nothing was done."""


# What a broken upstream really sends back: an HTML error page, truncated JSON, a null.
GARBAGE_ANSWERS = (
    "<html><body><h1>502 Bad Gateway</h1><script>alert('upstream')</script></body></html>",
    '{"ticket": "T-10',
    "null",
    '{"amount": "forty-two", "currency": 978}',
    "\ufffd\ufffd\x00\x1b[2J",
)

CUSTOMERS = (
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Ken Thompson",
    "Margaret Hamilton",
    "Donald Knuth",
    "Radia Perlman",
    "Frances Allen",
)
SUBJECTS = (
    "Charged twice for my order",
    "Parcel never arrived",
    "Item arrived broken",
    "Cancelled subscription still billed",
    "Wrong size delivered",
    "Invoice amount is wrong",
)


@dataclass(frozen=True)
class Execution:
    id: int
    system: str
    operation: str
    idempotency_key: str
    ref: str
    subject: str
    amount: str | None
    currency: str | None
    body: str
    agent: str
    executed_at: str


class Ledgers(SqliteFile):
    """The ledgers of the three systems, in one file: ``VAR_DIR/demo/ledgers.sqlite3`` by default."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS executions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        system TEXT NOT NULL,
        operation TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        ref TEXT NOT NULL,
        subject TEXT NOT NULL,
        amount TEXT,
        currency TEXT,
        body TEXT NOT NULL DEFAULT '',
        agent TEXT NOT NULL DEFAULT '',
        executed_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS executions_by_key ON executions (idempotency_key);
    """

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path or demo_dir() / "ledgers.sqlite3")
        self.payments = Payments(self)
        self.tickets = Tickets(self)
        self.messaging = Messaging(self)

    # --- writes (only through the systems below) ----------------------------------
    def execute(
        self,
        system: str,
        operation: str,
        key: str,
        *,
        subject: str,
        prefix: str,
        fault: Fault | None,
        agent: str = "",
        amount: str | None = None,
        currency: str | None = None,
        body: str = "",
    ) -> str:
        """Commit one execution (no dedupe: that is the point) and answer with its reference."""
        if fault == Fault.RATE_LIMIT:
            raise RateLimited(f"{system}: 429 Too Many Requests")
        if fault == Fault.ERROR:
            raise ServiceError(f"{system}: 500 Internal Server Error")
        if fault == Fault.TIMEOUT_BEFORE_COMMIT:
            raise SystemTimeout(f"{system}: no answer within 30 s")
        ref = f"{prefix}-{secrets.token_hex(4).upper()}"
        with self.connect() as conn:
            conn.execute(
                "INSERT INTO executions (system, operation, idempotency_key, ref, subject, amount, currency,"
                " body, agent, executed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (system, operation, key, ref, subject, amount, currency, body, agent, now_iso()),
            )
        if fault == Fault.TIMEOUT_AFTER_COMMIT:
            raise SystemTimeout(f"{system}: no answer within 30 s")  # same words: the caller cannot tell
        if fault == Fault.GARBAGE:
            return random.choice(GARBAGE_ANSWERS)
        return ref

    # --- queries --------------------------------------------------------------------
    def executions_for(self, key: str) -> list[Execution]:
        with self.connect() as conn:
            rows = conn.execute("SELECT * FROM executions WHERE idempotency_key = ? ORDER BY id", (key,))
            return [Execution(**dict(row)) for row in rows]

    def lookup(self, key: str) -> str | None:
        """The reference of the first execution under ``key``: what a system's search API answers."""
        found = self.executions_for(key)
        return found[0].ref if found else None

    def duplicates(self) -> dict[str, int]:
        """Idempotency keys executed more than once, with their count: each one is a broken guarantee. And money
        moved again across a lineage: a fork runs its steps under new keys (``T-1010~fork1:refund``), so the
        payments made under the keys of one workflow and its forks are counted together too, listed as
        ``T-1010:refund (across forks)``."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT idempotency_key, COUNT(*) FROM executions GROUP BY idempotency_key"
                " HAVING COUNT(*) > 1 ORDER BY idempotency_key"
            )
            found = {key: count for key, count in rows}
            money = conn.execute("SELECT idempotency_key FROM executions WHERE system = 'payments'").fetchall()
        lineages: dict[str, set[str]] = {}
        for (key,) in money:
            lineages.setdefault(LINEAGE.sub("", key), set()).add(key)
        found.update({f"{root} (across forks)": len(keys) for root, keys in sorted(lineages.items()) if len(keys) > 1})
        return found

    def totals(self) -> Totals:
        """Executions per operation, money moved per currency, and the number of duplicated keys."""
        with self.connect() as conn:
            counts = dict(conn.execute("SELECT operation, COUNT(*) FROM executions GROUP BY operation").fetchall())
            money: dict[str, Decimal] = {}
            for amount, currency in conn.execute("SELECT amount, currency FROM executions WHERE amount IS NOT NULL"):
                money[currency or "?"] = money.get(currency or "?", Decimal("0")) + Decimal(amount)
        return {
            "executions": sum(counts.values()),
            "by_operation": counts,
            "money": {currency: str(total) for currency, total in sorted(money.items())},
            "duplicate_keys": len(self.duplicates()),
        }

    def recent(self, *, limit: int = 200, search: str = "") -> list[Execution]:
        """Newest first; ``search`` matches an idempotency key, a reference or a ticket."""
        sql, args = "SELECT * FROM executions", []
        if search:
            sql += " WHERE idempotency_key LIKE ? OR ref = ? OR subject = ?"
            args = [f"%{search}%", search, search]
        with self.connect() as conn:
            rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit))
            return [Execution(**dict(row)) for row in rows]


class Totals(TypedDict):
    """What the ledgers executed (``Ledgers.totals``): the ledgers page's summary line."""

    executions: int
    by_operation: dict[str, int]
    money: dict[str, str]  # currency -> the total moved, as a decimal string
    duplicate_keys: int


class Payments:
    def __init__(self, ledgers: Ledgers) -> None:
        self.ledgers = ledgers

    def refund(
        self,
        key: str,
        *,
        ticket: str,
        amount: str,
        currency: str,
        agent: str = "",
        fault: Fault | None = None,
        operation: str = "refund",
    ) -> str:
        """Move money back to the customer; answers ``R-XXXXXXXX``."""
        Decimal(amount)  # refuse a malformed amount before anything is committed
        return self.ledgers.execute(
            "payments",
            operation,
            key,
            subject=ticket,
            prefix="R",
            fault=fault,
            agent=agent,
            amount=amount,
            currency=currency,
        )

    def lookup(self, key: str) -> str | None:
        """The reference of the refund made under ``key``, as a payments API's search would answer."""
        found = [e for e in self.ledgers.executions_for(key) if e.system == "payments"]
        return found[0].ref if found else None


class Tickets:
    def __init__(self, ledgers: Ledgers) -> None:
        self.ledgers = ledgers

    @overload
    def read(self, ticket: str) -> Ticket: ...
    @overload
    def read(self, ticket: str, *, fault: Fault | None) -> Ticket | str: ...

    def read(self, ticket: str, *, fault: Fault | None = None) -> Ticket | str:
        """A read commits nothing; it can still time out, be rate limited or answer garbage."""
        if fault == Fault.RATE_LIMIT:
            raise RateLimited("tickets: 429 Too Many Requests")
        if fault == Fault.ERROR:
            raise ServiceError("tickets: 500 Internal Server Error")
        if fault in (Fault.TIMEOUT_BEFORE_COMMIT, Fault.TIMEOUT_AFTER_COMMIT):
            raise SystemTimeout("tickets: no answer within 30 s")
        if fault == Fault.GARBAGE:
            return random.choice(GARBAGE_ANSWERS)
        rng = random.Random(ticket)  # the same ticket always reads the same
        customer = rng.choice(CUSTOMERS)
        return {
            "ticket": ticket,
            "customer": customer,
            "email": customer.split()[0].lower() + "@example.com",
            "subject": rng.choice(SUBJECTS),
            "amount": f"{rng.randint(500, 25000) / 100:.2f}",
            "currency": rng.choice(("EUR", "EUR", "USD")),
        }

    def add_note(self, key: str, *, ticket: str, text: str, agent: str = "", fault: Fault | None = None) -> str:
        return self.ledgers.execute(
            "tickets", "note", key, subject=ticket, prefix="N", fault=fault, agent=agent, body=text
        )


class Messaging:
    def __init__(self, ledgers: Ledgers) -> None:
        self.ledgers = ledgers

    def send(self, key: str, *, ticket: str, to: str, text: str, agent: str = "", fault: Fault | None = None) -> str:
        return self.ledgers.execute(
            "messaging", "message", key, subject=ticket, prefix="M", fault=fault, agent=agent, body=f"To {to}: {text}"
        )
