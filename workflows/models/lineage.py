"""A workflow's lineage: the forks it came from, and the effects they already committed.

A fork copies the steps before its fork point with their idempotency keys, so the
agent skips them; every step from the fork point on runs again under a **new**
key, and no key check can see that the refund it issues is the one its original
issued already. This module is where the console sees it: the effects committed
earlier in the lineage that a fork does not carry, and which of them the fork (or
a later resume of it) will run again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Exists, OuterRef, Q

from .steps import Step, stake
from .workflows import Workflow

if TYPE_CHECKING:
    from ..shapes import JsonObject
    from .checkpoints import Checkpoint

# Forks of forks of …: far more than any operator makes, and a bound on a corrupted chain.
MAX_ANCESTORS = 20


def ancestors(workflow: Workflow) -> list[Workflow]:
    """The workflows this one was forked from, nearest first."""
    found: list[Workflow] = []
    seen = {workflow.pk}
    current = workflow
    while current.forked_from_id is not None and current.forked_from_id not in seen and len(found) < MAX_ANCESTORS:
        parent = Workflow.objects.filter(pk=current.forked_from_id).first()
        if parent is None:
            break
        found.append(parent)
        seen.add(parent.pk)
        current = parent
    return found


@dataclass(frozen=True)
class EarlierEffect:
    """An effect a workflow of the lineage committed, which a fork does not carry as a copy."""

    step_id: int
    workflow_id: int
    external_id: str
    seq: int
    name: str
    external_ref: str | None
    amount: str | None
    currency: str | None
    original: bool  # committed by the workflow forked from (else by an earlier ancestor)

    @property
    def money(self) -> str:
        """ "247.92 EUR", or "" when its input declares no amount."""
        return f"{self.amount} {self.currency or ''}".strip() if self.amount is not None else ""

    def sentence(self) -> str:
        """``the original committed issue_refund (247.92 EUR) at step 3, ref R-…``, for forms and errors."""
        who = "the original" if self.original else f"an earlier fork ({self.external_id})"
        what = f"{self.name} ({self.money})" if self.money else self.name
        ref = f", ref {self.external_ref}" if self.external_ref else ", no reference recorded"
        return f"{who} committed {what} at step {self.seq}{ref}"

    def as_dict(self) -> JsonObject:
        return {
            "step_id": self.step_id,
            "workflow_id": self.workflow_id,
            "seq": self.seq,
            "name": self.name,
            "external_ref": self.external_ref,
            "amount": self.amount,
            "currency": self.currency,
        }


def committed_earlier(workflow: Workflow, *, carried: Iterable[str | None] = ()) -> list[EarlierEffect]:
    """Effects committed by ``workflow``'s ancestors whose key ``carried`` (the keys the workflow holds) lacks:
    what the lineage did that this workflow does not hold as a copy. One per key, nearest ancestor first."""
    return _committed_in([(a, i == 0) for i, a in enumerate(ancestors(workflow))], carried)


def committed_before_fork(original: Workflow, from_seq: int) -> list[EarlierEffect]:
    """What a fork of ``original`` from step ``from_seq`` would not carry: the original's committed effects
    from that step on, and those of its own ancestors it does not hold."""
    carried = original.steps.filter(seq__lt=from_seq).values_list("idempotency_key", flat=True)
    lineage = [(original, True)] + [(a, False) for a in ancestors(original)]
    return _committed_in(lineage, list(carried))


def _committed_in(lineage: list[tuple[Workflow, bool]], carried: Iterable[str | None]) -> list[EarlierEffect]:
    seen: set[str | None] = {key for key in carried if key}
    found = []
    for workflow, original in lineage:
        for step in workflow.steps.filter(kind=Step.Kind.EFFECT, status=Step.Status.COMMITTED).order_by("seq"):
            if step.idempotency_key in seen:
                continue
            seen.add(step.idempotency_key)
            amount, currency = stake(step.input)
            found.append(
                EarlierEffect(
                    step.pk,
                    workflow.pk,
                    workflow.external_id,
                    step.seq,
                    step.name,
                    step.external_ref,
                    amount,
                    currency,
                    original,
                )
            )
    return found


def will_repeat(earlier: list[EarlierEffect], names: Iterable[str] | None) -> list[EarlierEffect]:
    """The earlier effects a run of ``names`` (the steps still to come) repeats; every one when the
    steps to come are unknown (None)."""
    if names is None:
        return earlier
    ahead = set(names)
    return [e for e in earlier if e.name in ahead]


def repeated_by(checkpoint: Checkpoint) -> list[EarlierEffect]:
    """The effects committed earlier in the lineage that resuming ``checkpoint`` runs again: for a checkpoint
    of a fork, the ancestors' effects the fork neither carries nor has committed itself yet, among the
    steps its plan (or its remaining steps) names."""
    workflow = checkpoint.workflow
    if workflow.forked_from_id is None:
        return []
    steps = list(workflow.steps.values_list("idempotency_key", "name", "kind", "status"))
    done = {name for _key, name, kind, status in steps if kind == Step.Kind.EFFECT and status == Step.Status.COMMITTED}
    earlier = [e for e in committed_earlier(workflow, carried=[key for key, *_rest in steps]) if e.name not in done]
    return will_repeat(earlier, steps_ahead(checkpoint))


def repeated_money(checkpoint: Checkpoint) -> list[EarlierEffect]:
    """The repeats that need the operator's named tick when a resume here touches money: those whose earlier
    run carried an amount or whose step the plan says moves money; all of them when none can be told apart
    (money is at stake, and no amount can be read: fail safe)."""
    repeats = repeated_by(checkpoint)
    moving = {
        str(step.get("name")) for step in checkpoint.plan or [] if isinstance(step, dict) and step.get("moves_money")
    }
    return [e for e in repeats if e.money or e.name in moving] or repeats


def lineage_effects(checkpoint: Checkpoint) -> list[EarlierEffect]:
    """What the workbench lists for a checkpoint of a fork: every effect committed earlier in its lineage that
    the fork does not hold as a copy (``repeated_by`` says which of them a resume runs again)."""
    workflow = checkpoint.workflow
    if workflow.forked_from_id is None:
        return []
    return committed_earlier(workflow, carried=workflow.steps.values_list("idempotency_key", flat=True))


def steps_ahead(checkpoint: Checkpoint) -> list[str] | None:
    """The names of the steps a resume will run, from the plan or the state's ``remaining``; None: unknown."""
    if checkpoint.plan is not None:
        return [str(step.get("name")) for step in checkpoint.plan if isinstance(step, dict)]
    remaining = checkpoint.state.get("remaining") if isinstance(checkpoint.state, dict) else None
    if isinstance(remaining, list):
        return [str(name) for name in remaining]
    return None


def repeats_an_earlier_effect() -> Q:
    """Over workflows: a committed effect of this fork that the workflow it was forked from committed too, under
    another key (what a fork runs again). Its parent holds copies of everything before its own fork point,
    so one level sees a repeat of any ancestor's effect the parent carries."""
    earlier = Step.objects.filter(
        workflow=OuterRef(OuterRef("forked_from")),
        kind=Step.Kind.EFFECT,
        status=Step.Status.COMMITTED,
        name=OuterRef("name"),
    ).exclude(idempotency_key=OuterRef("idempotency_key"))
    # Only forks can repeat across a lineage: the column test spares every other workflow the subquery.
    return Q(forked_from__isnull=False) & Q(
        Exists(
            Step.objects.filter(workflow=OuterRef("pk"), kind=Step.Kind.EFFECT, status=Step.Status.COMMITTED).filter(
                Exists(earlier)
            )
        )
    )
