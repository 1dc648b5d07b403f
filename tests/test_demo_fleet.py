"""The demo fleet keeps the console busy through its real API, holds back when the queue is full,
waits politely for a console that is not up yet, and stops cleanly."""

import logging
from io import StringIO

import pytest
from django.core.management import call_command

from tests.demo_support import retry_locked, wait_for
from tests.stack import free_port
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


def test_every_agent_completes_workflows_through_the_api_and_the_fleet_stops_cleanly(live_server, seeded):
    fleet = fleet_for(live_server.url, seeded, fault_rate=0.0)
    fleet.start()
    try:
        wait_for(lambda: set(Workflow.objects.filter(status="completed").values_list("agent__name", flat=True))
                 == {"support-bot", "ticket-bot", "billing-bot"}, what="a completed workflow per agent")
    finally:
        fleet.shutdown(timeout=10)

    assert not any(t.is_alive() for t in fleet.threads)
    assert fleet.ledgers.duplicates() == {}
    completed = retry_locked(Workflow.objects.filter(status="completed", kind="refund").first)
    assert completed.owner.username == "operator"
    assert len(fleet.ledgers.executions_for(f"{completed.external_id}:refund")) == 1


def test_new_work_is_held_while_more_checkpoints_wait_than_max_open(live_server, seeded, caplog_demo):
    fleet = fleet_for(live_server.url, seeded, max_open=2)
    for n in range(3):  # three checkpoints already wait for a decision
        fleet.journal.save_run(f"X-{n}", agent="elsewhere", kind="refund", status="waiting")
    fleet.start()
    try:
        wait_for(lambda: sum("holding new work" in m for m in caplog_demo.messages) >= 3,
                 what="every agent to hold back")
    finally:
        fleet.shutdown(timeout=10)
    assert not retry_locked(Workflow.objects.exists)


def test_a_console_that_is_not_up_yet_is_retried_politely(seeded, caplog_demo):
    fleet = fleet_for(f"http://127.0.0.1:{free_port()}", seeded, retries=0)
    fleet.start()
    try:
        wait_for(lambda: any("console not reachable" in m for m in caplog_demo.messages),
                 what="the fleet to notice the console is down")
    finally:
        fleet.shutdown(timeout=10)
    assert not any(t.is_alive() for t in fleet.threads)
    assert not [r for r in caplog_demo.records if r.levelno >= logging.ERROR]
