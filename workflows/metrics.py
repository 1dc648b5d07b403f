"""The one definition of every recovery figure.

The resume dashboard, the readiness page, ``/metrics``, the TPM breach review,
``scripts/chaos/`` and the tests import these functions; nothing else
defines a figure. Everything is computed from what was recorded — workflows,
steps, checkpoints, decisions and events — never from numbers written for a
report. The definitions (also in the README, and on the dashboard):

- **degraded**: a workflow with at least one checkpoint, or reported
  ``failed`` without one. Its *interruption* is its first checkpoint (or that
  failure); the period filters and charts place it there.
- **blank-state failure**: a workflow the agent reported ``failed`` while it
  was running: that degradation left no checkpoint behind.
- **preserved a user-visible checkpoint**: degraded workflows with no
  blank-state failure — every degradation produced a checkpoint.
- **settled**: finished (completed, failed, handed off or aborted). The
  outcome shares count settled degraded workflows only, so the work still in
  flight does not read as a failure; it is shown as a count beside them.
- **resumed**: an operator's resume, retry-step or failover decision on one
  of its checkpoints reached the agent (the decision succeeded).
- **duplicate-effect attempt**: an effect reported again under an idempotency
  key the workflow already used (the API refuses it with 409 and records the
  attempt as an ``effect_duplicate_refused`` event), or an effect a fork
  committed that the workflow it was forked from had committed already under
  another key (a refund paid twice across a lineage: no key check sees it).
- **lost effect**: in a workflow its agent completed (not one handed off
  to people, whose work the console does not record), an effect that was unknown at a
  checkpoint (pending when it opened) and was neither executed (committed)
  nor confirmed "happened" by an operator; or a promise made to the user
  (a step's ``promise``, the step not failed) that no committed user-facing
  step at or after it fulfils: a ``message`` step, or an effect that carries a
  promise (the message that tells the user). A promise repeated word for word
  counts from its first making.
- **resumed without data loss**: settled degraded workflows that were resumed
  and completed with no duplicate-effect attempt and no lost effect.
- **why one was not resumed without data loss** (each miss under the first
  reason that holds): aborted by an operator, handed off to people, failed,
  completed without a resume, completed after a duplicate-effect attempt,
  completed with a lost effect (``MISSED_BECAUSE``).
- **continued**: degraded workflows whose work went on under an owner: a
  resume, retry-step or handoff decision succeeded.
- **returned to the same owner**: continued workflows where, at every resume
  or handoff, the owner afterwards (the resumed workflow's owner; a handoff's
  recipient) is the owner recorded when that checkpoint opened.
- **completed after interruption**: settled degraded workflows that reached
  ``completed``.
- **launch**: a workflow created; **resume**: a resume or retry-step decision
  that succeeded (placed at the moment it reached the agent).
- **time to claim**: from a checkpoint opening to its first claim or
  assignment; **time to decision**: to its first decision; both over the
  checkpoints opened in the period, median and 90th percentile.
- **interruption to completion**: from a completed degraded workflow's first
  interruption to its completion.
- **SLA breach rate**: checkpoints opened in the period with a recorded
  breach of their time-to-claim or time-to-decision target, over checkpoints
  opened in the period.

Every figure counts production only: a workflow a recovery drill picked
(``Workflow.drill``, issue 26) is left out unless ``Filters.drills`` includes
the drills (``"include"``) or names one drill (its id: that drill's runs only,
which is how the drill report reads the same definitions). ``in_scope`` is the
one place that rule is written; pages that query beside these functions use it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.db import NotSupportedError, connection, transaction
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, TruncDate, TruncWeek
from django.utils import timezone

from .models import RESUMING_ACTIONS, Action, Checkpoint, Decision, Event, Runbook, Step, Workflow
from .models.events import SWEEP_VERBS
from .models.lineage import repeats_an_earlier_effect
from .via import Via

V = Event.Verb
DUPLICATE_EFFECT_VERB = V.EFFECT_DUPLICATE_REFUSED
RESUMING = tuple(sorted(RESUMING_ACTIONS))  # resume, retry the step, fail over to a standby agent
CONTINUING = (*RESUMING, Action.HANDOFF)
GRANULARITIES = ("day", "week")
DIMENSIONS = ("agent", "kind", "reason", "runbook")
_QS = TypeVar("_QS", bound=QuerySet[Any])


# --- the period and the filters --------------------------------------------------------------

@dataclass(frozen=True)
class Filters:
    """A date range (UTC days, both ends included) and optional filters, as kept in a URL."""

    start: date
    end: date
    agent: str = ""      # agent name
    kind: str = ""       # workflow kind
    reason: str = ""     # checkpoint reason
    runbook: str = ""    # runbook slug
    # A team's slug: the staffing budget and the breach review narrow by it (from their own query
    # field; Filters.from_query leaves it out, since the daily rollups hold no team).
    team: str = ""
    drills: str = ""     # "" production only; "include": drilled workflows too; a drill's id: its runs only

    DEFAULT_DAYS = 28
    MAX_DAYS = 731

    @classmethod
    def last(cls, days: int = DEFAULT_DAYS, *, today: date | None = None, **kwargs: str) -> Filters:
        today = today or timezone.now().astimezone(UTC).date()
        return cls(start=today - timedelta(days=days - 1), end=today, **kwargs)

    @classmethod
    def from_query(cls, query: Any, *, today: date | None = None) -> Filters:
        """From request.GET: bad or missing dates fall back to the last 28 days."""
        default = cls.last(today=today)

        def day(name: str, fallback: date) -> date:
            try:
                return date.fromisoformat(str(query.get(name) or ""))
            except ValueError:
                return fallback

        end = day("end", default.end)
        start = day("start", end - timedelta(days=cls.DEFAULT_DAYS - 1))
        if start > end:
            start, end = end, start
        start = max(start, end - timedelta(days=cls.MAX_DAYS - 1))
        text = {name: str(query.get(name) or "").strip()[:200] for name in ("agent", "kind", "reason", "runbook")}
        return cls(start=start, end=end, drills=drills_param(query.get("drills")), **text)

    def as_query(self, **override: Any) -> dict[str, str]:
        values = {"start": self.start.isoformat(), "end": self.end.isoformat(), "agent": self.agent,
                  "kind": self.kind, "reason": self.reason, "runbook": self.runbook, "team": self.team,
                  "drills": self.drills, **override}
        return {k: str(v) for k, v in values.items() if v not in ("", None)}

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time.min, tzinfo=UTC)

    @property
    def until(self) -> datetime:
        """Exclusive upper bound: midnight after the last day."""
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=UTC)

    def previous(self) -> Filters:
        """The period of the same length just before this one, same filters."""
        return replace(self, start=self.start - timedelta(days=self.days), end=self.start - timedelta(days=1))

    def only(self, **kwargs: Any) -> Filters:
        return replace(self, **kwargs)

    @property
    def active(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in DIMENSIONS if getattr(self, name)}


# Where each filter dimension lives, seen from a checkpoint; a workflow holds the first two itself.
CHECKPOINT_LOOKUPS = {"agent": "workflow__agent__name", "kind": "workflow__kind", "reason": "reason",
                      "runbook": "runbook__slug", "team": "team__slug"}
WORKFLOW_LOOKUPS = {"agent": "agent__name", "kind": "kind"}


def _narrowed(qs: _QS, filters: Filters, lookups: Mapping[str, str], prefix: str = "") -> _QS:
    """``qs`` filtered on each set dimension that ``lookups`` places, behind ``prefix`` (the path from
    the queryset's model to the one ``lookups`` starts from)."""
    for name, lookup in lookups.items():
        if value := getattr(filters, name):
            qs = qs.filter(**{prefix + lookup: value})
    return qs


DRILLS_INCLUDED = "include"


def drills_param(value: Any) -> str:
    """The ``drills`` filter as a URL carries it: "include", a drill's id, or "" (production only)."""
    text = str(value or "").strip()
    if text == DRILLS_INCLUDED or (text.isdigit() and len(text) <= 10):
        return text
    return ""


def in_scope(qs: _QS, drills: str = "", *, to_workflow: str = "") -> _QS:
    """``qs`` without drilled workflows (production figures), unless ``drills`` includes them ("include") or
    names one drill (only its runs). ``to_workflow`` is the path from the queryset's model to the workflow."""
    if drills == DRILLS_INCLUDED:
        return qs
    if drills.isdigit():
        return qs.filter(**{f"{to_workflow}drill_id": int(drills)})
    return qs.filter(**{f"{to_workflow}drill__isnull": True})


def _workflows(filters: Filters) -> QuerySet[Any]:
    return in_scope(_narrowed(Workflow.objects.all(), filters, WORKFLOW_LOOKUPS), filters.drills)


def _checkpoints(filters: Filters) -> QuerySet[Any]:
    return in_scope(_narrowed(Checkpoint.objects.all(), filters, CHECKPOINT_LOOKUPS), filters.drills,
                    to_workflow="workflow__")


# --- per-workflow predicates, as SQL -----------------------------------------------------------

class JSONKeyText(Func):
    """``json[key]`` as text, with the key taken from another column (Django's KT needs a constant)."""

    function = "jsonb_extract_path_text"  # PostgreSQL
    output_field = CharField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        document, key = self.source_expressions
        doc_sql, doc_params = compiler.compile(document)
        key_sql, key_params = compiler.compile(key)
        return f"json_extract({doc_sql}, '$.\"' || {key_sql} || '\"')", (*doc_params, *key_params)


def _first_checkpoint_at() -> Subquery:
    return Subquery(Checkpoint.objects.filter(workflow=OuterRef("pk")).order_by("opened_at")
                    .values("opened_at")[:1], output_field=DateTimeField())


def _blank_failure() -> Exists:
    # Failed while running: the agent gave up without leaving a checkpoint for that degradation.
    return Exists(Event.objects.filter(workflow=OuterRef("pk"), verb=V.FINISHED_FAILED,
                                       data__from=Workflow.Status.RUNNING))


def _decided(actions: Iterable[str]) -> Exists:
    return Exists(Decision.objects.filter(checkpoint__workflow=OuterRef("pk"), action__in=list(actions),
                                          status=Decision.Status.SUCCEEDED))


def _unkept_unknown_effect() -> Exists:
    """An effect pending when a checkpoint opened, never committed, never confirmed "happened"."""
    later = Checkpoint.objects.filter(workflow=OuterRef("workflow"), opened_at__gte=OuterRef("created_at"))
    confirmed = Decision.objects.filter(checkpoint__workflow=OuterRef("workflow")).annotate(
        verdict=JSONKeyText(F("confirmations"), OuterRef("idempotency_key"))).filter(verdict="happened")
    # Still pending, or failed only after the checkpoint opened: it was pending (unknown) at the checkpoint.
    unknown_at_a_checkpoint = (Q(status=Step.Status.PENDING) & Exists(later)) | (
        Q(status=Step.Status.FAILED) & Exists(later.filter(opened_at__lt=OuterRef("updated_at"))))
    return Exists(Step.objects.filter(workflow=OuterRef("pk"), kind=Step.Kind.EFFECT)
                  .filter(unknown_at_a_checkpoint).exclude(Exists(confirmed)))


def _unkept_promise() -> Exists:
    """A promise to the user that no committed user-facing step at or after its first making fulfils."""
    # A promise repeated word for word (an agent re-running its model step after a restart) is the same
    # promise: a message sent after its first making keeps it.
    first_made = Step.objects.filter(workflow=OuterRef("workflow"), promise=OuterRef("promise")).order_by("seq")
    fulfilled = Step.objects.filter(workflow=OuterRef("workflow"), seq__gte=OuterRef("first_made"),
                                    status=Step.Status.COMMITTED).filter(
        Q(kind=Step.Kind.MESSAGE) | (Q(kind=Step.Kind.EFFECT, promise__isnull=False) & ~Q(promise="")))
    return Exists(Step.objects.filter(workflow=OuterRef("pk"), promise__isnull=False)
                  .exclude(promise="").exclude(status=Step.Status.FAILED)
                  .annotate(first_made=Subquery(first_made.values("seq")[:1]))
                  .exclude(Exists(fulfilled)))


def _owner_after() -> Case:
    """Who had the workflow after a resume (recorded on the event) or a handoff (its recipient)."""
    username = get_user_model().USERNAME_FIELD
    current_owner = Subquery(Workflow.objects.filter(pk=OuterRef("workflow")).values(f"owner__{username}")[:1])
    return Case(
        When(data__has_key="owner", then=Coalesce(KT("data__owner"), Value(""), output_field=CharField())),
        When(verb=V.HANDED_OFF, then=Coalesce(KT("data__to"), Value(""), output_field=CharField())),
        # Resumes recorded before the owner was written on the event: the owner now.
        default=Coalesce(current_owner, Value(""), output_field=CharField()), output_field=CharField())


def _owner_changed() -> Exists:
    owner_at_interruption = Subquery(
        Event.objects.filter(workflow=OuterRef("workflow"), verb=V.OPENED, at__lte=OuterRef("at"))
        .order_by("-at", "-pk").annotate(owner=Coalesce(KT("data__owner"), Value(""), output_field=CharField())).values("owner")[:1])
    return Exists(Event.objects.filter(workflow=OuterRef("pk"), verb__in=[V.RESUMED, V.HANDED_OFF])
                  .annotate(after=_owner_after(), before=owner_at_interruption).exclude(after=F("before")))


def with_recovery(qs: QuerySet[Any]) -> QuerySet[Any]:
    """Workflows annotated with every per-workflow predicate the figures count."""
    annotated: QuerySet[Any] = qs.annotate(
        interrupted_at=Coalesce(_first_checkpoint_at(), Case(When(status=Workflow.Status.FAILED,
                                                                   then=F("finished_at")))),
        has_checkpoint=Exists(Checkpoint.objects.filter(workflow=OuterRef("pk"))),
        blank_failure=_blank_failure(),
        resumed=_decided(RESUMING),
        continued=_decided(CONTINUING),
        handed_off=_decided([Action.HANDOFF]),
        duplicate_attempt=Exists(Event.objects.filter(workflow=OuterRef("pk"), verb=DUPLICATE_EFFECT_VERB))
        | repeats_an_earlier_effect(),
        unkept_unknown_effect=_unkept_unknown_effect(),
        unkept_promise=_unkept_promise(),
        owner_changed=_owner_changed(),
    )
    return annotated


# Each figure: who counts (numerator) among whom (denominator), as Q over with_recovery().
SETTLED = Q(status__in=list(Workflow.TERMINAL))
COMPLETED = Q(status=Workflow.Status.COMPLETED)
# Judged where the agent completed the work: a handed-off workflow is finished by people outside the record.
LOST_EFFECT = COMPLETED & Q(handed_off=False) & (Q(unkept_unknown_effect=True) | Q(unkept_promise=True))
CLEAN = Q(resumed=True) & COMPLETED & Q(duplicate_attempt=False) & ~LOST_EFFECT


@dataclass(frozen=True)
class Figure:
    slug: str
    label: str
    numerator: Q
    denominator: Q
    definition: str


FIGURES = {f.slug: f for f in (
    Figure("resumed_without_data_loss", "Resumed without data loss", CLEAN, SETTLED,
           "Settled degraded workflows that were resumed and completed with no duplicate-effect attempt (nor an "
           "effect repeated across a fork's lineage) and "
           "no lost effect."),
    Figure("preserved_checkpoint", "Preserved a user-visible checkpoint", Q(blank_failure=False), Q(),
           "Degraded workflows where every degradation produced a checkpoint (none was reported failed while "
           "running, a blank state)."),
    Figure("same_owner", "Returned to the same owner", Q(owner_changed=False), Q(continued=True),
           "Resumed or handed-off workflows whose owner afterwards is the owner when the checkpoint opened."),
    Figure("completed_after_interruption", "Completed after interruption", COMPLETED, SETTLED,
           "Settled degraded workflows that reached completed."),
)}
HEADLINES = tuple(FIGURES)


@dataclass(frozen=True)
class Why:
    """One reason a settled degraded workflow missed "resumed without data loss"."""

    slug: str
    label: str
    q: Q  # over with_recovery(), among the misses, after the reasons before it

    @property
    def set(self) -> str:
        return f"missed_because:{self.slug}"


def _first_that_holds(reasons: Iterable[tuple[str, str, Q]]) -> tuple[Why, ...]:
    """Each miss under the first reason that holds for it: the reasons partition the misses."""
    whys, earlier = [], Q()
    for slug, label, q in reasons:
        whys.append(Why(slug, label, SETTLED & ~CLEAN & q & ~earlier if earlier else SETTLED & ~CLEAN & q))
        earlier = earlier | q if earlier else q
    return tuple(whys)


# Why each settled degraded workflow was not resumed without data loss, one reason each, the first that
# holds: together they are ``resumed_without_data_loss:missed``. An operator's deliberate abort or handoff
# is told apart from a failure; what is left completed, and says what spoiled it.
MISSED_BECAUSE = _first_that_holds((
    ("aborted", "aborted by an operator", Q(status=Workflow.Status.ABORTED)),
    ("handed_off", "handed off to people", Q(handed_off=True)),
    ("failed", "failed", Q(status=Workflow.Status.FAILED)),
    ("not_resumed", "completed without a resume", Q(resumed=False)),
    ("duplicate_attempt", "completed after a duplicate-effect attempt", Q(duplicate_attempt=True)),
    ("lost_effect", "completed with a lost effect", LOST_EFFECT),
))

# Further sets a TPM can drill into; each is a Q over with_recovery().
SETS: dict[str, tuple[str, Q]] = {
    "degraded": ("Degraded", Q()),
    "in_flight": ("Still in flight", ~SETTLED),
    "blank_failure": ("Blank-state failures", Q(blank_failure=True)),
    "resumed": ("Resumed", Q(resumed=True)),
    "continued": ("Resumed or handed off", Q(continued=True)),
    "duplicate_attempt": ("Duplicate-effect attempts", Q(duplicate_attempt=True)),
    "lost_effect": ("Lost effects", LOST_EFFECT),
    "owner_changed": ("Owner changed", Q(continued=True, owner_changed=True)),
    "handed_off": ("Handed off", Q(handed_off=True)),
    "ended_by_operator": ("Handed off or aborted", Q(handed_off=True) | Q(status=Workflow.Status.ABORTED)),
    "not_completed": ("Settled, not completed", SETTLED & ~COMPLETED),
    **{why.set: (f"Not resumed without data loss: {why.label}", why.q) for why in MISSED_BECAUSE},
    **{f"{slug}:met": (figure.label, figure.denominator & figure.numerator) for slug, figure in FIGURES.items()},
    **{f"{slug}:missed": (f"{figure.label}: missed", figure.denominator & ~figure.numerator)
       for slug, figure in FIGURES.items()},
}


@dataclass(frozen=True)
class Missed:
    """How many of a figure's misses each reason explains (``MISSED_BECAUSE``), as a page shows them."""

    why: Why
    count: int


def missed_because(counts: Mapping[str, int], figure: str) -> list[Missed]:
    """The misses of ``figure`` by reason, from a summary's counts: for "resumed without data loss" (the
    others' misses say why themselves: a blank state, an owner change, not completed)."""
    if figure != "resumed_without_data_loss":
        return []
    return [Missed(why, counts.get(why.set, 0)) for why in MISSED_BECAUSE]


def degraded(filters: Filters) -> QuerySet[Any]:
    """Workflows first interrupted in the period (their first checkpoint, or a failure without one)."""
    # Per workflow (an index probe), not "pk IN (every checkpoint of the period)": a drill-down page
    # walks the workflows newest first and stops after 50.
    interrupted_in_period = Checkpoint.objects.filter(workflow=OuterRef("pk"), opened_at__gte=filters.since,
                                                      opened_at__lt=filters.until)
    candidates = _workflows(filters).filter(
        Exists(interrupted_in_period)
        | Q(status=Workflow.Status.FAILED, finished_at__gte=filters.since, finished_at__lt=filters.until))
    qs = with_recovery(candidates).filter(interrupted_at__gte=filters.since, interrupted_at__lt=filters.until)
    if filters.reason or filters.runbook:
        qs = qs.filter(Exists(_checkpoints(filters.only(agent="", kind="")).filter(workflow=OuterRef("pk"))))
    return qs


def workflows_behind(filters: Filters, figure: str) -> QuerySet[Any]:
    """The drill-down: the degraded workflows a figure or set counts (``<figure>:met|missed`` or a set)."""
    if figure in ("launches", "resumes"):
        return launched(filters) if figure == "launches" else resumed_in(filters)
    label_q = SETS.get(figure)
    if label_q is None:
        raise KeyError(figure)
    return degraded(filters).filter(label_q[1])


def figure_label(figure: str) -> str:
    if figure == "launches":
        return "Launched"
    if figure == "resumes":
        return "Resumed in the period"
    return SETS[figure][0]


def launched(filters: Filters) -> QuerySet[Any]:
    return _workflows(filters).filter(created_at__gte=filters.since, created_at__lt=filters.until)


def resumes(filters: Filters) -> QuerySet[Any]:
    """Resume and retry-step decisions that reached the agent in the period."""
    qs = Decision.objects.filter(action__in=RESUMING, status=Decision.Status.SUCCEEDED,
                                 finished_at__gte=filters.since, finished_at__lt=filters.until)
    return in_scope(_narrowed(qs, filters, CHECKPOINT_LOOKUPS, "checkpoint__"), filters.drills,
                    to_workflow="checkpoint__workflow__")


def resumed_in(filters: Filters) -> QuerySet[Any]:
    return Workflow.objects.filter(pk__in=resumes(filters).values("checkpoint__workflow_id"))


# --- the summary -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Share:
    slug: str
    label: str
    part: int
    whole: int
    definition: str

    @property
    def value(self) -> float | None:
        return self.part / self.whole if self.whole else None

    @property
    def percent(self) -> float | None:
        return None if self.value is None else 100.0 * self.value


@dataclass(frozen=True)
class Summary:
    filters: Filters
    counts: dict[str, int]
    shares: dict[str, Share]
    launches: int
    resumes: int

    def __getitem__(self, slug: str) -> Share:
        return self.shares[slug]


def _share_counts(qs: QuerySet[Any]) -> dict[str, int]:
    # Aggregate names must not shadow the annotations they count: "n:" prefixes them.
    aggregates: dict[str, Any] = {f"n:{slug}": Count("pk", filter=q) for slug, (_label, q) in SETS.items()}
    for slug, figure in FIGURES.items():
        aggregates[f"n:{slug}:whole"] = Count("pk", filter=figure.denominator) if figure.denominator else Count("pk")
    return {k[2:]: v or 0 for k, v in qs.aggregate(**aggregates).items()}


def summary(filters: Filters) -> Summary:
    counts = _share_counts(degraded(filters))
    shares = {slug: Share(slug, f.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], f.definition)
              for slug, f in FIGURES.items()}
    return Summary(filters, counts, shares, launched(filters).count(), resumes(filters).count())


