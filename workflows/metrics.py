"""The one definition of every recovery figure: here the resume dashboard's figures; the periods and
filters they are read over in ``workflows.filters``; over time and by dimension in ``workflows.trends``, how
long recovery takes in ``workflows.timings``, the SLA figures (breach rate, targets met, the sweep's
activity) in ``workflows.sla_figures``.

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
which is how the drill report reads the same definitions). ``filters.in_scope`` is
the one place that rule is written; pages that query beside these functions use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.contrib.auth import get_user_model
from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

from .filters import (
    CHECKPOINT_LOOKUPS,
    DIMENSIONS,
    DRILLS_INCLUDED,
    WORKFLOW_LOOKUPS,
    Filters,
    checkpoints_in,
    in_scope,
    narrowed,
    workflows_in,
)
from .models import RESUMING_ACTIONS, Action, Checkpoint, Decision, Event, Runbook, Step, Workflow
from .models.lineage import repeats_an_earlier_effect

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType
    from django_stubs_ext import WithAnnotations

V = Event.Verb
DUPLICATE_EFFECT_VERB = V.EFFECT_DUPLICATE_REFUSED
RESUMING = tuple(sorted(RESUMING_ACTIONS))  # resume, retry the step, fail over to a standby agent
CONTINUING = (*RESUMING, Action.HANDOFF)
GRANULARITIES = ("day", "week")
# The period and filters live in workflows.filters; they are named here too, where every page reads its figures.
__all__ = ["DIMENSIONS", "DRILLS_INCLUDED", "Filters", "in_scope"]


# --- per-workflow predicates, as SQL -----------------------------------------------------------


class JSONKeyText(Func):
    """``json[key]`` as text, with the key taken from another column (Django's KT needs a constant)."""

    function = "jsonb_extract_path_text"  # PostgreSQL
    output_field = CharField()

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: object) -> _AsSqlType:
        document, key = self.source_expressions
        doc_sql, doc_params = compiler.compile(document)
        key_sql, key_params = compiler.compile(key)
        return f"json_extract({doc_sql}, '$.\"' || {key_sql} || '\"')", (*doc_params, *key_params)


def _first_checkpoint_at() -> Subquery:
    return Subquery(
        Checkpoint.objects.filter(workflow=OuterRef("pk")).order_by("opened_at").values("opened_at")[:1],
        output_field=DateTimeField(),
    )


def _blank_failure() -> Exists:
    # Failed while running: the agent gave up without leaving a checkpoint for that degradation.
    return Exists(
        Event.objects.filter(workflow=OuterRef("pk"), verb=V.FINISHED_FAILED, data__from=Workflow.Status.RUNNING)
    )


def _decided(actions: Iterable[str]) -> Exists:
    return Exists(
        Decision.objects.filter(
            checkpoint__workflow=OuterRef("pk"), action__in=list(actions), status=Decision.Status.SUCCEEDED
        )
    )


def _unkept_unknown_effect() -> Exists:
    """An effect pending when a checkpoint opened, never committed, never confirmed "happened"."""
    later = Checkpoint.objects.filter(workflow=OuterRef("workflow"), opened_at__gte=OuterRef("created_at"))
    confirmed = (
        Decision.objects.filter(checkpoint__workflow=OuterRef("workflow"))
        .annotate(verdict=JSONKeyText(F("confirmations"), OuterRef("idempotency_key")))
        .filter(verdict="happened")
    )
    # Still pending, or failed only after the checkpoint opened: it was pending (unknown) at the checkpoint.
    unknown_at_a_checkpoint = (Q(status=Step.Status.PENDING) & Exists(later)) | (
        Q(status=Step.Status.FAILED) & Exists(later.filter(opened_at__lt=OuterRef("updated_at")))
    )
    return Exists(
        Step.objects.filter(workflow=OuterRef("pk"), kind=Step.Kind.EFFECT)
        .filter(unknown_at_a_checkpoint)
        .exclude(Exists(confirmed))
    )


