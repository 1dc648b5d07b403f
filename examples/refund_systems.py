"""The external systems of the worked example, simulated in memory for the examples.

Each dedupes on the idempotency key the way a real payment or messaging API does,
and counts the calls it received, so a run can show that nothing was done twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Systems:
    refunds: dict[str, str] = field(default_factory=dict)     # idempotency key -> refund reference
    notes: dict[str, str] = field(default_factory=dict)       # idempotency key -> ticket note
    messages: dict[str, str] = field(default_factory=dict)    # idempotency key -> customer message
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def read_ticket(self, ticket_id: str) -> dict[str, str]:
        self._count("read_ticket")
        return {"ticket": ticket_id, "customer": "Dana", "amount": "42.00", "currency": "EUR"}

    def refund(self, key: str, amount: str, currency: str) -> str:
        self._count("refund")
        return self.refunds.setdefault(key, f"R-{88 + len(self.refunds)}")

    def write_note(self, key: str, text: str) -> None:
        self._count("write_note")
        self.notes.setdefault(key, text)

    def message(self, key: str, text: str) -> None:
        self._count("message")
        self.messages.setdefault(key, text)
