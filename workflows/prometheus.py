"""The console's figures for Prometheus, read from the database at each scrape.

A custom collector rather than counters incremented in-process: the console
runs several gunicorn workers, Celery workers and a beat, and an in-process
counter would only know what its own process did (the client library's
multiprocess mode fixes that with files shared by the workers of one host,
not across hosts or containers). The database already holds every fact, so
each scrape asks it; a short cache shared through ``CACHE_URL`` keeps a
burst of scrapes from repeating the queries. Counters are monotonic because
the rows they count are never deleted (events are append-only).

The four shares are ``workflows.metrics``'s over the trailing ``METRICS_SHARE_DAYS`` days (28 by
default), read like the dashboard reads them: from the daily rollups (``workflows.rollups``), the days
not rolled yet computed live.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Q, Sum
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import incident_figures, metrics, rollups, sla_figures
from .filters import in_scope
from .models import BrokerStatus, Checkpoint, Decision, Event, Incident, Reason, Workflow
from .timings import Timing
from .via import Via

V = Event.Verb
CACHE_KEY = "recovery:prometheus:exposition"
FINISHED = (Decision.Status.SUCCEEDED, Decision.Status.FAILED, Decision.Status.REJECTED)
# Production figures only: drilled workflows (issue 26) are left out by metrics.in_scope. A workflow is
# drilled from its creation on, so the counters stay monotonic.
CHECKPOINT, DECISION, EVENT = (
    {"to_workflow": "workflow__"},
    {"to_workflow": "checkpoint__workflow__"},
    {"to_workflow": "workflow__"},
)


class RecoveryCollector(Collector):
    """Every figure of the console as Prometheus metric families (see docs/grafana-dashboard.json)."""

    def collect(self) -> Iterator[Metric]:
        yield from self.checkpoints_in()
        yield from self._decisions()
        yield from self._workflows()
        yield from self._shares()
        yield from self._channels()
        yield from self._incidents()

    def checkpoints_in(self) -> Iterator[Metric]:
        open_now = GaugeMetricFamily(
            "recovery_open_checkpoints", "Checkpoints on the queue (open or claimed).", labels=["reason"]
        )
        counts = dict(
            in_scope(Checkpoint.objects.open(), **CHECKPOINT).values_list("reason").annotate(n=Count("pk")).order_by()
        )
        for reason in Reason.values:
            open_now.add_metric([reason], counts.get(reason, 0))
        yield open_now
        opened = CounterMetricFamily(
            "recovery_checkpoints_opened",
            "Checkpoints opened (degradations that reached the pause surface).",
            labels=["reason"],
        )
        counts = dict(
            in_scope(Checkpoint.objects.all(), **CHECKPOINT).values_list("reason").annotate(n=Count("pk")).order_by()
        )
        for reason in Reason.values:
            opened.add_metric([reason], counts.get(reason, 0))
        yield opened
        sla = in_scope(Checkpoint.objects.all(), **CHECKPOINT).aggregate(
            warned=Count("pk", filter=Q(warned_at__isnull=False)),
            breached=Count("pk", filter=Q(breached_at__isnull=False)),
        )
        yield CounterMetricFamily("recovery_sla_warnings", "SLA warnings recorded.", value=sla["warned"])
        yield CounterMetricFamily("recovery_sla_breaches", "SLA breaches recorded.", value=sla["breached"])

    def _decisions(self) -> Iterator[Metric]:
        finished = CounterMetricFamily(
            "recovery_decisions", "Decisions by action and final outcome.", labels=["action", "outcome"]
        )
        pending = GaugeMetricFamily(
            "recovery_decisions_in_flight", "Decisions not finished yet, by state.", labels=["action", "state"]
        )
        for row in (
            in_scope(Decision.objects.all(), **DECISION).values("action", "status").annotate(n=Count("pk")).order_by()
        ):
            target = finished if row["status"] in FINISHED else pending
            target.add_metric([row["action"], row["status"]], row["n"])
        yield finished
        yield pending
        attempts = in_scope(Decision.objects.all(), **DECISION).aggregate(n=Sum("attempts"))["n"] or 0
        yield CounterMetricFamily(
            "recovery_delivery_attempts", "Delivery attempts to resume endpoints.", value=attempts
        )
        events = dict(
            in_scope(
                Event.objects.filter(verb__in=[V.DELIVERY_RETRY, V.DELIVERY_FAILED, V.EFFECT_DUPLICATE_REFUSED]),
                **EVENT,
            )
            .values_list("verb")
            .annotate(n=Count("pk"))
            .order_by()
        )
        yield CounterMetricFamily(
            "recovery_delivery_retries",
            "Delivery attempts that failed and were retried.",
            value=events.get(V.DELIVERY_RETRY, 0),
        )
        yield CounterMetricFamily(
            "recovery_delivery_failures",
            "Decisions whose delivery failed for good (the checkpoint went back to the queue).",
            value=events.get(V.DELIVERY_FAILED, 0),
        )
        yield CounterMetricFamily(
            "recovery_duplicate_effect_attempts",
            "Effects reported again under a used idempotency key (refused with 409).",
            value=events.get(V.EFFECT_DUPLICATE_REFUSED, 0),
        )

        failing = BrokerStatus.failing()
        yield GaugeMetricFamily(
            "recovery_broker_failing",
            "1 while the broker refuses the messages handed to it (decisions wait in the outbox), else 0.",
            value=int(failing is not None),
        )

    def _workflows(self) -> Iterator[Metric]:
        status = GaugeMetricFamily("recovery_workflows", "Workflows by status.", labels=["status"])
        counts = dict(in_scope(Workflow.objects.all()).values_list("status").annotate(n=Count("pk")).order_by())
        for value in Workflow.Status.values:
            status.add_metric([value], counts.get(value, 0))
        yield status
        yield CounterMetricFamily("recovery_launches", "Workflows launched.", value=sum(counts.values()))
        blank = in_scope(
            Event.objects.filter(verb=V.FINISHED_FAILED, data__from=Workflow.Status.RUNNING), **EVENT
        ).count()
        yield CounterMetricFamily(
            "recovery_blank_state_failures",
            "Workflows reported failed while running (no checkpoint: a blank state).",
            value=blank,
        )

    def _shares(self) -> Iterator[Metric]:
        days = settings.METRICS_SHARE_DAYS
        summary = rollups.Figures(metrics.Filters.last(days)).summary()  # the daily rollups, today live
        share = GaugeMetricFamily(
            "recovery_share",
            f"The four headline shares over the last {days} days (0..1; absent when nothing to count).",
            labels=["figure"],
        )
        part = GaugeMetricFamily("recovery_share_part", "Workflows a share counts.", labels=["figure"])
        whole = GaugeMetricFamily("recovery_share_whole", "Workflows a share is taken over.", labels=["figure"])
        for slug, value in summary.shares.items():
            if value.value is not None:
                share.add_metric([slug], value.value)
            part.add_metric([slug], value.part)
            whole.add_metric([slug], value.whole)
        yield share
        yield part
        yield whole
        yield GaugeMetricFamily(
            "recovery_degraded_workflows",
            f"Workflows degraded in the last {days} days.",
            value=summary.counts["degraded"],
        )

    def _channels(self) -> Iterator[Metric]:
        """Where decisions and claims come from (console, Slack, email link), and how long each channel takes."""
        days = settings.METRICS_SHARE_DAYS
        period = metrics.Filters.last(days)
        counted = CounterMetricFamily(
            "recovery_decisions_by_channel",
            "Decisions (and four-eyes proposals) by the channel they were made through.",
            labels=["channel"],
        )
        counts = dict(Decision.objects.values_list("channel").annotate(n=Count("pk")).order_by())
        for channel in Via.values:
            counted.add_metric([channel], counts.get(channel, 0))
        yield counted
        yield _by_channel(
            "recovery_time_to_decision_by_channel_seconds",
            "Time from a checkpoint's opening to its "
            f"first decision, by that decision's channel, over the last {days} days (median and p90 "
            "absent when none).",
            sla_figures.decision_times_by_channel(period),
        )
        yield _by_channel(
            "recovery_time_to_claim_by_channel_seconds",
            "Time from a checkpoint's opening to its "
            f"first claim, by that claim's channel, over the last {days} days (median and p90 absent "
            "when none).",
            sla_figures.claim_times_by_channel(period),
        )

    def _incidents(self) -> Iterator[Metric]:
        """Incidents (workflows/incident_figures.py): how many, how fast they recover, how much work they hold."""
        days = settings.METRICS_SHARE_DAYS
        opened = CounterMetricFamily(
            "recovery_incidents_opened",
            "Incidents opened (merged ones included: a counter never goes down).",
            value=Incident.objects.count(),
        )
        yield opened
        by_status = GaugeMetricFamily(
            "recovery_incidents", "Incidents by status (merged ones left out).", labels=["status"]
        )
        counts = dict(
            Incident.objects.filter(merged_into__isnull=True).values_list("status").annotate(n=Count("pk")).order_by()
        )
        for status in Incident.Status.values:
            by_status.add_metric([status], counts.get(status, 0))
        yield by_status
        figures = incident_figures.figures(metrics.Filters.last(days))
        took = GaugeMetricFamily(
            "recovery_incident_time_to_recover_seconds",
            "From an incident's first member "
            f"to its last member resolved, over the incidents opened in the last {days} days "
            "(median and p90 absent when none recovered).",
            labels=["stat"],
        )
        for stat, value in (("median", figures.time_to_recover.median), ("p90", figures.time_to_recover.p90)):
            if value is not None:
                took.add_metric([stat], value)
        took.add_metric(["count"], figures.time_to_recover.count)
        yield took
        yield GaugeMetricFamily(
            "recovery_incidents_in_period",
            f"Incidents opened in the last {days} days (merged ones left out).",
            value=figures.incidents,
        )
        inside = GaugeMetricFamily(
            "recovery_checkpoints_in_incidents_share",
            "The share of checkpoints opened in "
            f"the last {days} days that arrived inside an incident (0..1; absent when none).",
        )
        if figures.inside_share is not None:
            inside.add_metric([], figures.inside_share)
        yield inside


def _by_channel(name: str, documentation: str, timings: list[Timing]) -> GaugeMetricFamily:
    """One gauge of a timing per channel (``Via``, in its order): median and p90 when measured, and the count."""
    took = GaugeMetricFamily(name, documentation, labels=["channel", "stat"])
    for channel, timing in zip(Via.values, timings, strict=True):
        for stat, value in (("median", timing.median), ("p90", timing.p90)):
            if value is not None:
                took.add_metric([channel, stat], value)
        took.add_metric([channel, "count"], timing.count)
    return took


def exposition() -> bytes:
    """The text format for one scrape; shared by every web worker for METRICS_CACHE_SECONDS."""
    cached = cache.get(CACHE_KEY) if settings.METRICS_CACHE_SECONDS else None
    if isinstance(cached, bytes):
        return cached
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecoveryCollector())
    body: bytes = generate_latest(registry)
    if settings.METRICS_CACHE_SECONDS:
        cache.set(CACHE_KEY, body, settings.METRICS_CACHE_SECONDS)
    return body
