"""Forking a workflow: restart it from a recorded step as a new workflow, decided like any resume.

Above checkpoints and their drafting: a fork opens its checkpoint and decides its resume
through ``Decider``, so it meets the runbook, four eyes and money rules a resume meets.
The lineage it joins (what earlier forks committed) is ``lineage``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import transaction

from .agents import Agent
from .checkpoints import Checkpoint
from .decisions import Decision
from .drafting import Decider
from .events import Event
from .steps import Step, fork_plan
from .workflows import Workflow

if TYPE_CHECKING:
    from ..shapes import Json
    from .base import Operator


def fork_workflow(
    workflow: Workflow,
    *,
    from_seq: int,
    by: Operator,
    reason: str,
    edited_input: Json = None,
    money_confirmed: bool = False,
    repeats_confirmed: Iterable[int] = (),
) -> Decision:
    """Restart this workflow from step ``from_seq`` as a **new** workflow linked to it (``forked_from``).

    Steps before ``from_seq`` are copied as recorded (never re-executed); the fork opens at a checkpoint
    whose decision, a resume, goes through the same decision, four-eyes, delivery and audit path as
    any resume, bound by the runbook of the checkpoint it comes from too (``Checkpoint.origin``) and
    with the steps it will run as its plan (their amounts: the money check). Effects the lineage
    committed that the fork runs again need ``repeats_confirmed`` (their step ids) when money is at
    stake. Returns that decision; ValueError (nothing created) when the fork cannot be done.
    """
    if why := workflow.agent.cannot(Agent.Capability.FORK):
        raise ValueError(why)
    if not reason.strip():
        raise ValueError("Say why the workflow is forked.")
    steps = list(workflow.steps.order_by("seq"))
    if not steps or not 1 <= from_seq <= steps[-1].seq:
        raise ValueError(f"Fork from a recorded step (1..{steps[-1].seq if steps else 0}).")
    copied = [s for s in steps if s.seq < from_seq]
    if unsettled := [s.seq for s in copied if s.status == Step.Status.PENDING]:
        raise ValueError(
            f"Step {unsettled[0]} is still pending (its outcome is unknown): settle it before forking after it."
        )
    at = next(s for s in steps if s.seq >= from_seq)
    if edited_input is not None and (why := workflow.agent.cannot_edit(at.kind)):
        raise ValueError(why)  # an edit the runtime would silently ignore is no edit
    with transaction.atomic():
        number = workflow.forks.count() + 1
        fork = Workflow.objects.create(
            agent=workflow.agent,
            kind=workflow.kind,
            owner=workflow.owner,
            context=workflow.context,
            external_id=f"{workflow.external_id[:180]}~fork{number}",
            title=f"{workflow.title[:260]} (fork {number})",
            forked_from=workflow,
            forked_at_seq=from_seq,
        )
        Step.objects.bulk_create(
            Step(
                workflow=fork,
                **{
                    f: getattr(s, f)
                    for f in (
                        "seq",
                        "name",
                        "kind",
                        "status",
                        "input",
                        "output",
                        "verified",
                        "promise",
                        "idempotency_key",
                        "external_ref",
                        "attempts",
                        "history",
                        "created_at",
                        "updated_at",
                    )
                },
            )
            for s in copied
        )
        Event.record(
            workflow, Event.Verb.FORKED, actor=by, data={"fork": fork.pk, "from_seq": from_seq, "reason": reason[:500]}
        )
        Event.record(fork, Event.Verb.FORKED_FROM, actor=by, data={"original": workflow.pk, "from_seq": from_seq})
        latest = workflow.checkpoints.order_by("-opened_at").first()
        agent_state = latest.state if latest and isinstance(latest.state, dict) else {}
        state = {
            **agent_state,
            "remaining": list(dict.fromkeys(s.name for s in steps if s.seq >= from_seq)),
            "fork": {
                "from_workflow_id": str(workflow.pk),
                "from_external_id": workflow.external_id,
                "from_seq": from_seq,
                "step": at.name,
                "kind": at.kind,
                "input": at.input if edited_input is None else edited_input,
                "input_edited": edited_input is not None,
            },
        }
        state.setdefault("ticket_id", workflow.context.get("ticket") if isinstance(workflow.context, dict) else None)
        plan = fork_plan(
            [s for s in steps if s.seq >= from_seq],
            edited_seq=at.seq if edited_input is not None else None,
            edited_input=edited_input,
            then=latest.plan if latest else None,
        )
        # No path is weaker than the checkpoint it comes from: its runbook binds the fork's decisions too.
        checkpoint = Checkpoint.open_for(
            fork,
            reason="manual",
            actor=by,
            at_seq=from_seq,
            state=state,
            plan=plan,
            detail=f"Fork of workflow {workflow.pk} from step {from_seq}: {reason}"[:2000],
            origin=latest,
        )
        return Decider(checkpoint).decide(
            by=by,
            action="resume",
            instructions=reason,
            money_confirmed=money_confirmed,
            repeats_confirmed=repeats_confirmed,
        )
