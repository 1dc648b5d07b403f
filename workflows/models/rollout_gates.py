"""The gates a rollout is started through, asked of an incident's open members: the money they can move
if resumed (``stake_of``: the total the operator types back), whether any member's runbook asks for a second
operator (``needs_four_eyes``), and whether a standby can take members over (``check_standby``). Each applies
the single decision's rule (``Decider``, ``workflows.money``) to every member."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from ..money import Amount, MoneyAtStake
from ..money_reading import MoneyReading, reading_of, reads_money, staged_amounts
from .drafting import Decider
from .runbooks import RESUMING_ACTIONS
from .workflows import MoneyTrail

if TYPE_CHECKING:
    from .agents import Agent
    from .incidents import Incident


@dataclass
class Stake:
    """What the members a rollout would resume can move, per currency (pending and planned money, as the
    blast radius counts it), and which members that total covers."""

    totals: dict[str, Decimal]
    members: list[int]
    unreadable: int = 0

    def add(self, pk: int, amounts: list[Amount] | None) -> None:
        """A member that can move ``amounts`` (``_movable``): in the total when every amount is read, counted
        apart otherwise; added in the order members come (by pk), so the total is the same Decimal each time."""
        if amounts is None:
            return
        if not amounts or any(a.value is None for a in amounts):
            self.unreadable += 1  # the rollout's confirmation cannot cover it: it waits for its own
            return
        for a in amounts:
            currency = (a.currency or "?").upper()
            self.totals[currency] = self.totals.get(currency, Decimal(0)) + (a.value or Decimal(0))
        self.members.append(pk)

    def text(self) -> str:
        return ", ".join(f"{amount} {currency}" for currency, amount in sorted(self.totals.items()))

    def check(self, typed: Mapping[str, str] | None) -> None:
        """ValueError unless ``typed`` gives exactly the total of every currency at stake."""
        if not self.totals:
            return
        typed = {c.strip().upper(): str(v).strip() for c, v in (typed or {}).items() if str(v).strip()}
        if not typed:
            raise ValueError(
                f"These members move money: type the total at stake per currency ({self.text()}) "
                "to confirm it. Nothing started."
            )
        for currency in sorted(set(typed) | set(self.totals)):
            if currency not in self.totals:
                raise ValueError(f"No {currency} is at stake: the total is {self.text()}. Nothing started.")
            if currency not in typed:
                raise ValueError(
                    f"Type the total at stake in {currency} too ({self.totals[currency]} {currency}). Nothing started."
                )
            try:
                amount = Decimal(typed[currency])
            except InvalidOperation:
                raise ValueError(
                    f"“{typed[currency][:40]}” is not an amount of {currency}: type the total "
                    f"as digits, e.g. {self.totals[currency]}. Nothing started."
                ) from None
            if amount != self.totals[currency]:
                raise ValueError(
                    f"The total at stake in {currency} is {self.totals[currency]}, not {amount}: read "
                    "the blast radius again. Nothing started."
                )


class RememberedTrail(MoneyTrail):
    """The recorded money history, each question asked once: an incident's members share a kind and effects."""

    def __init__(self) -> None:
        self.kinds: dict[str, bool] = {}
        self.names: dict[frozenset[str], set[str]] = {}

    def kind_moved_money(self, kind: str) -> bool:
        if kind not in self.kinds:
            self.kinds[kind] = super().kind_moved_money(kind)
        return self.kinds[kind]

    def names_that_moved_money(self, names: Iterable[str]) -> set[str]:
        key = frozenset(names)
        if key not in self.names:
            self.names[key] = super().names_that_moved_money(key)
        return self.names[key]


def stake_of(incident: Incident, action: str, *, stored: bool = False) -> Stake:
    """The money the open members can move if this action resumes them (none for an abort).

    Each member's resume state is read by the money rule here (the gate ``start`` applies); ``stored``
    reads the reading each member kept when it opened (``Checkpoint.at_stake``) instead: the same figures
    (``money.reads_money``), for the incident page, which must not walk thousands of resume states. Members
    keeping the same reading share it (``Checkpoint.stakes``), and it is judged once a kind of workflow."""
    stake = Stake({}, [])
    if action not in RESUMING_ACTIONS:
        return stake
    from .checkpoints import Checkpoint

    trail = RememberedTrail()  # Checkpoint.touches_money's rule, its history asked once per incident
    members = incident.members.open().order_by("pk")
    if not stored:
        for c in members.select_related("workflow"):
            stake.add(c.pk, _movable(reading_of(c.resume_state, kind=c.workflow.kind), c.workflow.kind, trail))
        return stake
    judged: dict[tuple[int, str], list[Amount] | None] = {}
    for pk, kind, kept in Checkpoint.stakes(members):
        key = (id(kept), kind)  # ``stakes`` keeps every shared reading alive until the loop ends
        if key not in judged:
            judged[key] = _movable(kept["money"], kind, trail)
        stake.add(pk, judged[key])
    return stake


def _movable(reading: MoneyReading, kind: str, trail: MoneyTrail) -> list[Amount] | None:
    """The pending and planned amounts a resume can move (the blast radius's figures, which workflows.money
    defines), or None when the money rule finds none."""
    if not reads_money(reading, kind=kind, history=trail):
        return None
    staged = staged_amounts(reading)
    return [a for stage in ("pending", "planned") for a in staged[stage]]


def needs_four_eyes(incident: Incident, action: str) -> bool:
    """A member's runbook asks for a second operator on this decision (as its single decision would). Its money
    is ``Checkpoint.touches_money``'s rule, the recorded history asked once per incident (``RememberedTrail``)
    instead of once per member."""
    trail = RememberedTrail()
    return any(
        Decider(c).needs_second_operator(
            action, money=bool(MoneyAtStake.of(c.resume_state, kind=c.workflow.kind, history=trail))
        )
        for c in incident.members.open().select_related("workflow", "runbook_version")
    )


def check_standby(incident: Incident, standby: Agent | None) -> None:
    """ValueError unless ``standby`` can take over at least one open member (the single decision's rule,
    ``Decider.check_standby``; a member it cannot take waits for its own decision, with the reason).

    What depends on the standby alone (named, advertising failover, running a kind of the members) is judged
    once; only members of a kind it runs and of another agent are asked one by one (each asks the lineage),
    so a wrong standby costs a query or two, not one per member of a 10,000-member incident."""
    if standby is None:
        raise ValueError("A failover needs the standby agent that takes the members over.")
    if why := standby.cannot(standby.Capability.FAILOVER):
        raise ValueError(why)
    members = incident.members.open()
    kinds = sorted(set(members.values_list("workflow__kind", flat=True)))
    if not kinds:
        raise ValueError("The incident has no open member to fail over.")
    if not any(standby.runs_kind(kind) for kind in kinds):
        raise ValueError(f"{standby.name} does not run {kinds[0]} workflows.")
    why = f"{standby.name} cannot take these workflows over."
    candidates = members.filter(workflow__kind__in=[k for k in kinds if standby.runs_kind(k)])
    for c in candidates.exclude(workflow__agent=standby).select_related("workflow__agent").order_by("pk"):
        try:
            Decider(c).check_standby(standby)
        except ValueError as exc:
            why = str(exc)
        else:
            return
    raise ValueError(why)
