"""The drill report (issue 26): how a drill's runs came back, scored with the dashboard's definitions.

Every figure comes from ``workflows.metrics`` with ``Filters.drills`` set to the drill's id: the four
shares, the per-workflow predicates (lost and repeated effects, blank-state failures, owner changes) and the
checkpoint clocks are the very definitions the resume dashboard counts, over this drill's runs only. Per
run: time from the fault to the checkpoint, to the first claim, to the first decision and to completion,
each checkpoint's SLA targets (met or breached, as its clocks recorded them). The verdict:

- **failed** when a run's degradation left no checkpoint (a blank-state failure, or a run that settled
  without the pause surface catching it), or an effect was lost or repeated, or no run took part;
- **passed with gaps** when every run came back intact but a time target was breached, a run is still in
  flight or not caught yet, a run settled other than completed, or a run changed owner;
- **passed** otherwise.

Markdown and CSV renderings are here too (the CSV rows; ``console/csv_export.py`` streams them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from . import metrics, timings
from .models import Checkpoint, Drill, Step, Workflow

PASSED, GAPS, FAILED = "passed", "passed with gaps", "failed"


@dataclass(frozen=True)
class RunScore:
    workflow_id: int
    external_id: str
    title: str
    status: str
    fault_at: datetime | None
    checkpoint_at: datetime | None
    claimed_at: datetime | None
    decided_at: datetime | None
    completed_at: datetime | None
    claim_due_at: datetime | None
    decision_due_at: datetime | None
    claim_breached: bool
    decision_breached: bool
    blank_failure: bool
    lost_effect: bool
    repeated_effect: bool
    owner_changed: bool

    @staticmethod
    def _between(start: datetime | None, end: datetime | None) -> float | None:
        return (end - start).total_seconds() if start and end else None

    @property
    def to_checkpoint(self) -> float | None:
        return self._between(self.fault_at, self.checkpoint_at)

    @property
    def to_claim(self) -> float | None:
        return self._between(self.checkpoint_at, self.claimed_at)

    @property
    def to_decision(self) -> float | None:
        return self._between(self.checkpoint_at, self.decided_at)

    @property
    def to_completion(self) -> float | None:
        return self._between(self.checkpoint_at, self.completed_at)

    @property
    def settled(self) -> bool:
        return self.status in Workflow.TERMINAL


@dataclass(frozen=True)
class DrillReport:
    drill: Drill
    filters: metrics.Filters
    runs: list[RunScore]
    summary: metrics.Summary
    verdict: str
    reasons: list[str] = field(default_factory=list)


def _fault_at(drill: Drill, workflow: Workflow, steps: dict[tuple[int, int], Step]) -> datetime:
    """When the fault came: after step k was recorded for a fault placed at a step, else the run's start."""
    if drill.at_step and (step := steps.get((workflow.pk, drill.at_seq))) is not None:
        return step.updated_at
    return workflow.created_at


def score(drill: Drill, *, today: Any = None) -> DrillReport:
    """The report of ``drill``'s runs so far."""
    started = (drill.started_at or drill.created_at).astimezone(UTC).date()
    today = today or timezone.now().astimezone(UTC).date()
    filters = metrics.Filters(start=min(started, today), end=today, drills=str(drill.pk))
    workflows = list(metrics.with_recovery(Workflow.objects.filter(drill=drill)).order_by("created_at", "pk"))
    ids = [w.pk for w in workflows]
    lost = set(metrics.with_recovery(Workflow.objects.filter(pk__in=ids)).filter(metrics.LOST_EFFECT)
               .values_list("pk", flat=True))
    first: dict[int, Any] = {}
    for checkpoint in timings.with_clocks(Checkpoint.objects.filter(workflow_id__in=ids)).order_by("opened_at"):
        first.setdefault(checkpoint.workflow_id, checkpoint)
    steps = {(s.workflow_id, s.seq): s for s in Step.objects.filter(workflow_id__in=ids, seq=drill.at_seq)}
    runs = [_run(drill, w, first.get(w.pk), steps, lost) for w in workflows]
    summary = metrics.summary(filters)
    verdict, reasons = _verdict(runs)
    return DrillReport(drill, filters, runs, summary, verdict, reasons)


def _run(drill: Drill, workflow: Any, checkpoint: Any, steps: dict[tuple[int, int], Step], lost: set[int]) -> RunScore:
    completed = workflow.finished_at if workflow.status == Workflow.Status.COMPLETED else None
    return RunScore(
        workflow_id=workflow.pk, external_id=workflow.external_id, title=workflow.title, status=workflow.status,
        fault_at=_fault_at(drill, workflow, steps),
        checkpoint_at=checkpoint.opened_at if checkpoint else None,
        claimed_at=checkpoint.claimed_first_at if checkpoint else None,
        decided_at=checkpoint.first_decided_at if checkpoint else None,
        completed_at=completed,
        claim_due_at=checkpoint.claim_due_at if checkpoint else None,
        decision_due_at=checkpoint.due_at if checkpoint else None,
        claim_breached=bool(checkpoint and checkpoint.claim_breached_at),
        decision_breached=bool(checkpoint and checkpoint.breached_at),
        blank_failure=bool(workflow.blank_failure), lost_effect=workflow.pk in lost,
        repeated_effect=bool(workflow.duplicate_attempt),
        owner_changed=bool(workflow.continued and workflow.owner_changed))


