"""Personas, backend detection and the skip rules for tests that need real servers.

CI (``.ci/run``) sets DATABASE_URL to PostgreSQL and CELERY_BROKER_URL to Redis,
so every test runs there. On a laptop with the embedded defaults, tests marked
``postgres`` or ``redis`` are skipped with the reason printed in the summary.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

# Tests never need a real secret; settings refuse to start without one when DEBUG is off.
os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("MANIFEST_STATIC", "false")  # no collectstatic before tests

from django.conf import settings

from tests.stack import full_stack_required

pytest_plugins = [
    "tests.apitools",
    "tests.browser_fixtures",
    "tests.fleet_fixtures",
    "tests.replaytools",
    "tests.slack_fake",
]


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def _redis_url() -> str | None:
    url = os.environ.get("CELERY_BROKER_URL", "")
    return url if url.startswith("redis://") else None


CHROMIUM = "/usr/bin/chromium"


def _missing() -> dict[str, str | None]:
    """For each marker, why its tests cannot run here (None: they can)."""
    return {
        "postgres": None
        if _on_postgres()
        else "needs PostgreSQL (row locks): set DATABASE_URL=postgres://… as .ci/run does",
        "redis": None if _redis_url() else "needs Redis: set CELERY_BROKER_URL=redis://… as .ci/run does",
        "browser": None if os.path.exists(CHROMIUM) else f"needs Debian's Chromium at {CHROMIUM}",
        "compose": None if shutil.which("docker-compose") else "needs docker-compose to validate the compose file",
    }


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_stack_required():
        return
    missing = _missing()
    for item in items:
        for marker, reason in missing.items():
            if reason and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if full_stack_required():
        for marker, reason in _missing().items():
            if reason and marker in item.keywords:
                pytest.fail(f"REQUIRE_FULL_STACK=1 but this test {reason}", pytrace=False)


def _persona(username: str, role: str):
    """The fixture of one of the suite's people: a user named ``username`` in ``role``."""

    @pytest.fixture(name=username)
    def persona(db):
        from tests.helpers import make_user

        return make_user(username, role=role)

    return persona


alice = _persona("alice", "operator")
bob = _persona("bob", "operator")
tess = _persona("tess", "tpm")
adam = _persona("adam", "admin")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2's deliberate slowness costs ~0.3 s per user; tests have nothing to protect.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Test traffic goes to loopback only, where receivers and the demo fleet listen over plain http: these
# rules let exactly that through (tests/stack.py gives the same to the processes it starts).
# tests/test_delivery_safety.py puts the production rules back to attack them.
LOOPBACK_DELIVERY = {"DELIVERY_ALLOWED_NETWORKS": ["127.0.0.1/32", "::1/128"], "DELIVERY_REQUIRE_HTTPS": False}


@pytest.fixture(autouse=True)
def _deliveries_to_loopback(settings):
    for name, value in LOOPBACK_DELIVERY.items():
        setattr(settings, name, value)


@pytest.fixture(autouse=True)
def _no_failed_auth_limit(settings):
    # The suite sends many deliberately unauthenticated API requests from one address, and the
    # counter lives in the shared cache: tests/test_api_limits_shared.py turns the limit on.
    settings.API_AUTH_FAILURES_PER_MINUTE = 0


@pytest.fixture
def rng(request):
    """A seeded random generator; the seed is printed (pytest shows it with a failure) and
    ``TEST_SEED=<seed>`` replays the same choices."""
    seed = int(os.environ.get("TEST_SEED") or random.SystemRandom().randrange(1_000_000))
    print(f"{request.node.nodeid}: random seed {seed} (TEST_SEED={seed} replays it)")
    return random.Random(seed)


@pytest.fixture
def receiver():
    """A recording resume endpoint (tests.stack.Receiver)."""
    from tests.stack import Receiver

    r = Receiver()
    yield r
    r.close()