# --- over time and by dimension ------------------------------------------------------------------

def buckets(filters: Filters, granularity: str) -> list[date]:
    """The first day of every bucket in the period (weeks start on Monday)."""
    first = filters.start if granularity == "day" else filters.start - timedelta(days=filters.start.weekday())
    step = timedelta(days=1 if granularity == "day" else 7)
    days, current = [], first
    while current <= filters.end:
        days.append(current)
        current += step
    return days


def _trunc(granularity: str, name: str) -> Any:
    return (TruncDate if granularity == "day" else TruncWeek)(name, tzinfo=UTC)


def _as_day(value: Any) -> date:
    return value.date() if isinstance(value, datetime) else value


@dataclass
class Series:
    buckets: list[date]
    granularity: str
    launches: list[int] = field(default_factory=list)
    resumes: list[int] = field(default_factory=list)
    degraded: list[int] = field(default_factory=list)
    shares: dict[str, list[float | None]] = field(default_factory=dict)


def series(filters: Filters, granularity: str = "day") -> Series:
    """Launches, resumes, degraded workflows and the four shares per bucket (of first interruption)."""
    if granularity not in GRANULARITIES:
        raise ValueError(granularity)
    days = buckets(filters, granularity)
    index = {d: i for i, d in enumerate(days)}
    out = Series(days, granularity, [0] * len(days), [0] * len(days), [0] * len(days),
                 {slug: [None] * len(days) for slug in FIGURES})

    def place(rows: Iterable[dict[str, Any]], target: list[int]) -> None:
        for row in rows:
            i = index.get(_as_day(row["bucket"]))
            if i is not None:
                target[i] += row["n"]

    place(launched(filters).annotate(bucket=_trunc(granularity, "created_at")).values("bucket")
          .annotate(n=Count("pk")).order_by(), out.launches)
    place(resumes(filters).annotate(bucket=_trunc(granularity, "finished_at")).values("bucket")
          .annotate(n=Count("pk")).order_by(), out.resumes)
    aggregates: dict[str, Any] = {"n": Count("pk")}
    for slug, figure in FIGURES.items():
        aggregates[f"n:{slug}:met"] = Count("pk", filter=figure.denominator & figure.numerator)
        aggregates[f"n:{slug}:whole"] = Count("pk", filter=figure.denominator) if figure.denominator else Count("pk")
    rows = degraded(filters).annotate(bucket=_trunc(granularity, "interrupted_at")).values("bucket") \
        .annotate(**aggregates).order_by()
    for row in rows:
        i = index.get(_as_day(row["bucket"]))
        if i is None:
            continue
        out.degraded[i] += row["n"]
        for slug in FIGURES:
            whole = row[f"n:{slug}:whole"]
            out.shares[slug][i] = row[f"n:{slug}:met"] / whole if whole else None
    return out


