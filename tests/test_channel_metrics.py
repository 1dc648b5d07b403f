"""Each decision records its channel; the resume dashboard and /metrics show time to decision by channel,
from the one definition in workflows/metrics.py."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import make_checkpoint, make_worked_example
from workflows import metrics, sla_figures
from workflows.models import Checkpoint, Decider, Decision
from workflows.via import Via, acting_via


def decided(by, *, via: Via, after_minutes: float) -> Decision:
    checkpoint = make_checkpoint(make_worked_example())
    opened = timezone.now() - timedelta(minutes=after_minutes)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(opened_at=opened)
    checkpoint.refresh_from_db()
    with acting_via(via):
        return Decider(checkpoint).decide(by=by, action="abort")


def test_time_to_decision_is_measured_by_the_channel_of_the_first_decision(alice):
    decided(alice, via=Via.CONSOLE, after_minutes=40)
    decided(alice, via=Via.SLACK, after_minutes=2)
    decided(alice, via=Via.SLACK, after_minutes=4)
    decided(alice, via=Via.EMAIL, after_minutes=20)

    # Today and yesterday: the oldest checkpoint opened 40 minutes ago, which is yesterday just after midnight.
    by_channel = {t.label: t for t in sla_figures.decision_times_by_channel(metrics.Filters.last(2))}

    console, slack, email = (
        by_channel[f"Time to decision via {label}"] for label in ("Console", "Slack", "Email link")
    )
    assert (console.count, slack.count, email.count) == (1, 2, 1)
    assert abs(slack.median - 180) < 5 and abs(console.median - 2400) < 5 and abs(email.p90 - 1200) < 5


def test_the_dashboard_and_metrics_show_time_to_decision_by_channel(alice, tess, settings):
    decided(alice, via=Via.SLACK, after_minutes=3)
    client = Client()
    client.force_login(tess)

    html = client.get("/resumes/").content.decode()
    assert "Time to decision via Slack" in html and html.count('data-testid="channel-timing"') == 3

    settings.METRICS_TOKEN, settings.METRICS_CACHE_SECONDS = "scrape", 0
    body = Client().get("/metrics", headers={"Authorization": "Bearer scrape"}).content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("recovery_decisions_by_channel_total", (("channel", "slack"),))] == 1
    assert samples[("recovery_decisions_by_channel_total", (("channel", "console"),))] == 0
    median = samples[("recovery_time_to_decision_by_channel_seconds", (("channel", "slack"), ("stat", "median")))]
    assert abs(median - 180) < 5
    assert ("recovery_time_to_decision_by_channel_seconds", (("channel", "email"), ("stat", "median"))) not in samples


def claimed(by, *, via: Via, after_minutes: float) -> Checkpoint:
    checkpoint = make_checkpoint(make_worked_example())
    Checkpoint.objects.filter(pk=checkpoint.pk).update(opened_at=timezone.now() - timedelta(minutes=after_minutes))
    checkpoint.refresh_from_db()
    with acting_via(via):
        assert checkpoint.claim(by=by)
    return checkpoint


def test_the_first_claim_records_its_channel_and_a_later_claim_does_not_change_it(alice, bob):
    checkpoint = claimed(alice, via=Via.SLACK, after_minutes=5)
    assert checkpoint.first_claim_channel == Via.SLACK
    first = checkpoint.first_claimed_at
    assert checkpoint.release(by=alice)
    assert checkpoint.claim(by=bob)  # in the console, later: the first claim stays the one measured
    assert (checkpoint.first_claim_channel, checkpoint.first_claimed_at) == (Via.SLACK, first)


def test_a_decision_without_a_claim_counts_as_the_claim_through_its_channel(alice):
    checkpoint = decided(alice, via=Via.EMAIL, after_minutes=7).checkpoint
    checkpoint.refresh_from_db()
    assert checkpoint.first_claim_channel == Via.EMAIL and checkpoint.first_claimed_at is not None


def test_time_to_claim_is_measured_by_the_channel_of_the_first_claim(alice):
    claimed(alice, via=Via.CONSOLE, after_minutes=30)
    claimed(alice, via=Via.SLACK, after_minutes=1)
    claimed(alice, via=Via.SLACK, after_minutes=3)

    # Today and yesterday: the oldest opened 30 minutes ago, yesterday just after midnight.
    by_channel = {t.label: t for t in sla_figures.claim_times_by_channel(metrics.Filters.last(2))}

    console, slack, email = (by_channel[f"Time to claim via {label}"] for label in ("Console", "Slack", "Email link"))
    assert (console.count, slack.count, email.count) == (1, 2, 0)
    assert abs(slack.median - 120) < 5 and abs(console.median - 1800) < 5 and email.median is None


def test_the_dashboard_and_metrics_show_time_to_claim_by_channel(alice, tess, settings):
    claimed(alice, via=Via.SLACK, after_minutes=2)
    client = Client()
    client.force_login(tess)

    html = client.get("/resumes/").content.decode()
    assert "Time to claim via Slack" in html and html.count('data-testid="claim-channel-timing"') == 3

    settings.METRICS_TOKEN, settings.METRICS_CACHE_SECONDS = "scrape", 0
    body = Client().get("/metrics", headers={"Authorization": "Bearer scrape"}).content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    median = samples[("recovery_time_to_claim_by_channel_seconds", (("channel", "slack"), ("stat", "median")))]
    assert abs(median - 120) < 5
    assert samples[("recovery_time_to_claim_by_channel_seconds", (("channel", "console"), ("stat", "count")))] == 0
    assert ("recovery_time_to_claim_by_channel_seconds", (("channel", "email"), ("stat", "median"))) not in samples
