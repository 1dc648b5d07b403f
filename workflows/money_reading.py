"""The money reading a checkpoint stores when it opens (``Checkpoint.at_stake``): ``workflows.money``'s rule
applied once to its resume state and kept as JSON, so that pages summing thousands of checkpoints read a few
values each instead of walking every resume state, and find the same figures (``reads_money``,
``staged_amounts``)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TypeAlias, TypedDict

from .money import STAGES, Amount, History, amounts_by_stage, unseen_effect_names

# One amount as stored: the exact text of its value (``str`` of the Decimal, read back unchanged) or None when
# it could not be read, and its currency (None when none was found).
StoredAmount: TypeAlias = list[str | None]


class MoneyReading(TypedDict):
    """A resume state's money, read once by this module's rule and stored (``Checkpoint.at_stake``), so that
    pages summing thousands of checkpoints read a few values each instead of walking their resume states.

    ``committed``, ``pending`` and ``planned``: ``amounts_by_stage``'s amounts in its order, each as
    ``[value, currency]``. ``unseen`` and ``planless``: what only the recorded trail can add (``MoneyAtStake.of``
    with a history): the names of effects seen without an amount and of the steps said to remain, and whether
    the agent sent no plan (then its kind of workflow having moved money counts)."""

    committed: list[StoredAmount]
    pending: list[StoredAmount]
    planned: list[StoredAmount]
    unseen: list[str]
    planless: bool


def reading_of(resume_state: object, *, kind: str) -> MoneyReading:
    """What ``Checkpoint.at_stake`` keeps of a resume state's money: ``amounts_by_stage`` and the names only the
    trail can judge, as JSON (values as exact decimal text)."""
    state = resume_state if isinstance(resume_state, Mapping) else {}
    staged = amounts_by_stage(state, kind=kind)
    stored = {
        stage: [[None if a.value is None else str(a.value), a.currency] for a in staged[stage]] for stage in STAGES
    }
    return MoneyReading(
        committed=stored["committed"],
        pending=stored["pending"],
        planned=stored["planned"],
        unseen=sorted(unseen_effect_names(state)),
        planless=not isinstance(state.get("plan"), list),
    )


def staged_amounts(reading: MoneyReading) -> dict[str, list[Amount]]:
    """``amounts_by_stage`` of the resume state the reading was made from, read back from it (the same
    amounts, in the same order: a sum over them is the one the rule's amounts give)."""
    stored = {"committed": reading["committed"], "pending": reading["pending"], "planned": reading["planned"]}
    return {
        stage: [Amount(None if value is None else Decimal(value), currency) for value, currency in stored[stage]]
        for stage in STAGES
    }


def reads_money(reading: MoneyReading, *, kind: str, history: History) -> bool:
    """Whether ``MoneyAtStake.of(resume_state, kind=kind, history=history)`` finds money, from the reading alone.

    Without history the rule finds money exactly when a pending or planned amount was read (each money effect
    gives one, "amount unknown" at least). A history adds effects seen without an amount whose name moved money
    before, and, with no plan, the kind's and the remaining steps' past: exactly ``unseen`` and ``planless``."""
    if reading["pending"] or reading["planned"]:
        return True
    if reading["unseen"] and history.names_that_moved_money(set(reading["unseen"])):
        return True
    return reading["planless"] and history.kind_moved_money(kind)