def _dimension_values(filters: Filters, dimension: str) -> list[str]:
    if dimension == "agent":
        return list(degraded(filters).values_list("agent__name", flat=True).distinct().order_by("agent__name"))
    if dimension == "kind":
        return list(degraded(filters).values_list("kind", flat=True).distinct().order_by("kind"))
    column = "reason" if dimension == "reason" else "runbook__slug"
    interrupted = degraded(filters).values("pk")
    values = _checkpoints(filters).filter(workflow__in=interrupted).values_list(column, flat=True)
    return sorted({v or "" for v in values.distinct().order_by()})


@dataclass(frozen=True)
class BreakdownRow:
    value: str
    filters: Filters
    degraded: int
    shares: dict[str, Share]


def breakdown(filters: Filters, dimension: str) -> list[BreakdownRow]:
    """The four shares per agent, kind, reason or runbook (a workflow counts under each reason it paused for)."""
    if dimension not in DIMENSIONS:
        raise ValueError(dimension)
    rows = []
    for value in _dimension_values(filters, dimension):
        if dimension == "runbook" and not value:
            continue  # no runbook matched: nothing to filter on
        narrowed = filters.only(**{dimension: value})
        counts = _share_counts(degraded(narrowed))
        rows.append(BreakdownRow(value, narrowed, counts["degraded"], {
            slug: Share(slug, f.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], f.definition)
            for slug, f in FIGURES.items()}))
    return sorted(rows, key=lambda r: (-r.degraded, r.value))