def _unkept_promise() -> Exists:
    """A promise to the user that no committed user-facing step at or after its first making fulfils."""
    # A promise repeated word for word (an agent re-running its model step after a restart) is the same
    # promise: a message sent after its first making keeps it.
    first_made = Step.objects.filter(workflow=OuterRef("workflow"), promise=OuterRef("promise")).order_by("seq")
    fulfilled = Step.objects.filter(
        workflow=OuterRef("workflow"), seq__gte=OuterRef("first_made"), status=Step.Status.COMMITTED
    ).filter(Q(kind=Step.Kind.MESSAGE) | (Q(kind=Step.Kind.EFFECT, promise__isnull=False) & ~Q(promise="")))
    return Exists(
        Step.objects.filter(workflow=OuterRef("pk"), promise__isnull=False)
        .exclude(promise="")
        .exclude(status=Step.Status.FAILED)
        .annotate(first_made=Subquery(first_made.values("seq")[:1]))
        .exclude(Exists(fulfilled))
    )


def _owner_after() -> Case:
    """Who had the workflow after a resume (recorded on the event) or a handoff (its recipient)."""
    username = get_user_model().USERNAME_FIELD
    current_owner = Subquery(Workflow.objects.filter(pk=OuterRef("workflow")).values(f"owner__{username}")[:1])
    return Case(
        When(data__has_key="owner", then=Coalesce(KT("data__owner"), Value(""), output_field=CharField())),
        When(verb=V.HANDED_OFF, then=Coalesce(KT("data__to"), Value(""), output_field=CharField())),
        # Resumes recorded before the owner was written on the event: the owner now.
        default=Coalesce(current_owner, Value(""), output_field=CharField()),
        output_field=CharField(),
    )


def _owner_changed() -> Exists:
    owner_at_interruption = Subquery(
        Event.objects.filter(workflow=OuterRef("workflow"), verb=V.OPENED, at__lte=OuterRef("at"))
        .order_by("-at", "-pk")
        .annotate(owner=Coalesce(KT("data__owner"), Value(""), output_field=CharField()))
        .values("owner")[:1]
    )
    return Exists(
        Event.objects.filter(workflow=OuterRef("pk"), verb__in=[V.RESUMED, V.HANDED_OFF])
        .annotate(after=_owner_after(), before=owner_at_interruption)
        .exclude(after=F("before"))
    )


class Recovery(TypedDict):
    """What ``with_recovery`` annotates a workflow with: every per-workflow predicate the figures count."""

    interrupted_at: datetime | None
    has_checkpoint: bool
    blank_failure: bool
    resumed: bool
    continued: bool
    handed_off: bool
    duplicate_attempt: bool
    unkept_unknown_effect: bool
    unkept_promise: bool
    owner_changed: bool


