"""The agent API's limits hold across processes, and bad tokens are limited per client address.

Finding 6 of issue 12: with the default per-process cache three gunicorn workers
accepted about three times the limit, and requests with bad tokens were never limited.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.core.checks import run_checks
from django.test import Client

from tests.apitools import api_agent

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


def _bad(client: Client, address: str):
    return client.get("/api/v1/workflows/1", HTTP_AUTHORIZATION="Bearer rc_wrong", REMOTE_ADDR=address)


def test_an_address_sending_bad_tokens_is_limited_and_others_are_not(db, settings, fresh_counters):
    settings.API_AUTH_FAILURES_PER_MINUTE = 5
    client = Client()
    answers = [_bad(client, "203.0.113.5").status_code for _ in range(8)]
    assert answers == [401] * 5 + [429] * 3
    limited = _bad(client, "203.0.113.5")
    assert limited.json()["error"]["code"] == "rate_limited" and int(limited["Retry-After"]) >= 1
    assert _bad(client, "203.0.113.6").status_code == 401  # another client
    missing = client.get("/api/v1/workflows/1", REMOTE_ADDR="203.0.113.5")
    assert missing.status_code == 429  # no token at all counts as a failure too


def test_a_valid_token_is_never_slowed_by_the_failure_counter(db, settings, fresh_counters):
    settings.API_AUTH_FAILURES_PER_MINUTE = 1
    bot = api_agent()
    for _ in range(3):
        assert bot.post("/workflows", {"external_id": "T-1", "kind": "refund", "title": "t"}).status_code in (200, 201)


def _hook():
    return runpy.run_path(str(ROOT / "console" / "gunicorn.py"))["on_starting"]


@pytest.mark.parametrize(
    ("workers", "cache_url", "starts"),
    [(3, "", False), (3, "locmemcache://", False), (3, "redis://redis:6379/1", True), (1, "", True)],
)
def test_gunicorn_refuses_several_workers_with_a_per_process_cache(monkeypatch, workers, cache_url, starts):
    monkeypatch.setenv("CACHE_URL", cache_url)
    server = SimpleNamespace(cfg=SimpleNamespace(workers=workers))
    if starts:
        _hook()(server)
    else:
        with pytest.raises(RuntimeError, match="CACHE_URL"):
            _hook()(server)


def test_check_deploy_flags_a_per_process_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert "console.W001" in {m.id for m in run_checks(include_deployment_checks=True)}
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6386/1"}
    }
    assert "console.W001" not in {m.id for m in run_checks(include_deployment_checks=True)}
