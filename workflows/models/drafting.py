"""Deciding a checkpoint: the decision drafted from an operator's answer, checked, and recorded.

``Decider(checkpoint)`` holds the rules a decision must pass before it exists: the runbook
allows the action (its own version and that of every checkpoint a fork comes from), every
unknown effect is confirmed with its reference, a failover names a standby that can take
the workflow, money needs its tick (and each effect a fork repeats, its own), four eyes
where the runbook asks. ``record`` saves the draft and moves the checkpoint to DECIDED in
one compare-and-set. Decisions and checkpoints sit below this module: a decision names its
checkpoint, and a checkpoint knows nothing of how it is decided.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .agents import Agent
from .base import Conflict
from .checkpoints import Checkpoint
from .clocks import SlaClock
from .confirmations import Confirmation
from .decisions import Decision
from .events import Event
from .lineage import EarlierEffect, repeated_money
from .queue import OPEN_STATUSES, first_claim
from .runbooks import RESUMING_ACTIONS, Action, RunbookVersion
from .workflows import Workflow

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .base import Operator
    from .workflows import MoneyTrail


class Decider:
    """An operator's decision on one checkpoint, from draft to the recorded row a worker carries out."""

    def __init__(self, checkpoint: Checkpoint, *, history: MoneyTrail | None = None) -> None:
        self.checkpoint = checkpoint
        self.history = history  # the money rule's recorded history (None: asked afresh)

    def decide(self, *, by: Operator, **proposal: Any) -> Decision:
        """Record the operator's decision (``proposal``: ``draft``'s arguments).

        Raises ValueError when the decision itself is not acceptable, and Conflict
        (naming the winner) when another decision got there first.
        """
        return self.record(self.draft(**proposal), by=by)

    def draft(
        self,
        *,
        action: str,
        instructions: str = "",
        confirmations: Mapping[str, str] | None = None,
        confirmation_refs: Mapping[str, str] | None = None,
        new_owner: Operator | None = None,
        handoff_to: str = "",
        money_confirmed: bool = False,
        standby: Agent | None = None,
        repeats_confirmed: Iterable[int] = (),
    ) -> Decision:
        """The decision as it would be recorded, unsaved. ValueError when it is not acceptable."""
        checkpoint = self.checkpoint
        confirmations = {k: v for k, v in (confirmations or {}).items() if v}
        if action not in Action.values:
            raise ValueError(f"Unknown action {action!r}.")
        if refusing := self.refusing_runbook(action):
            raise ValueError(
                f"The runbook “{refusing.title}” does not allow {Action(action).label.lower()}"
                + (
                    "."
                    if refusing == checkpoint.runbook_version
                    else " (it binds the checkpoint this fork comes from)."
                )
            )
        self.check_confirmations(confirmations, confirmation_refs or {})
        if action in RESUMING_ACTIONS and (missing := self.missing_confirmations(confirmations)):
            raise ValueError("Confirm what happened to every unknown effect before resuming: " + ", ".join(missing))
        if action == Action.HANDOFF and not (new_owner or handoff_to.strip()):
            raise ValueError("A handoff needs a new owner or the human process that takes it over.")
        if action == Action.FAILOVER:
            self.check_standby(standby)
        money = action in RESUMING_ACTIONS and checkpoint.touches_money(self.history)
        if money and not money_confirmed:
            raise ValueError("This decision touches money: tick the explicit confirmation.")
        # Money re-run in a fork: the lineage committed it already, under keys no idempotency check compares.
        repeats = self.repeated_effects() if money else []
        if unconfirmed := [e for e in repeats if e.step_id not in set(repeats_confirmed)]:
            raise ValueError(
                "This moves money again that the lineage already moved; tick each earlier effect "
                "it repeats: " + "; ".join(e.sentence() for e in unconfirmed) + "."
            )
        four_eyes = self.needs_second_operator(action, money=money)
        return Decision(
            checkpoint=checkpoint,
            action=action,
            instructions=instructions,
            confirmations=confirmations,
            confirmation_refs=Confirmation.references(confirmations, confirmation_refs or {}),
            new_owner=new_owner,
            handoff_to=handoff_to.strip(),
            standby=standby if action == Action.FAILOVER else None,
            replaced_agent=checkpoint.workflow.agent if action == Action.FAILOVER else None,
            repeats_confirmed=[e.as_dict() for e in repeats],
            status=Decision.Status.PROPOSED if four_eyes else Decision.Status.QUEUED,
        )

    def record(self, decision: Decision, *, by: Operator) -> Decision:
        """OPEN|CLAIMED -> DECIDED, saving the drafted decision: the row is the outbox entry a worker
        carries out. Conflict (naming the winner) when another decision got there first."""
        checkpoint = self.checkpoint
        if not checkpoint.may_be_decided_by(by):
            raise Conflict(self.conflict_message())
        four_eyes = decision.status == Decision.Status.PROPOSED
        decision.decided_by = by
        if not four_eyes and not decision.is_polled:
            # Due for the relay from its insert on (``enqueue`` hands it to the broker after the commit): the
            # outbox stamp in the INSERT, not in an UPDATE of its own after it.
            decision.next_attempt_at = timezone.now()
        try:
            with transaction.atomic():
                decision.save(force_insert=True)
                # Decided by whoever held it as read: a claim or reassignment meanwhile makes this lose.
                now = timezone.now()
                won = checkpoint.move(
                    Checkpoint.Status.DECIDED,
                    from_=OPEN_STATUSES,
                    expect={"assignee_id": checkpoint.assignee_id},
                    actor=by,
                    verb=Event.Verb.DECIDED,
                    data={"action": decision.action, "four_eyes": four_eyes, **decision.audit_facts()},
                    assignee=checkpoint.assignee or by,
                    remind_at=None,
                    release_at=None,
                    **first_claim(now),
                    first_decision_at=Coalesce(F("first_decision_at"), Value(decision.decided_at)),
                    # A proposal waiting for four eyes keeps the decision clock running.
                    clock_stopped_at=None if four_eyes else now,
                )
                if won:
                    SlaClock(checkpoint).settle_late(now)
                if won and four_eyes:
                    decision.ask_for_approval()
                if won and not four_eyes:
                    decision.enqueue()
                transaction.set_rollback(not won)  # a lost move takes the decision row back with it
        except IntegrityError as exc:  # another active decision won the partial unique index
            raise Conflict(self.conflict_message()) from exc
        if not won:
            raise Conflict(self.conflict_message())  # asked after the rollback, so it names the winner
        return decision

    # --- the checks a draft passes ---

    def refusing_runbook(self, action: str) -> RunbookVersion | None:
        """The first binding runbook version that does not allow ``action``; None when all allow it."""
        return next((runbook for runbook in self.checkpoint.runbook_versions() if not runbook.allows(action)), None)

    def needs_second_operator(self, action: str, *, money: bool) -> bool:
        """Four eyes: on a money resume under a runbook that asks for it, or on every resume if it says so
        (as the runbook's version read when the checkpoint opened, and that of every checkpoint it came from)."""
        if action not in RESUMING_ACTIONS:
            return False
        return any(
            runbook.four_eyes_on_every_resume or (money and runbook.requires_four_eyes)
            for runbook in self.checkpoint.runbook_versions()
        )

    def check_confirmations(self, confirmations: Mapping[str, str], references: Mapping[str, str]) -> None:
        """ValueError unless each confirmation names an unknown effect of this checkpoint, says happened or
        did not happen, and one that happened names the external reference seen (a decision's confirmations,
        or those confirmed ahead of it from a provider's evidence)."""
        unknown_keys = {e["idempotency_key"] for e in self.checkpoint.unknown_effects}
        if bad := [k for k, v in confirmations.items() if k not in unknown_keys or v not in Confirmation.values]:
            raise ValueError(f"Confirmations name no unknown effect or carry a bad value: {', '.join(bad)}.")
        if unreferenced := Confirmation.unreferenced(confirmations, references):
            raise ValueError(
                "Give the external reference you saw for every effect that happened: " + ", ".join(unreferenced)
            )

    def missing_confirmations(self, confirmations: Mapping[str, str]) -> list[str]:
        """The unknown effects a resume may not pass over: those without a valid confirmation."""
        return [
            e["idempotency_key"]
            for e in self.checkpoint.unknown_effects
            if confirmations.get(e["idempotency_key"]) not in Confirmation.values
        ]

    def repeated_effects(self) -> list[EarlierEffect]:
        """Effects committed earlier in the workflow's lineage whose money a resume here moves again (a fork's):
        each needs the operator's own tick, naming it, when the decision touches money."""
        return repeated_money(self.checkpoint)

    def standbys(self) -> list[Agent]:
        """Agents that could take this workflow over: active, advertising failover, running its kind."""
        workflow = self.checkpoint.workflow
        # Per agent, through the (agent, external_id) unique index: a ``NOT IN`` over every workflow with
        # this external id read the whole workflow table (12 ms of a workbench at 100,000 workflows).
        taken = Workflow.objects.filter(agent=OuterRef("pk"), external_id=workflow.external_id)
        return [
            a
            for a in Agent.objects.filter(is_active=True).exclude(pk=workflow.agent_id).exclude(Exists(taken))
            if a.can(Agent.Capability.FAILOVER) and a.runs_kind(workflow.kind)
        ]

    def check_standby(self, standby: Agent | None) -> None:
        """ValueError naming why ``standby`` cannot take the workflow over (None: none was named)."""
        if standby is None:
            raise ValueError("A failover needs the standby agent that takes the workflow over.")
        kind = self.checkpoint.workflow.kind
        if standby not in self.standbys():
            why = standby.cannot(Agent.Capability.FAILOVER) or (
                f"{standby.name} does not run {kind} workflows."
                if not standby.runs_kind(kind)
                else f"{standby.name} cannot take this workflow over."
            )
            raise ValueError(why)

    def conflict_message(self) -> str:
        """Why a decision lost, read afresh: who decided or claimed it first, or what it is now."""
        checkpoint = self.checkpoint
        checkpoint.refresh_from_db()
        decision = checkpoint.current_decision()
        if decision:
            return (
                f"Already decided: {decision.get_action_display().lower()} by "
                f"{decision.decided_by.get_username()} at {decision.decided_at:%Y-%m-%d %H:%M:%S} UTC."
            )
        if checkpoint.status == Checkpoint.Status.CLAIMED and checkpoint.assignee:
            return f"{checkpoint.assignee.get_username()} has claimed this checkpoint."
        return f"The checkpoint is {checkpoint.status} now: someone else acted on it first."
