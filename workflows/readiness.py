"""Readiness per workflow kind: the article's design review, computed from what was recorded.

For each kind seen in the period: where its workflows were interrupted, what
state survived, what a human saw, and how its recoveries ended (the four
shares of ``workflows.metrics``). Every gap is a named finding, and the kind
gets a verdict with its reasons:

- **not ready** when a finding is a blocker: a blank-state failure, a lost
  effect or a duplicate-effect attempt, a reason seen with no runbook, more
  than 10 % of an effect's commits without an external reference, or fewer
  than 90 % of settled degraded workflows resumed without data loss;
- **ready with gaps** when only gaps remain: a runbook without an SLA
  policy, some effects without an external reference, fewer than half of the tool outputs verified, no
  promise recorded, a median decision slower than the SLA target, or fewer
  than 90 % returned to the same owner, or no recovery drill of the kind started in the last 30 days;
- **ready** otherwise; **not enough data** below 5 degraded workflows (a
  design review needs incidents to read).

Each kind also shows its last recovery drill (issue 26): the last drill started that picked a workflow of
the kind or was defined for it, with its verdict (``workflows.drill_report``) and when it ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from . import drill_report, metrics, rollups, timings
from .models import Drill, Reason, Runbook, SLAPolicy, Step, Workflow
from .models.rollups import ANY
from .readiness_figures import STEP_COUNTS, effect_aggregates, interruption_label, with_interruption_steps

Matcher = Callable[[str, str], Runbook | None]  # Runbook.matcher(): the runbook a kind and reason get

BLOCKER, GAP = "blocker", "gap"
MIN_DEGRADED = 5
MISSING_REF_BLOCKER = 0.10
CLEAN_SHARE_BLOCKER = 0.90
SAME_OWNER_GAP = 0.90
VERIFIED_GAP = 0.50
DEFAULT_TARGET_MINUTES = 30
DRILL_WITHIN_DAYS = 30


@dataclass(frozen=True)
class Finding:
    severity: str
    text: str


@dataclass(frozen=True)
class EffectState:
    name: str
    steps: int
    committed: int
    with_ref: int

    @property
    def missing_ref_share(self) -> float:
        return 1 - self.with_ref / self.committed if self.committed else 0.0


@dataclass(frozen=True)
class ReasonSeen:
    reason: str
    checkpoints: int
    runbook: Runbook | None

    @property
    def label(self) -> str:
        return str(Reason(self.reason).label) if self.reason in Reason.values else self.reason

    @property
    def policy(self) -> SLAPolicy | None:
        return self.runbook.policy if self.runbook else None

    @property
    def target_minutes(self) -> int:
        """The time-to-decision target its checkpoints get (SLAPolicy.fallback's 30 minutes without a policy)."""
        return self.policy.decision_target_minutes if self.policy else DEFAULT_TARGET_MINUTES


@dataclass(frozen=True)
class DrillSeen:
    """A kind's last recovery drill: which, when it started and how it was scored."""

    drill_id: int
    name: str
    started_at: datetime
    verdict: str


def last_drill(kind: str) -> DrillSeen | None:
    """The last drill started that picked a workflow of ``kind`` or was defined for it."""
    picked = Workflow.objects.filter(drill=OuterRef("pk"), kind=kind)
    drill = (
        Drill.objects.filter(started_at__isnull=False)
        .filter(Q(kind=kind) | Exists(picked))
        .select_related("agent")
        .order_by("-started_at", "-pk")
        .first()
    )
    if drill is None or drill.started_at is None:
        return None
    return DrillSeen(drill.pk, drill.name, drill.started_at, drill_report.score(drill, with_trend=False).verdict)


@dataclass
class KindReadiness:
    kind: str
    filters: metrics.Filters
    launched: int
    degraded: int
    interruptions: list[tuple[str, int]]
    effects: list[EffectState]
    tool_outputs: int
    verified_outputs: int
    promises: int
    reasons: list[ReasonSeen]
    median_decision_seconds: float | None
    shares: dict[str, metrics.Share]
    counts: dict[str, int] = field(default_factory=dict)  # metrics.Summary.counts of the kind
    findings: list[Finding] = field(default_factory=list)
    # Looked up by ``review``/``review_kind`` (a review built by hand checks no drills): the last drill, if any.
    drill_checked: bool = False
    last_drill: DrillSeen | None = None

    @property
    def verified_share(self) -> float | None:
        return self.verified_outputs / self.tool_outputs if self.tool_outputs else None

    @property
    def verdict(self) -> str:
        if any(f.severity == BLOCKER for f in self.findings):
            return "not ready"
        if self.degraded < MIN_DEGRADED:
            return "not enough data"
        return "ready with gaps" if self.findings else "ready"

    @property
    def verdict_reasons(self) -> list[str]:
        """Why the verdict, besides the findings: a blocker or a gap is its own reason, listed once (under
        "Findings"), never repeated here."""
        if self.verdict == "not enough data":
            return [
                f"only {self.degraded} degraded workflow{'s' if self.degraded != 1 else ''} in the period; "
                f"a review needs at least {MIN_DEGRADED}"
            ]
        if self.verdict == "ready":
            return ["every check passed"]
        return []


def _interruptions(filters: metrics.Filters) -> list[tuple[str, int]]:
    rows = (
        with_interruption_steps(timings.opened_checkpoints(filters))
        .values("at_name", "before_name")
        .annotate(n=Count("pk"))
        .order_by()
    )
    counts: Counter[str] = Counter()
    for row in rows:
        counts[interruption_label(row["at_name"], row["before_name"])] += row["n"]
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _steps(filters: metrics.Filters) -> QuerySet[Step]:
    return Step.objects.filter(workflow__in=metrics.launched(filters).values("pk"))


def _effects(filters: metrics.Filters) -> list[EffectState]:
    rows = _steps(filters).filter(kind=Step.Kind.EFFECT).values("name").annotate(**effect_aggregates()).order_by("name")
    return [EffectState(r["name"], r["steps"], r["committed"], r["with_ref"]) for r in rows]


def _reasons(filters: metrics.Filters, kind: str, match: Matcher) -> list[ReasonSeen]:
    rows = timings.opened_checkpoints(filters).values("reason").annotate(n=Count("pk")).order_by("-n", "reason")
    return [ReasonSeen(r["reason"], r["n"], match(kind, r["reason"])) for r in rows]


def _findings(r: KindReadiness) -> list[Finding]:
    """Every gap of a kind, blockers first, each once (two checks that word the same gap alike say it once)."""
    found = _checks(r)
    return sorted(dict.fromkeys(found), key=lambda f: f.severity != BLOCKER)


def _checks(r: KindReadiness) -> list[Finding]:
    k = f"`{r.kind}`"
    found: list[Finding] = []
    counts = r.counts
    if counts["blank_failure"]:
        found.append(
            Finding(BLOCKER, f"{k}: {counts['blank_failure']} workflow(s) failed without a checkpoint (a blank state)")
        )
    if counts["lost_effect"]:
        found.append(
            Finding(
                BLOCKER,
                f"{k}: {counts['lost_effect']} completed workflow(s) lost an effect "
                "(unknown and never confirmed, or a promise never kept)",
            )
        )
    if counts["duplicate_attempt"]:
        found.append(
            Finding(
                BLOCKER,
                f"{k}: {counts['duplicate_attempt']} workflow(s) tried to repeat an effect "
                "under a used idempotency key, or repeated one its lineage had committed "
                "(a fork)",
            )
        )
    for seen in r.reasons:
        if seen.runbook is None:
            found.append(
                Finding(
                    BLOCKER,
                    f"{k}: no runbook for reason `{seen.reason}` "
                    f"({seen.checkpoints} checkpoint(s); the default SLA of "
                    f"{DEFAULT_TARGET_MINUTES} min applies)",
                )
            )
        elif seen.policy is None:
            found.append(
                Finding(
                    GAP,
                    f"{k}: the runbook for reason `{seen.reason}` sets no SLA policy "
                    f"(the default {DEFAULT_TARGET_MINUTES} min applies)",
                )
            )
    for effect in r.effects:
        share = effect.missing_ref_share
        if share > 0:
            severity = BLOCKER if share > MISSING_REF_BLOCKER else GAP
            found.append(Finding(severity, f"{k}: {share:.0%} of `{effect.name}` effects have no external ref"))
    clean = r.shares["resumed_without_data_loss"]
    if clean.whole >= MIN_DEGRADED and (clean.value or 0) < CLEAN_SHARE_BLOCKER:
        found.append(
            Finding(
                BLOCKER,
                f"{k}: only {clean.percent:.0f} % of settled degraded workflows resumed "
                f"without data loss (target {CLEAN_SHARE_BLOCKER:.0%})",
            )
        )
    owner = r.shares["same_owner"]
    if owner.whole and (owner.value or 0) < SAME_OWNER_GAP:
        found.append(
            Finding(GAP, f"{k}: {owner.percent:.0f} % of resumed or handed-off workflows returned to the same owner")
        )
    if r.verified_share is not None and r.verified_share < VERIFIED_GAP:
        found.append(Finding(GAP, f"{k}: only {r.verified_share:.0%} of tool outputs are marked verified"))
    if r.launched and not r.promises:
        found.append(Finding(GAP, f"{k}: no promise to the user recorded, so a resume cannot tell what was promised"))
    if r.median_decision_seconds is not None and r.reasons:
        target = min(seen.target_minutes for seen in r.reasons)
        if r.median_decision_seconds > target * 60:
            found.append(
                Finding(
                    GAP,
                    f"{k}: the median decision takes {r.median_decision_seconds / 60:.0f} min, "
                    f"over the {target}-minute SLA target",
                )
            )
    if r.drill_checked and (
        r.last_drill is None or r.last_drill.started_at < timezone.now() - timedelta(days=DRILL_WITHIN_DAYS)
    ):
        found.append(
            Finding(
                GAP,
                f"{k}: no recovery drill in {DRILL_WITHIN_DAYS} days"
                + (f" (the last started {r.last_drill.started_at:%d %b %Y})" if r.last_drill else " (never drilled)"),
            )
        )
    return found


def review_kind(filters: metrics.Filters, kind: str, match: Matcher | None = None) -> KindReadiness:
    """One kind's review computed live from every row of the period: the definition the rollups follow."""
    scoped = filters.only(kind=kind)
    tools = _steps(scoped).aggregate(**{name: Count("pk", filter=q) for name, q in STEP_COUNTS.items()})
    decision = timings.time_to_decision(scoped)
    summary = metrics.summary(scoped)
    readiness = KindReadiness(
        kind=kind,
        filters=scoped,
        launched=summary.launches,
        degraded=summary.counts["degraded"],
        interruptions=_interruptions(scoped),
        effects=_effects(scoped),
        tool_outputs=tools["tools"],
        verified_outputs=tools["tools_verified"],
        promises=tools["promises"],
        reasons=_reasons(scoped, kind, match or Runbook.matcher()),
        median_decision_seconds=decision.median,
        shares=summary.shares,
        counts=summary.counts,
        drill_checked=True,
        last_drill=last_drill(kind),
    )
    readiness.findings = _findings(readiness)
    return readiness


def review_kind_rolled(figures: rollups.Figures, kind: str, match: Matcher | None = None) -> KindReadiness:
    """One kind's review from the daily rollups (``figures`` holds the period's rows)."""
    match = match or Runbook.matcher()
    mine = figures.narrowed(kind=kind)
    summary = mine.summary()
    counts = mine.totals(reason=ANY, runbook=ANY, team=ANY)
    effects = sorted({key.split(":", 2)[1] for key in counts if key.startswith("effect:")})
    f = mine.filters
    opened: Counter[str] = Counter()
    for row in mine.rows:
        if (
            row.reason != ANY
            and row.runbook == (f.runbook or ANY)
            and row.team == ANY
            and (not f.reason or row.reason == f.reason)
        ):
            opened[row.reason] += row.counts.get("opened", 0)
    interrupted = Counter(
        {key.split(":", 1)[1]: n for key, n in mine.totals().items() if key.startswith("interruption:") and n}
    )
    readiness = KindReadiness(
        kind=kind,
        filters=f,
        launched=summary.launches,
        degraded=summary.counts["degraded"],
        interruptions=sorted(interrupted.items(), key=lambda kv: (-kv[1], kv[0])),
        effects=[
            EffectState(
                name,
                counts[f"effect:{name}:steps"],
                counts[f"effect:{name}:committed"],
                counts[f"effect:{name}:with_ref"],
            )
            for name in effects
        ],
        tool_outputs=counts["tools"],
        verified_outputs=counts["tools_verified"],
        promises=counts["promises"],
        reasons=[
            ReasonSeen(reason, n, match(kind, reason))
            for reason, n in sorted(opened.items(), key=lambda kv: (-kv[1], kv[0]))
            if n
        ],
        median_decision_seconds=mine.timing("time_to_decision").median,
        shares=summary.shares,
        counts=summary.counts,
        drill_checked=True,
        last_drill=last_drill(kind),
    )
    readiness.findings = _findings(readiness)
    return readiness


VERDICT_ORDER = {"not ready": 0, "ready with gaps": 1, "not enough data": 2, "ready": 3}


def review(filters: metrics.Filters, *, live: bool = False) -> list[KindReadiness]:
    """Every kind launched or degraded in the period (or just the filtered one), worst verdict first.

    From the daily rollups; ``live=True`` computes it from every row instead (the definition, for tests)."""
    # Per kind, never per team: launches and the steps behind "what state survived" belong to no team.
    filters = filters.only(team="")
    match = Runbook.matcher()  # one query for every kind and reason below
    if live:
        if filters.kind:
            kinds = [filters.kind]
        else:
            kinds = sorted(
                set(metrics.launched(filters).values_list("kind", flat=True).distinct())
                | set(timings.opened_checkpoints(filters).values_list("workflow__kind", flat=True).distinct())
            )
        reviews = [review_kind(filters, kind, match) for kind in kinds]
    else:
        figures = rollups.Figures(filters)
        kinds = [filters.kind] if filters.kind else figures.kinds()
        reviews = [review_kind_rolled(figures, kind, match) for kind in kinds]
    return sorted(reviews, key=lambda r: (VERDICT_ORDER[r.verdict], r.kind))