def with_recovery(qs: QuerySet[Workflow]) -> QuerySet[WithAnnotations[Workflow, Recovery]]:
    """Workflows annotated with every per-workflow predicate the figures count."""
    annotated: QuerySet[WithAnnotations[Workflow, Recovery]] = qs.annotate(
        interrupted_at=Coalesce(
            _first_checkpoint_at(), Case(When(status=Workflow.Status.FAILED, then=F("finished_at")))
        ),
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


FIGURES = {
    f.slug: f
    for f in (
        Figure(
            "resumed_without_data_loss",
            "Resumed without data loss",
            CLEAN,
            SETTLED,
            "Settled degraded workflows that were resumed and completed with no duplicate-effect attempt (nor an "
            "effect repeated across a fork's lineage) and "
            "no lost effect.",
        ),
        Figure(
            "preserved_checkpoint",
            "Preserved a user-visible checkpoint",
            Q(blank_failure=False),
            Q(),
            "Degraded workflows where every degradation produced a checkpoint (none was reported failed while "
            "running, a blank state).",
        ),
        Figure(
            "same_owner",
            "Returned to the same owner",
            Q(owner_changed=False),
            Q(continued=True),
            "Resumed or handed-off workflows whose owner afterwards is the owner when the checkpoint opened.",
        ),
        Figure(
            "completed_after_interruption",
            "Completed after interruption",
            COMPLETED,
            SETTLED,
            "Settled degraded workflows that reached completed.",
        ),
    )
}
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
MISSED_BECAUSE = _first_that_holds(
    (
        ("aborted", "aborted by an operator", Q(status=Workflow.Status.ABORTED)),
        ("handed_off", "handed off to people", Q(handed_off=True)),
        ("failed", "failed", Q(status=Workflow.Status.FAILED)),
        ("not_resumed", "completed without a resume", Q(resumed=False)),
        ("duplicate_attempt", "completed after a duplicate-effect attempt", Q(duplicate_attempt=True)),
        ("lost_effect", "completed with a lost effect", LOST_EFFECT),
    )
)

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
    **{
        f"{slug}:missed": (f"{figure.label}: missed", figure.denominator & ~figure.numerator)
        for slug, figure in FIGURES.items()
    },
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


def degraded(filters: Filters) -> QuerySet[WithAnnotations[Workflow, Recovery]]:
    """Workflows first interrupted in the period (their first checkpoint, or a failure without one)."""
    # Per workflow (an index probe), not "pk IN (every checkpoint of the period)": a drill-down page
    # walks the workflows newest first and stops after 50.
    interrupted_in_period = Checkpoint.objects.filter(
        workflow=OuterRef("pk"), opened_at__gte=filters.since, opened_at__lt=filters.until
    )
    candidates = workflows_in(filters).filter(
        Exists(interrupted_in_period)
        | Q(status=Workflow.Status.FAILED, finished_at__gte=filters.since, finished_at__lt=filters.until)
    )
    qs = with_recovery(candidates).filter(interrupted_at__gte=filters.since, interrupted_at__lt=filters.until)
    if filters.reason or filters.runbook or filters.team:
        qs = qs.filter(Exists(checkpoints_in(filters.only(agent="", kind="")).filter(workflow=OuterRef("pk"))))
    return qs


def workflows_behind(filters: Filters, figure: str) -> QuerySet[Workflow]:
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


def launched(filters: Filters) -> QuerySet[Workflow]:
    return workflows_in(filters).filter(created_at__gte=filters.since, created_at__lt=filters.until)


def resumes(filters: Filters) -> QuerySet[Decision]:
    """Resume and retry-step decisions that reached the agent in the period."""
    qs = Decision.objects.filter(
        action__in=RESUMING,
        status=Decision.Status.SUCCEEDED,
        finished_at__gte=filters.since,
        finished_at__lt=filters.until,
    )
    return in_scope(
        narrowed(qs, filters, CHECKPOINT_LOOKUPS, "checkpoint__"), filters.drills, to_workflow="checkpoint__workflow__"
    )


def resumed_in(filters: Filters) -> QuerySet[Workflow]:
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


def share_counts(qs: QuerySet[Workflow]) -> dict[str, int]:
    # Aggregate names must not shadow the annotations they count: "n:" prefixes them.
    aggregates: dict[str, Count] = {f"n:{slug}": Count("pk", filter=q) for slug, (_label, q) in SETS.items()}
    for slug, figure in FIGURES.items():
        aggregates[f"n:{slug}:whole"] = Count("pk", filter=figure.denominator) if figure.denominator else Count("pk")
    return {k[2:]: v or 0 for k, v in qs.aggregate(**aggregates).items()}


def _shares(counts: Mapping[str, int]) -> dict[str, Share]:
    return {
        slug: Share(slug, f.label, counts[f"{slug}:met"], counts[f"{slug}:whole"], f.definition)
        for slug, f in FIGURES.items()
    }


def summary(filters: Filters) -> Summary:
    counts = share_counts(degraded(filters))
    return Summary(filters, counts, _shares(counts), launched(filters).count(), resumes(filters).count())


def shares_over(workflows: QuerySet[Workflow]) -> dict[str, Share]:
    """The four shares over a given set of workflows (an incident's members' workflows), by the same
    definitions as the dashboard's; not limited to a period."""
    return _shares(share_counts(with_recovery(workflows)))


def duplicate_effect_attempts(filters: Filters) -> QuerySet[Event]:
    """The refused duplicate effects themselves (events), in the period."""
    qs = Event.objects.filter(verb=DUPLICATE_EFFECT_VERB, at__gte=filters.since, at__lt=filters.until)
    return in_scope(narrowed(qs, filters, WORKFLOW_LOOKUPS, "workflow__"), filters.drills, to_workflow="workflow__")


def choices(kinds: list[str] | None = None) -> dict[str, list[str]]:
    """What the filters can be set to: the agents, kinds, reasons and runbooks recorded.

    ``kinds`` when the caller knows them (workflows.rollups.kinds: not a scan of every workflow)."""
    from .models import Agent, Reason

    return {
        "agent": list(Agent.objects.order_by("name").values_list("name", flat=True)),
        "kind": kinds
        if kinds is not None
        else list(Workflow.objects.order_by("kind").values_list("kind", flat=True).distinct()),
        "reason": list(Reason.values),
        "runbook": list(Runbook.objects.order_by("slug").values_list("slug", flat=True)),
    }


def trend(now: Share, before: Share) -> float | None:
    """Percentage points gained since the previous period (None when either has no data)."""
    if now.percent is None or before.percent is None:
        return None
    return now.percent - before.percent
