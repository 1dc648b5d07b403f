"""A checkpoint's money: what its resume state puts at stake, read once when it opens (``AtStake``, kept in
``Checkpoint.at_stake`` for the pages that sum thousands of members), and what a resume can move by
``workflows.money``'s rule, which fails safe (``money_check``, ``touches_money``). ``Checkpoint`` takes these
from ``CheckpointMoney``; its own job is its state and transitions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from ..money import MoneyAtStake
from ..money_reading import MoneyReading, reading_of
from ..shapes import PlanStep
from .workflows import MoneyTrail

if TYPE_CHECKING:
    from .checkpoints import Checkpoint
    from .workflows import Workflow


class AtStake(TypedDict):
    """What a checkpoint puts at stake, read once from its resume state when it opens (``Checkpoint.at_stake``):
    the blast radius and the queue's incident rows sum these over thousands of members without reading a
    resume state. ``money``: workflows.money's reading; ``unknown_effects``: how many effects' outcome is
    unknown; ``promises``: what the agent promised the user, as written."""

    money: MoneyReading
    unknown_effects: int
    promises: list[str]


def stake_in(resume_state: object, *, kind: str) -> AtStake:
    """``Checkpoint.at_stake`` of a resume state (none read as empty), by the rules the blast radius applied to it
    member by member."""
    state = resume_state if isinstance(resume_state, Mapping) else {}
    unknown = state.get("unknown_effects", [])
    return {
        "money": reading_of(state, kind=kind),
        "unknown_effects": len(unknown) if isinstance(unknown, list | dict | str) else 0,
        "promises": [text for text in state.get("promises") or [] if isinstance(text, str)],
    }


class CheckpointMoney:
    """The money half of ``Checkpoint`` (a mixin: no fields of its own; these are the checkpoint's)."""

    if TYPE_CHECKING:
        resume_state: dict[str, Any]
        at_stake: AtStake | None
        workflow: Workflow

    @property
    def stake(self) -> AtStake:
        """``at_stake``, or read from the resume state for a row written without it."""
        if self.at_stake is not None:
            return self.at_stake
        return stake_in(self.resume_state, kind=self.workflow.kind)

    @staticmethod
    def stakes(checkpoints: QuerySet[Checkpoint]) -> list[tuple[int, str, AtStake]]:
        """Each checkpoint's pk, kind and ``at_stake`` (read from its resume state where a row was written without
        it), in the queryset's order, as plain values: what pages summing many checkpoints read. Each distinct
        ``at_stake`` is decoded once, and the checkpoints keeping it share that one object (an incident's
        members mostly keep the same few): a caller may judge each once, by identity."""
        rows = list(checkpoints.values_list("pk", "workflow__kind", Cast("at_stake", TextField())))
        around = [pk for pk, _, kept in rows if kept is None]  # written around the model: read the resume state
        states = dict(checkpoints.filter(pk__in=around).values_list("pk", "resume_state")) if around else {}
        decoded: dict[str, AtStake] = {}
        stakes = []
        for pk, kind, kept in rows:
            if kept is None:
                stake = stake_in(states[pk], kind=kind)
            elif kept in decoded:
                stake = decoded[kept]
            else:
                stake = decoded[kept] = json.loads(kept)
            stakes.append((pk, kind, stake))
        return stakes

    @property
    def plan(self) -> list[PlanStep] | None:
        """What the agent will do if resumed, as it reported it; None when it did not say."""
        plan = self.resume_state.get("plan")
        return plan if isinstance(plan, list) else None

    def money_check(self, history: MoneyTrail | None = None) -> MoneyAtStake:
        """What a resume can move, by workflows.money's rule (which fails safe), with the recorded history
        (``history``: one that remembers its answers, for a caller asking of many checkpoints at once)."""
        return MoneyAtStake.of(self.resume_state, kind=self.workflow.kind, history=history or MoneyTrail())

    def money_reasons(self) -> list[str]:
        """Why resuming this checkpoint can move money, in words for the operator; empty when it cannot."""
        return self.money_check().reasons

    @cached_property  # a queue row asks it for its badge and again for its approval review
    def money_at_stake(self) -> list[str]:
        """The amounts a resume can move, each effect once, from the resume state alone (no query: one per
        queue row); "amount unknown" for a money effect whose amount the console cannot read."""
        return MoneyAtStake.of(self.resume_state, kind=self.workflow.kind).amounts

    def touches_money(self, history: MoneyTrail | None = None) -> bool:
        return bool(self.money_check(history))
