"""The demo fleet keeps the console busy through its real API, holds back when the queue is full,
waits politely for a console that is not up yet, and stops cleanly."""

import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tests.stack import free_port, wait_until
from workflows.demo.fleet import Fleet, load_agents
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seeded(settings, tmp_path, transactional_db):
    settings.VAR_DIR = tmp_path  # the fleet's ledgers, journal and agents.json go here
    port = free_port()
    call_command("seed_demo", "--fleet-port", str(port), stdout=StringIO())
    return port, load_agents()


@pytest.fixture
def caplog_demo(caplog):
    caplog.set_level(logging.INFO, logger="workflows.demo")
    return caplog


def fleet_for(console_url, seeded, **kwargs):
    port, configs = seeded
    kwargs = {"interval": 0.2, "step_delay": 0, "poll_interval": 0.05, "seed": 7, **kwargs}
    return Fleet(console_url, configs, port=port, **kwargs)


def test_the_fleet_completes_workflows_through_the_api_and_stops_cleanly(live_server, seeded):
    port, configs = seeded
    if connection.vendor == "sqlite":
        # The live server shares the test's one SQLite connection: keep to one agent, one run at a time.
        seeded, interval = (port, configs[:1]), 2.0
    else:
        interval = 0.2
    fleet = fleet_for(live_server.url, seeded, fault_rate=0.0, interval=interval)
    fleet.start()
    try:
        # The agents' own journal, not the console's database: the test thread keeps off the connection.
        wait_until(lambda: {r["agent"] for r in fleet.journal.runs(status="completed")} == set(fleet.agents),
                   timeout=30, interval=0.05, what="a completed workflow per agent")
    finally:
        fleet.shutdown(timeout=10)

    assert not any(t.is_alive() for t in fleet.threads)
    assert fleet.ledgers.duplicates() == {}
    for run in fleet.journal.runs(status="completed"):
        workflow = Workflow.objects.get(external_id=run["external_id"], agent__name=run["agent"])
        assert workflow.status == Workflow.Status.COMPLETED and workflow.owner.username == "operator"
        assert all(step.status == "committed" for step in workflow.steps.all())
    refund = fleet.journal.runs(status="completed", agent="support-bot")[0]["external_id"]
    assert len(fleet.ledgers.executions_for(f"{refund}:refund")) == 1


def test_new_work_is_held_while_more_checkpoints_wait_than_max_open(live_server, seeded, caplog_demo):
    fleet = fleet_for(live_server.url, seeded, max_open=2)
    for n in range(3):  # three checkpoints already wait for a decision
        fleet.journal.save_run(f"X-{n}", agent="elsewhere", kind="refund", status="waiting")
    fleet.start()
    try:
        wait_until(lambda: sum("holding new work" in m for m in caplog_demo.messages) >= 3,
                   timeout=30, interval=0.05, what="every agent to hold back")
    finally:
        fleet.shutdown(timeout=10)
    assert not Workflow.objects.exists()


def test_a_console_that_is_not_up_yet_is_retried_politely(seeded, caplog_demo):
    fleet = fleet_for(f"http://127.0.0.1:{free_port()}", seeded, retries=0)
    fleet.start()
    try:
        wait_until(lambda: any("console not reachable" in m for m in caplog_demo.messages),
                   timeout=30, interval=0.05, what="the fleet to notice the console is down")
    finally:
        fleet.shutdown(timeout=10)
    assert not any(t.is_alive() for t in fleet.threads)
    assert not [r for r in caplog_demo.records if r.levelno >= logging.ERROR]
