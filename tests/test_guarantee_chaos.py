"""Guarantees 2, 3 and 4 under chaos: `make chaos CHAOS_ARGS=--hard`, shorter.

Runs scripts/chaos (``python -m scripts.chaos``) as a subprocess on a PostgreSQL database of its own and
the hard profile: the demo fleet with faults at every step, two scripted
operators working the queue over HTTP; a Celery worker, the web server, the
fleet itself and a private Redis each SIGKILLed at least twice (Redis comes back
empty), the run's database refused and its sessions cut twice, deliveries
crossing a slow and lossy proxy, and one worker's clock five minutes ahead;
then its disk-pressure run: the embedded default's broker (the filesystem
transport) in a tmpfs folder filled to the last byte while workers run. Through it all, the incident
scenario (scripts/chaos/incident.py): a short provider outage of one agent forms an incident, which a scripted
incident commander holds, recovers with a rate-limited rollout (four eyes: a deputy approves it) and resolves.
Then it reads the figures the script printed:
every degraded workflow reached a checkpoint, every resumed one completed with
no duplicate and no lost effect and went back to its owner, no decision was lost; every member of the
incident was delivered exactly once by the rollout, which never exceeded its rate limit; and the
dashboard's headline, exported as CSV from the same database, shows the same figures.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import urllib.parse

import pytest
from django.conf import settings

from tests.stack import ROOT, private_redis

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

WORKFLOWS = 60
KILLED = ("worker", "web", "fleet", "redis", "postgres")


@pytest.fixture
def chaos_database():
    """A database of its own on the test server: the script drops and creates it."""
    import psycopg
    from psycopg import sql

    db = settings.DATABASES["default"]
    name = f"chaos_{db['NAME']}_{os.getpid()}"[:63]
    password = f":{urllib.parse.quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    server = (
        f"postgresql://{urllib.parse.quote(db.get('USER') or 'postgres')}{password}@"
        f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    )
    yield f"{server}/{name}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def chaos_redis():
    with private_redis() as server:  # the script flushes its broker database: never a shared one
        yield server.url


def test_the_fleet_survives_the_hard_profile_stores_network_clock_and_killed_processes(
    chaos_database, chaos_redis, tmp_path
):
    seed = random.SystemRandom().randrange(1_000_000)
    print(f"chaos seed {seed}")
    figures_path = tmp_path / "figures.json"
    env = {**os.environ, "DATABASE_URL": chaos_database, "CELERY_BROKER_URL": chaos_redis}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.chaos",
            "--workflows",
            str(WORKFLOWS),
            "--seed",
            str(seed),
            "--hard",
            "--interval",
            "2.5",
            "--kill-interval",
            "2",
            "--kill-rounds",
            "2",
            "--silence",
            "10",
            "--delivery-attempts",
            "2",
            # Deadlines, not targets: the idle machine settles in about 120 s; a loaded one took past 200 s.
            "--timeout",
            "320",
            "--drain",
            "90",
            "--disk-workflows",
            "12",
            # The incident scenario, short: a 40 s outage, the rollout's "minute" 10 s at 3 decisions.
            "--outage-seconds",
            "40",
            "--rollout-window",
            "10",
            "--rollout-rate",
            "3",
            "--var-dir",
            str(tmp_path / "var"),
            "--json",
            str(figures_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1000,
    )
    output = result.stdout + result.stderr[-3000:]
    assert figures_path.exists(), output
    figures = json.loads(figures_path.read_text())
    context = f"seed {seed}:\n{output[-6000:]}"

    assert result.returncode == 0, context
    assert figures["settled"], context
    assert figures["workflows"] == WORKFLOWS, context
    assert all(figures["kills"][kind] >= 2 for kind in KILLED), context
    assert figures["redis_restarts"] >= 2 and figures["postgres_sessions_cut"] > 0, context
    assert figures["clock_skew_seconds"] == 300, context
    assert figures["reports_acknowledged"] > WORKFLOWS, context  # every workflow reported steps, each one kept
    assert figures["reports_acknowledged_not_stored"] == [], context
    assert figures["stamped_ahead_of_database_clock"] == {} and figures["leases_longer_than_configured"] == [], context
    assert figures["degraded"] > 0 and figures["resumed"] > 0, context  # the run did exercise recovery
    assert figures["reached_checkpoint"] == figures["degraded"], context
    assert figures["blank_states"] == [], context
    assert figures["resumed_clean"] == figures["resumed"], context
    assert figures["duplicate_keys"] == {} and figures["lost_effects"] == [], context
    assert figures["deliveries_acted_on_twice"] == {}, context  # the agents' dedupe held on every redelivery
    assert figures["same_owner"] == figures["resumed"], context
    assert figures["decisions_lost"] == 0, context
    # What a person reads: the printed report says the same.
    assert re.search(r"degraded that reached a checkpoint\s+100\.0 %", result.stdout), context
    assert re.search(r"resumed that completed, 0 duplicate, 0 lost\s+100\.0 %", result.stdout), context
    assert re.search(r"resumed returned to the same owner\s+100\.0 %", result.stdout), context
    assert re.search(r"decisions lost\s+0 ", result.stdout), context
    assert "all targets met" in result.stdout, context
    # The incident scenario: the outage's checkpoints grouped, recovered by the rollout alone, within its rate.
    incident = figures["incident"]
    assert incident["error"] == "" and incident["incident"] is not None, context
    assert incident["members"] >= incident["threshold"] >= 1, context
    assert incident["rollout"]["status"] == "completed" and incident["resolved"], context
    assert incident["rollout"]["four_eyes"] and incident["rollout"]["approved_by"] == "deputy", context
    assert incident["members_delivered_once"] == incident["members"], context
    assert incident["members_acted_on_twice"] == [] and incident["members_decided_by_others"] == [], context
    assert incident["window_seconds"] == 10 and incident["per_minute"] == 3, context
    assert 1 <= incident["most_in_window"] <= 3, context
    assert re.search(
        r"the rollout never exceeded its rate limit\s+at most [0-3] per 10 s \(limit 3\)", result.stdout
    ), context
    # The disk-pressure run: the broker's disk filled while workers ran, a refusal said on the queue page.
    disk = figures["disk_run"]
    assert disk["ok"] and disk["seed"] == seed + 1 and disk["workflows"] == 12, context
    assert disk["decisions_lost"] == 0 and disk["disk"]["fills"] >= 2, context
    assert disk["disk"]["refused"] >= 1 and disk["disk"]["said"] == disk["disk"]["refused"], context
    assert not disk["disk"]["failing_at_end"] and not disk["disk"]["banner_at_end"], context
    faults = re.findall(
        r"^  (Redis SIGKILLed, back empty|PostgreSQL gone|lossy network|worker clock ahead|"
        r"broker disk full)\b.* (yes|NO)$",
        result.stdout,
        re.MULTILINE,
    )
    assert [held for _fault, held in faults] == ["yes"] * 6, context  # the disk run's own table, and this one's
    # The chaos run's figures are the dashboard's: the headline CSV a TPM exports from the same database.
    start, end = figures["period"]
    exported = dashboard_headline(chaos_database, start, end, tmp_path)
    for slug, (part, whole) in figures["headline"].items():
        assert (int(exported[slug]["part"]), int(exported[slug]["whole"])) == (part, whole), (slug, context)


DASHBOARD_EXPORT = """
import csv, io, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from console.roles import set_role
tpm = get_user_model().objects.create_user("chaos-tpm")
set_role(tpm, "tpm")
client = Client()
client.force_login(tpm)
response = client.get("/resumes/export/headline.csv", {"start": sys.argv[1], "end": sys.argv[2]})
assert response.status_code == 200, response.status_code
sys.stdout.write(b"".join(response.streaming_content).decode())
"""


def dashboard_headline(database_url: str, start: str, end: str, tmp_path) -> dict[str, dict]:
    """The dashboard's headline CSV for the period, exported by a TPM from the chaos run's database."""
    import csv
    import io

    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "ALLOWED_HOSTS": "testserver",
        "VAR_DIR": str(tmp_path / "export"),
        "CELERY_BROKER_URL": "memory://",
    }
    out = subprocess.run(
        [sys.executable, "-c", DASHBOARD_EXPORT, start, end],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {row["figure"]: row for row in csv.DictReader(io.StringIO(out.stdout))}