def _verdict(runs: list[RunScore]) -> tuple[str, list[str]]:
    failures, gaps = [], []
    if not runs:
        failures.append("No run took part: no new workflow was picked.")
    for run in runs:
        name = f"{run.external_id} (workflow {run.workflow_id})"
        if run.blank_failure:
            failures.append(f"{name} failed without a checkpoint: a blank state.")
        elif run.checkpoint_at is None and run.settled:
            failures.append(f"{name} ended {run.status} without the pause surface catching the fault.")
        if run.lost_effect:
            failures.append(f"{name} lost an effect or a promise.")
        if run.repeated_effect:
            failures.append(f"{name} repeated an effect.")
        if run.checkpoint_at is None and not run.settled:
            gaps.append(f"{name} has not reached the pause surface yet.")
        if run.claim_breached:
            gaps.append(f"{name} breached its time-to-claim target.")
        if run.decision_breached:
            gaps.append(f"{name} breached its time-to-decision target.")
        if run.checkpoint_at is not None and not run.settled:
            gaps.append(f"{name} is still in flight ({run.status}).")
        elif run.settled and run.status != Workflow.Status.COMPLETED and run.checkpoint_at is not None:
            gaps.append(f"{name} ended {run.status}, not completed.")
        if run.owner_changed:
            gaps.append(f"{name} did not return to the same owner.")
    if failures:
        return FAILED, failures + gaps
    if gaps:
        return GAPS, gaps
    return PASSED, ["Every run reached a checkpoint, was decided within its targets and completed with its "
                    "effects intact."]


# --- exports -------------------------------------------------------------------------------------

CSV_HEADER = ["workflow", "external_id", "status", "fault_at", "to_checkpoint_s", "to_claim_s", "to_decision_s",
              "to_completion_s", "claim_due_at", "claim_breached", "decision_due_at", "decision_breached",
              "blank_failure", "lost_effect", "repeated_effect", "owner_changed"]


def _stamp(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def _secs(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def csv_rows(report: DrillReport) -> Iterator[list[Any]]:
    yield CSV_HEADER
    for r in report.runs:
        yield [r.workflow_id, r.external_id, r.status, _stamp(r.fault_at), _secs(r.to_checkpoint),
               _secs(r.to_claim), _secs(r.to_decision), _secs(r.to_completion), _stamp(r.claim_due_at),
               r.claim_breached, _stamp(r.decision_due_at), r.decision_breached, r.blank_failure, r.lost_effect,
               r.repeated_effect, r.owner_changed]
    yield []
    yield ["verdict", report.verdict]
    for reason in report.reasons:
        yield ["reason", reason]
    for share in report.summary.shares.values():
        yield ["share", share.label, share.part, share.whole]


def _md(text: Any) -> str:
    """Agent text in a Markdown table cell: no pipes, no line breaks, no markup."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    for char in "`*_[]<>#":
        out = out.replace(char, "\\" + char)
    return out


def _target(breached: bool, reached: datetime | None) -> str:
    return "breached" if breached else "met" if reached else "pending"


def markdown(report: DrillReport) -> str:
    drill = report.drill
    lines = [f"# Drill report: {_md(drill.name)}", "",
             f"- Agent: {_md(drill.agent.name)}" + (f", kind {_md(drill.kind)}" if drill.kind else ""),
             f"- Fault: {drill.get_fault_display()}" + (f" (k = {drill.at_seq})" if drill.at_step
                                                          else ""),
             f"- {'Announced' if drill.announced else 'Unannounced'}; started {_stamp(drill.started_at) or 'not yet'}",
             f"- **Verdict: {report.verdict}**", ""]
    lines += [f"  - {_md(reason)}" for reason in report.reasons]
    lines += ["", "## The four shares (the resume dashboard's definitions)", "", "| Figure | Part | Whole |",
              "|---|---:|---:|"]
    lines += [f"| {s.label} | {s.part} | {s.whole} |" for s in report.summary.shares.values()]
    lines += ["", "## Runs", "",
              "| Workflow | Status | To checkpoint (s) | To claim (s) | To decision (s) | To completion (s) | "
              "Claim target | Decision target | Lost | Repeated |", "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in report.runs:
        lines.append(f"| {_md(r.external_id)} | {r.status} | {_secs(r.to_checkpoint)} | {_secs(r.to_claim)} | "
                     f"{_secs(r.to_decision)} | {_secs(r.to_completion)} | "
                     f"{_target(r.claim_breached, r.claimed_at)} | {_target(r.decision_breached, r.decided_at)} | "
                     f"{'yes' if r.lost_effect else 'no'} | {'yes' if r.repeated_effect else 'no'} |")
    return "\n".join(lines) + "\n"
