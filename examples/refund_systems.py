"""What the examples share: the worked example's external systems, simulated in memory, and the command line.

Each system dedupes on the idempotency key the way a real payment or messaging API
does, and counts the calls it received, so a run can show that nothing was done twice.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from recovery_client import RecoveryClient


@dataclass
class Systems:
    amount: str = "42.00"  # what the ticket asks to refund
    refunds: dict[str, str] = field(default_factory=dict)  # idempotency key -> refund reference
    notes: dict[str, str] = field(default_factory=dict)  # idempotency key -> ticket note
    messages: dict[str, str] = field(default_factory=dict)  # idempotency key -> customer message
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def read_ticket(self, ticket_id: str) -> dict[str, str]:
        self._count("read_ticket")
        return {"ticket": ticket_id, "customer": "Dana", "amount": self.amount, "currency": "EUR"}

    def refund(self, key: str, amount: str, currency: str) -> str:
        self._count("refund")
        return self.refunds.setdefault(key, f"R-{88 + len(self.refunds)}")

    def write_note(self, key: str, text: str) -> None:
        self._count("write_note")
        self.notes.setdefault(key, text)

    def message(self, key: str, text: str) -> None:
        self._count("message")
        self.messages.setdefault(key, text)


def command_line(doc: str | None, *, ticket: str, agent: str, crash: str) -> tuple[argparse.Namespace, RecoveryClient]:
    """The examples' options (``--console``, ``--token``, ``--ticket``, ``--amount``, ``--crash``) and a client."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--console", default=os.environ.get("RECOVERY_CONSOLE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("RECOVERY_TOKEN"))
    parser.add_argument("--ticket", default=ticket)
    parser.add_argument("--amount", default="42.00", help="above 100 the refund needs an operator's approval")
    parser.add_argument("--crash", action="store_true", help=crash)
    args = parser.parse_args()
    if not args.token:
        parser.error(f"set RECOVERY_TOKEN or --token (python manage.py create_agent {agent} prints one)")
    return args, RecoveryClient(args.console, args.token)
