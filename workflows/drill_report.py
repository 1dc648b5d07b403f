"""The drill report (issue 26): how a drill's runs came back, scored with the dashboard's definitions.

Every figure comes from ``workflows.metrics`` with ``Filters.drills`` set to the drill's id: the four
shares, the per-workflow predicates (lost and repeated effects, blank-state failures, owner changes) and the
checkpoint clocks are the very definitions the resume dashboard counts, over this drill's runs only. Per
run: time from the fault to the checkpoint, to the first claim, to the first decision and to completion,
each checkpoint's SLA targets (met or breached, as its clocks recorded them). The verdict:

- **failed** when a run's degradation left no checkpoint (a blank-state failure, or a run that settled
  without the pause surface catching it), or an effect was lost or repeated, or its state was not intact,
  or no run took part;
- **passed with gaps** when every run came back intact but a time target was breached, a run is still in
  flight or not caught yet, a run settled other than completed, or a run changed owner;
- **passed** otherwise.

**State intact**: the runtime journals what it holds at the fault (docs/API.md "Drill journal": the
committed effects' idempotency keys, the step in flight, the promises); the resume state of the run's first
checkpoint must hold every one of them. A run whose runtime journalled nothing is "not journalled": said in
the report, not held against the verdict (the runtime may not support the journal yet).

**The trend**: every drill run under the same definition (a recurring rule's occurrences, or the one-off
itself), each with its verdict and the median of each key time (``trend``).

Markdown and CSV renderings are here too (the CSV rows; ``console/csv_export.py`` streams them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from . import metrics, timings
from .models import Action, Checkpoint, Decision, Drill, Step, Workflow
from .shapes import Json

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

CsvCell = str | int | float | bool | None

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
    journalled: bool = False
    state_gaps: tuple[str, ...] = ()
    failover_failed: str = ""  # the standby that never took the run over (a failover delivery that failed)…
    failover_error: str = ""  # …and why

    @property
    def state_intact(self) -> bool | None:
        """True: the resume state held all the runtime journalled; False: it missed something; None: nothing
        to compare (no journal, or no checkpoint yet)."""
        if not self.journalled or self.checkpoint_at is None:
            return None
        return not self.state_gaps

    @property
    def state_text(self) -> str:
        intact = self.state_intact
        if intact is None:
            return "not journalled" if not self.journalled else "no checkpoint yet"
        return "intact" if intact else "not intact"

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
    trend: list[Occurrence] = field(default_factory=list)


# The key times of a run, in the order reports show them: (label, RunScore property).
KEY_TIMES = (
    ("To checkpoint", "to_checkpoint"),
    ("To claim", "to_claim"),
    ("To decision", "to_decision"),
    ("To completion", "to_completion"),
)


@dataclass(frozen=True)
class Occurrence:
    """One drill of a definition's trend: when it ran, its verdict, and the median of each key time."""

    drill_id: int
    started_at: datetime | None
    runs: int
    verdict: str
    medians: dict[str, float | None]


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _object(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def state_gaps(journal: Json, resume_state: Mapping[str, object]) -> tuple[str, ...]:
    """What the runtime journalled at the fault that the resume state does not hold (the journal is the
    agent's JSON: a part of it that is not the shape the drill asked for holds nothing to miss)."""
    if not isinstance(journal, dict):
        return ()
    gaps = []
    held = {_object(e).get("idempotency_key") for e in _listed(resume_state.get("committed"))}
    gaps += [f"committed effect {key} is missing" for key in _listed(journal.get("committed")) if key not in held]
    pending = _object(journal.get("pending"))
    have = _object(resume_state.get("pending"))
    if pending and (have.get("seq"), have.get("name")) != (pending.get("seq"), pending.get("name")):
        gaps.append(f"the pending action (step {pending.get('seq')}, {pending.get('name')}) is missing")
    promised = {p for p in _listed(resume_state.get("promises")) if isinstance(p, str)}
    gaps += [
        f"the promise “{p[:80]}” is missing"
        for p in _listed(journal.get("promises"))
        if isinstance(p, str) and p not in promised
    ]
    return tuple(gaps)


def _fault_at(drill: Drill, workflow: Workflow, steps: dict[tuple[int, int], Step]) -> datetime:
    """When the fault came: after step k was recorded for a fault placed at a step, else the run's start."""
    if drill.at_step and (step := steps.get((workflow.pk, drill.at_seq))) is not None:
        return step.updated_at
    return workflow.created_at


def score(drill: Drill, *, today: date | None = None, with_trend: bool = True) -> DrillReport:
    """The report of ``drill``'s runs so far (with the trend of its definition unless ``with_trend=False``)."""
    started = (drill.started_at or drill.created_at).astimezone(UTC).date()
    today = today or timezone.now().astimezone(UTC).date()
    filters = metrics.Filters(start=min(started, today), end=today, drills=str(drill.pk))
    workflows = list(metrics.with_recovery(Workflow.objects.filter(drill=drill)).order_by("created_at", "pk"))
    ids = [w.pk for w in workflows]
    lost = set(
        metrics.with_recovery(Workflow.objects.filter(pk__in=ids))
        .filter(metrics.LOST_EFFECT)
        .values_list("pk", flat=True)
    )
    first: dict[int, WithAnnotations[Checkpoint, timings.Clocks]] = {}
    for checkpoint in timings.with_clocks(Checkpoint.objects.filter(workflow_id__in=ids)).order_by("opened_at"):
        first.setdefault(checkpoint.workflow_id, checkpoint)
    steps = {(s.workflow_id, s.seq): s for s in Step.objects.filter(workflow_id__in=ids, seq=drill.at_seq)}
    runs = [_run(drill, w, first.get(w.pk), steps, lost) for w in workflows]
    failed_over = _failed_failovers(ids)
    runs = [
        replace(r, failover_failed=failed_over[r.workflow_id][0], failover_error=failed_over[r.workflow_id][1])
        if r.workflow_id in failed_over
        else r
        for r in runs
    ]
    summary = metrics.summary(filters)
    verdict, reasons = _verdict(runs)
    return DrillReport(drill, filters, runs, summary, verdict, reasons, trend(drill) if with_trend else [])


def trend(drill: Drill, *, last: int = 12) -> list[Occurrence]:
    """The last ``last`` drills run under ``drill``'s definition, oldest first, each scored."""
    ran = list(
        Drill.objects.of_series(drill)
        .filter(started_at__isnull=False)
        .select_related("agent")
        .order_by("-started_at", "-pk")[:last]
    )
    occurrences = []
    for each in reversed(ran):
        report = score(each, with_trend=False)
        medians = {
            attr: _median([v for r in report.runs if (v := getattr(r, attr)) is not None]) for _label, attr in KEY_TIMES
        }
        occurrences.append(Occurrence(each.pk, each.started_at, len(report.runs), report.verdict, medians))
    return occurrences


def _failed_failovers(ids: list[int]) -> dict[int, tuple[str, str]]:
    """Per workflow, its failover whose delivery to the standby failed for good: (the standby, the error)."""
    failed = (
        Decision.objects.filter(checkpoint__workflow_id__in=ids, action=Action.FAILOVER, status=Decision.Status.FAILED)
        .select_related("standby", "checkpoint")
        .order_by("decided_at")
    )
    return {
        d.checkpoint.workflow_id: (d.standby.name if d.standby else "the standby", d.last_error[:200]) for d in failed
    }


def _run(
    drill: Drill,
    workflow: WithAnnotations[Workflow, metrics.Recovery],
    checkpoint: WithAnnotations[Checkpoint, timings.Clocks] | None,
    steps: dict[tuple[int, int], Step],
    lost: set[int],
) -> RunScore:
    completed = workflow.finished_at if workflow.status == Workflow.Status.COMPLETED else None
    return RunScore(
        workflow_id=workflow.pk,
        external_id=workflow.external_id,
        title=workflow.title,
        status=workflow.status,
        fault_at=_fault_at(drill, workflow, steps),
        checkpoint_at=checkpoint.opened_at if checkpoint else None,
        claimed_at=checkpoint.claimed_first_at if checkpoint else None,
        decided_at=checkpoint.first_decided_at if checkpoint else None,
        completed_at=completed,
        claim_due_at=checkpoint.claim_due_at if checkpoint else None,
        decision_due_at=checkpoint.due_at if checkpoint else None,
        claim_breached=bool(checkpoint and checkpoint.claim_breached_at),
        decision_breached=bool(checkpoint and checkpoint.breached_at),
        blank_failure=bool(workflow.blank_failure),
        lost_effect=workflow.pk in lost,
        repeated_effect=bool(workflow.duplicate_attempt),
        owner_changed=bool(workflow.continued and workflow.owner_changed),
        journalled=workflow.drill_journal is not None,
        state_gaps=state_gaps(workflow.drill_journal, checkpoint.resume_state) if checkpoint else (),
    )


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
        if run.failover_failed:
            failures.append(
                f"{name}: the failover to {run.failover_failed} failed: the standby never took "
                "the run over" + (f" ({run.failover_error})." if run.failover_error else ".")
            )
        if run.state_intact is False:
            failures.append(
                f"{name}'s resume state lost what the runtime journalled at the fault: "
                + "; ".join(run.state_gaps)
                + "."
            )
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
    return PASSED, [
        "Every run reached a checkpoint, was decided within its targets and completed with its effects intact."
    ]


# --- exports -------------------------------------------------------------------------------------

CSV_HEADER = [
    "workflow",
    "external_id",
    "status",
    "fault_at",
    "to_checkpoint_s",
    "to_claim_s",
    "to_decision_s",
    "to_completion_s",
    "claim_due_at",
    "claim_breached",
    "decision_due_at",
    "decision_breached",
    "blank_failure",
    "lost_effect",
    "repeated_effect",
    "owner_changed",
    "state_intact",
    "state_gaps",
]
TREND_HEADER = ["trend", "drill", "started_at", "runs", "verdict"] + [f"median_{a}_s" for _l, a in KEY_TIMES]


def _stamp(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def _secs(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def csv_rows(report: DrillReport) -> Iterator[Sequence[CsvCell]]:
    yield CSV_HEADER
    for r in report.runs:
        yield [
            r.workflow_id,
            r.external_id,
            r.status,
            _stamp(r.fault_at),
            _secs(r.to_checkpoint),
            _secs(r.to_claim),
            _secs(r.to_decision),
            _secs(r.to_completion),
            _stamp(r.claim_due_at),
            r.claim_breached,
            _stamp(r.decision_due_at),
            r.decision_breached,
            r.blank_failure,
            r.lost_effect,
            r.repeated_effect,
            r.owner_changed,
            r.state_text,
            "; ".join(r.state_gaps),
        ]
    yield []
    yield ["verdict", report.verdict]
    for reason in report.reasons:
        yield ["reason", reason]
    for share in report.summary.shares.values():
        yield ["share", share.label, share.part, share.whole]
    yield []
    yield TREND_HEADER
    for o in report.trend:
        yield [
            "trend",
            o.drill_id,
            _stamp(o.started_at),
            o.runs,
            o.verdict,
            *(_secs(o.medians[a]) for _l, a in KEY_TIMES),
        ]


def _md(text: object) -> str:
    """Agent text in a Markdown table cell: no pipes, no line breaks, no markup."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    for char in "`*_[]<>#":
        out = out.replace(char, "\\" + char)
    return out


def _target(breached: bool, reached: datetime | None) -> str:
    return "breached" if breached else "met" if reached else "pending"


def markdown(report: DrillReport) -> str:
    drill = report.drill
    lines = [
        f"# Drill report: {_md(drill.name)}",
        "",
        f"- Agent: {_md(drill.agent.name)}" + (f", kind {_md(drill.kind)}" if drill.kind else ""),
        f"- Fault: {drill.get_fault_display()}" + (f" (k = {drill.at_seq})" if drill.at_step else ""),
        f"- {'Announced' if drill.announced else 'Unannounced'}; started {_stamp(drill.started_at) or 'not yet'}",
        f"- **Verdict: {report.verdict}**",
        "",
    ]
    lines += [f"  - {_md(reason)}" for reason in report.reasons]
    lines += [
        "",
        "## The four shares (the resume dashboard's definitions)",
        "",
        "| Figure | Part | Whole |",
        "|---|---:|---:|",
    ]
    lines += [f"| {s.label} | {s.part} | {s.whole} |" for s in report.summary.shares.values()]
    lines += [
        "",
        "## Runs",
        "",
        "| Workflow | Status | To checkpoint (s) | To claim (s) | To decision (s) | To completion (s) | "
        "Claim target | Decision target | Lost | Repeated | State |",
        "|---|---|---:|---:|---:|---:|---|---|---|---|---|",
    ]
    for r in report.runs:
        lines.append(
            f"| {_md(r.external_id)} | {r.status} | {_secs(r.to_checkpoint)} | {_secs(r.to_claim)} | "
            f"{_secs(r.to_decision)} | {_secs(r.to_completion)} | "
            f"{_target(r.claim_breached, r.claimed_at)} | {_target(r.decision_breached, r.decided_at)} | "
            f"{'yes' if r.lost_effect else 'no'} | {'yes' if r.repeated_effect else 'no'} | "
            f"{r.state_text} |"
        )
    lines += [
        "",
        "## Trend (every drill of this definition)",
        "",
        "| Drill | Started | Runs | Verdict | " + " | ".join(f"{label} (median s)" for label, _a in KEY_TIMES) + " |",
        "|---|---|---:|---|" + "---:|" * len(KEY_TIMES),
    ]
    for o in report.trend:
        lines.append(
            f"| {o.drill_id} | {_stamp(o.started_at)} | {o.runs} | {o.verdict} | "
            + " | ".join(_secs(o.medians[a]) for _l, a in KEY_TIMES)
            + " |"
        )
    return "\n".join(lines) + "\n"