# --- timings, decisions, breaches ------------------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    """A duration over a set of rows: how many have both ends, their median and their 90th percentile
    (seconds). The database computes it (``_timing``); ``Timing.of`` is the same definition over
    durations already in Python, which the tests hold the SQL to."""

    label: str
    count: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, label: str, seconds: Iterable[float]) -> Timing:
        values = sorted(seconds)
        return cls(label, len(values), median(values), percentile(values, 90))


def median(values: list[float]) -> float | None:
    """The middle value; of an even count, halfway between the two middle ones, as ``lo + (hi - lo) * 0.5``
    (PostgreSQL's ``percentile_cont(0.5)`` to the last bit, where ``(lo + hi) / 2`` may differ in it)."""
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    return _halfway(ordered[(n - 1) // 2], ordered[n // 2])


def _halfway(lo: float, hi: float) -> float:
    return lo + 0.5 * (hi - lo)  # float8_lerp in PostgreSQL's orderedsetaggs.c


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile: the smallest value with ``pct`` % of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[_nearest_rank(len(ordered), pct) - 1]


def _nearest_rank(n: int, pct: float) -> int:
    # The same float arithmetic as percentile_disc: ceil(fraction * n), at least the first row.
    return max(1, math.ceil(pct / 100 * n))


class Seconds(Func):
    """``end - start`` in seconds (PostgreSQL): ``EXTRACT(EPOCH …)`` is exact, its cast to float rounds like
    ``timedelta.total_seconds()``, so the database orders and interpolates the values Python would."""

    output_field = FloatField()

    def __init__(self, end: Any, start: Any) -> None:
        super().__init__(end, start)

    def as_sql(self, compiler: Any, connection: Any, function: str | None = None, template: str | None = None,
               arg_joiner: str | None = None, **extra_context: Any) -> Any:
        raise NotSupportedError("Seconds is PostgreSQL's; other databases order the durations themselves.")

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        (end, end_params), (start, start_params) = (compiler.compile(e) for e in self.source_expressions)
        return f"EXTRACT(EPOCH FROM ({end} - {start}))::double precision", (*end_params, *start_params)


class _OrderedSet(Aggregate):
    """``function(fraction) WITHIN GROUP (ORDER BY expression)``: an ordered-set aggregate of PostgreSQL,
    over the rows where the expression is not null."""

    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


class PercentileCont(_OrderedSet):
    function = "percentile_cont"  # interpolated: the median of an even count is halfway between the middle two


class PercentileDisc(_OrderedSet):
    function = "percentile_disc"  # the first value at or past the fraction: the nearest rank


def _timing(label: str, qs: QuerySet[Any], start: str, end: str) -> Timing:
    """``end - start`` over the rows of ``qs`` that have both, computed where the rows are: a million
    checkpoints never travel to Python for a median."""
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                # The planner prices the fallback subqueries (rows from before the stamps) as if each row ran
                # them, which wakes the JIT compiler: at 80k rows compiling took 0.75 s of a 1.2 s query, the
                # sort itself 0.2 s. This transaction's queries are small: no JIT for them.
                cursor.execute("SET LOCAL jit = off")
            row = qs.annotate(timing_seconds=Seconds(F(end), F(start))).aggregate(
                n=Count("timing_seconds"), median=PercentileCont("timing_seconds", 0.5),
                p90=PercentileDisc("timing_seconds", 0.9))
        return Timing(label, row["n"], row["median"], row["p90"])
    return _timing_by_rank(label, qs, start, end)


def _timing_by_rank(label: str, qs: QuerySet[Any], start: str, end: str) -> Timing:
    """Elsewhere (SQLite): count, then read only the middle row or two and the p90 row, in the order of
    the durations. The database sorts; Python interpolates exactly as ``median`` does."""
    durations = (qs.annotate(timing=F(end) - F(start)).filter(timing__isnull=False)
                 .order_by("timing").values_list("timing", flat=True))
    n = durations.count()
    if not n:
        return Timing(label, 0, None, None)
    middle = [d.total_seconds() for d in durations[(n - 1) // 2:n // 2 + 1]]
    rank = _nearest_rank(n, 90)
    [p90] = [d.total_seconds() for d in durations[rank - 1:rank]]
    return Timing(label, n, _halfway(middle[0], middle[-1]), p90)


def opened_checkpoints(filters: Filters) -> QuerySet[Any]:
    return _checkpoints(filters).filter(opened_at__gte=filters.since, opened_at__lt=filters.until)


def with_clocks(qs: QuerySet[Any]) -> QuerySet[Any]:
    """Checkpoints annotated with their first claim (or assignment) and their first decision."""
    first_claim = Event.objects.filter(checkpoint=OuterRef("pk"), verb__in=[V.CLAIMED, V.ASSIGNED]).order_by("at")
    first_decision = Decision.objects.filter(checkpoint=OuterRef("pk")).order_by("decided_at")
    annotated: QuerySet[Any] = qs.annotate(
        # The checkpoint stamps its first claim (first_claimed_at); rows from before it did: the events.
        claimed_first_at=Coalesce("first_claimed_at", Subquery(first_claim.values("at")[:1]),
                                  output_field=DateTimeField()),
        # Likewise its first decision (first_decision_at); rows from before it did, or loaded in bulk: the decisions.
        first_decided_at=Coalesce("first_decision_at", Subquery(first_decision.values("decided_at")[:1]),
                                  output_field=DateTimeField()),
    )
    return annotated


def time_to_claim(filters: Filters) -> Timing:
    return _timing("Time to claim", with_clocks(opened_checkpoints(filters)), "opened_at", "claimed_first_at")


def time_to_decision(filters: Filters) -> Timing:
    return _timing("Time to decision", with_clocks(opened_checkpoints(filters)), "opened_at", "first_decided_at")


def decision_times_by_channel(filters: Filters) -> list[Timing]:
    """Time to decision by the channel its first decision (or four-eyes proposal) came through: the console,
    Slack, an email link (``Decision.channel``). Over the checkpoints opened in the period, from the opening
    to that decision, like ``time_to_decision``; a checkpoint with no decision row (rows loaded in bulk) is
    in no channel."""
    firsts = decisions(filters).filter(decided_at=F("checkpoint__first_decision_at"))
    return [_timing(f"Time to decision via {label}", firsts.filter(channel=value), "checkpoint__opened_at",
                    "decided_at") for value, label in Via.choices]


def interruption_to_completion(filters: Filters) -> Timing:
    return _timing("Interruption to completion", degraded(filters).filter(COMPLETED), "interrupted_at",
                   "finished_at")


def decisions(filters: Filters) -> QuerySet[Any]:
    """Decisions on checkpoints opened in the period (every one: failed and rejected ones too)."""
    return Decision.objects.filter(checkpoint__in=opened_checkpoints(filters).values("pk"))


def decisions_by_action_and_outcome(filters: Filters) -> dict[tuple[str, str], int]:
    rows = decisions(filters).values("action", "status").annotate(n=Count("pk")).order_by("action", "status")
    return {(r["action"], r["status"]): r["n"] for r in rows}


@dataclass(frozen=True)
class BreachRate:
    breached: int
    opened: int

    @property
    def value(self) -> float | None:
        return self.breached / self.opened if self.opened else None


# A checkpoint that breached its time-to-claim or time-to-decision target.
BREACHED = Q(breached_at__isnull=False) | Q(claim_breached_at__isnull=False)


def breach_rate(filters: Filters) -> BreachRate:
    counts = opened_checkpoints(filters).aggregate(opened=Count("pk"), breached=Count("pk", filter=BREACHED))
    return BreachRate(counts["breached"], counts["opened"])


def duplicate_effect_attempts(filters: Filters) -> QuerySet[Any]:
    """The refused duplicate effects themselves (events), in the period."""
    qs = Event.objects.filter(verb=DUPLICATE_EFFECT_VERB, at__gte=filters.since, at__lt=filters.until)
    return in_scope(_narrowed(qs, filters, WORKFLOW_LOOKUPS, "workflow__"), filters.drills, to_workflow="workflow__")


def choices(kinds: list[str] | None = None) -> dict[str, list[str]]:
    """What the filters can be set to: the agents, kinds, reasons and runbooks recorded.

    ``kinds`` when the caller knows them (workflows.rollups.kinds: not a scan of every workflow)."""
    from .models import Agent, Reason

    return {
        "agent": list(Agent.objects.order_by("name").values_list("name", flat=True)),
        "kind": kinds if kinds is not None else list(
            Workflow.objects.order_by("kind").values_list("kind", flat=True).distinct()),
        "reason": list(Reason.values),
        "runbook": list(Runbook.objects.order_by("slug").values_list("slug", flat=True)),
    }


def trend(now: Share, before: Share) -> float | None:
    """Percentage points gained since the previous period (None when either has no data)."""
    if now.percent is None or before.percent is None:
        return None
    return now.percent - before.percent


# --- the SLA breach review (TPMs) ---------------------------------------------------------------------
# Computed from the clocks stamped on checkpoints (opened, first claim, decision, breach) and from the
# sweep's events; nothing here is a number written for the report.

def decision_target_met(filters: Filters) -> Share:
    """Of the checkpoints opened in the period whose decision target is settled, the share that met it."""
    counts = opened_checkpoints(filters).aggregate(
        settled=Count("pk", filter=Q(breached_at__isnull=False) | Q(clock_stopped_at__isnull=False)),
        met=Count("pk", filter=Q(breached_at__isnull=True, clock_stopped_at__isnull=False)))
    return Share("decision_target_met", "Decision target met", counts["met"], counts["settled"],
                 "Of the checkpoints opened in the period that are decided or past their decision target, the "
                 "share decided by their due time.")


def claim_target_met(filters: Filters) -> Share:
    """Of the checkpoints opened in the period with a claim target that is settled, the share that met it."""
    counts = opened_checkpoints(filters).filter(claim_due_at__isnull=False).aggregate(
        settled=Count("pk", filter=Q(claim_breached_at__isnull=False) | Q(first_claimed_at__isnull=False)),
        met=Count("pk", filter=Q(claim_breached_at__isnull=True, first_claimed_at__isnull=False)))
    return Share("claim_target_met", "Claim target met", counts["met"], counts["settled"],
                 "Of the checkpoints opened in the period with a time-to-claim target that are claimed or past it, "
                 "the share claimed in time.")


SLA_ACTIVITY = {  # what the sweep did, counted from its events
    "escalations": Q(verb=V.ESCALATED),
    "reminders": Q(verb=V.CLAIM_REMINDER),
    "releases": Q(verb=V.RELEASED, actor_type=Event.ActorType.SYSTEM),
}


def sla_activity(filters: Filters) -> dict[str, int]:
    """Escalation levels fired, claim reminders sent and claims released by the sweep in the period."""
    # Through the small partial index of the sweep's verbs, not every event of the period.
    qs = Event.objects.filter(verb__in=SWEEP_VERBS, at__gte=filters.since, at__lt=filters.until,
                              checkpoint__isnull=False)
    if filters.agent:
        qs = qs.filter(workflow__agent__name=filters.agent)
    if filters.kind:
        qs = qs.filter(workflow__kind=filters.kind)
    if filters.runbook:
        qs = qs.filter(checkpoint__runbook__slug=filters.runbook)
    if filters.team:
        qs = qs.filter(checkpoint__team__slug=filters.team)
    qs = in_scope(qs, filters.drills, to_workflow="workflow__")
    counts: dict[str, int] = qs.aggregate(**{name: Count("pk", filter=q) for name, q in SLA_ACTIVITY.items()})
    return counts


def met_and_breached_by_day(filters: Filters) -> tuple[list[date], list[int], list[int]]:
    """Per day opened: the settled checkpoints that met their decision target and those that breached it."""
    rows = (opened_checkpoints(filters)
            .filter(Q(breached_at__isnull=False) | Q(clock_stopped_at__isnull=False))
            .annotate(day=TruncDate("opened_at", tzinfo=UTC)).values("day")
            .annotate(met=Count("pk", filter=Q(breached_at__isnull=True)),
                      breached=Count("pk", filter=Q(breached_at__isnull=False))))
    by_day = {_as_day(r["day"]): (r["met"], r["breached"]) for r in rows}
    days = [filters.start + timedelta(days=i) for i in range(filters.days)]
    return days, [by_day.get(d, (0, 0))[0] for d in days], [by_day.get(d, (0, 0))[1] for d in days]


def breaches_by(breaches: QuerySet[Any], lookup: str, limit: int = 10) -> list[tuple[str, int]]:
    """The most frequent values of ``lookup`` among ``breaches`` (checkpoints), most first."""
    rows = breaches.order_by().values(lookup).annotate(n=Count("pk")).order_by("-n", lookup)[:limit]
    return [(str(r[lookup]) if r[lookup] is not None else "", r["n"]) for r in rows]


def breaches_by_hour_of_week(breaches: QuerySet[Any]) -> list[list[int]]:
    """7 rows (Monday first) of 24 hours (UTC): how many breaches fell in each hour of the week."""
    from django.db.models.functions import ExtractHour, ExtractIsoWeekDay

    grid = [[0] * 24 for _ in range(7)]
    rows = (breaches.order_by().annotate(dow=ExtractIsoWeekDay("breached_at", tzinfo=UTC),
                                         hour=ExtractHour("breached_at", tzinfo=UTC))
            .values("dow", "hour").annotate(n=Count("pk")))
    for r in rows:
        grid[r["dow"] - 1][r["hour"]] += r["n"]
    return grid
