"""GET /metrics: the console's figures for Prometheus, from the database, behind a token or an address list."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.recovery_histories import build_history
from workflows import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture
def scrape(settings):
    settings.METRICS_TOKEN = "scrape-token-for-tests"
    settings.METRICS_ALLOWED_IPS = []
    settings.METRICS_CACHE_SECONDS = 0

    def get(**headers) -> dict[tuple[str, tuple], float]:
        response = Client().get("/metrics", headers={"Authorization": "Bearer scrape-token-for-tests", **headers})
        assert response.status_code == 200, response.content[:300]
        assert response["Content-Type"].startswith("text/plain; version=")
        samples = {}
        for family in text_string_to_metric_families(response.content.decode()):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return samples

    return get


def test_without_the_token_or_an_allowed_address_metrics_are_refused(settings, db):
    settings.METRICS_TOKEN = "right"
    settings.METRICS_ALLOWED_IPS = []
    assert Client().get("/metrics").status_code == 403
    assert Client().get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403


def test_an_allowed_address_needs_no_token(settings, db):
    settings.METRICS_TOKEN = ""
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.168.1.1").get("/metrics").status_code == 403


def test_the_figures_are_the_recorded_ones_and_the_shares_are_the_dashboards(scrape, alice, bob, adam):
    build_history(operator=alice, other=bob, owner=adam)
    samples = scrape()
    assert samples[("recovery_open_checkpoints", (("reason", "rate_limit"),))] == 1  # "waiting"
    assert samples[("recovery_checkpoints_opened_total", (("reason", "model_timeout"),))] == 3
    assert samples[("recovery_duplicate_effect_attempts_total", ())] == 1
    assert samples[("recovery_blank_state_failures_total", ())] == 1
    assert samples[("recovery_decisions_total", (("action", "resume"), ("outcome", "succeeded")))] == 4
    assert samples[("recovery_decisions_total", (("action", "handoff"), ("outcome", "succeeded")))] == 1
    assert samples[("recovery_launches_total", ())] == 9
    assert samples[("recovery_sla_breaches_total", ())] == 0
    assert samples[("recovery_workflows", (("status", "paused"),))] == 1
    summary = metrics.summary(metrics.Filters.last(28))
    for slug, share in summary.shares.items():
        assert samples[("recovery_share", (("figure", slug),))] == pytest.approx(share.value)
        assert samples[("recovery_share_whole", (("figure", slug),))] == share.whole
    assert samples[("recovery_share", (("figure", "resumed_without_data_loss"),))] == pytest.approx(1 / 7)


def test_a_scrape_is_shared_by_the_workers_for_a_few_seconds(scrape, settings, alice, bob, adam):
    settings.METRICS_CACHE_SECONDS = 60
    from django.core.cache import cache

    cache.clear()
    before = scrape()[("recovery_launches_total", ())]
    build_history(operator=alice, other=bob, owner=adam)
    assert scrape()[("recovery_launches_total", ())] == before  # the cached exposition
    cache.clear()
    assert scrape()[("recovery_launches_total", ())] == before + 9


def test_the_grafana_dashboard_queries_only_metrics_the_console_exposes(settings, db):
    import json
    import re

    from tests.stack import ROOT

    settings.METRICS_ALLOWED_IPS, settings.METRICS_CACHE_SECONDS = ["127.0.0.1/32"], 0
    text = Client().get("/metrics").content.decode()
    exposed = {f.name + ("_total" if f.type == "counter" else "") for f in text_string_to_metric_families(text)}
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\brecovery_[a-z_]+", target["expr"])
    }
    assert used and used <= exposed, used - exposed
