"""The demo fleet keeps the console busy through its real API, holds back when the queue is full,
waits politely for a console that is not up yet, and stops cleanly."""

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from demo.fleet import Fleet, load_agents
from tests.stack import free_port, wait_until
from workflows.models import Decider, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seeded(settings, tmp_path, transactional_db):
    settings.VAR_DIR = tmp_path  # the fleet's ledgers, journal and agents.json go here
    port = free_port()
    call_command(
        "seed_demo", "--fleet-port", str(port), "--history-days", "0", stdout=StringIO()
    )  # the live fleet only
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
        wait_until(
            lambda: {r["agent"] for r in fleet.journal.runs(status="completed")} == set(fleet.agents),
            timeout=30,
            interval=0.05,
            what="a completed workflow per agent",
        )
    finally:
        fleet.shutdown(timeout=30)

    # Nothing of the fleet outlives the test: a report still in flight would reach the next test's database.
    assert fleet.busy() == []
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
        wait_until(
            lambda: sum("holding new work" in m for m in caplog_demo.messages) >= 3,
            timeout=30,
            interval=0.05,
            what="every agent to hold back",
        )
    finally:
        fleet.shutdown(timeout=30)
    assert fleet.busy() == []
    assert not Workflow.objects.exists()


def test_a_console_that_is_not_up_yet_is_retried_politely(seeded, caplog_demo):
    fleet = fleet_for(f"http://127.0.0.1:{free_port()}", seeded, retries=0)
    fleet.start()
    try:
        wait_until(
            lambda: any("console not reachable" in m for m in caplog_demo.messages),
            timeout=30,
            interval=0.05,
            what="the fleet to notice the console is down",
        )
    finally:
        fleet.shutdown(timeout=30)
    assert fleet.busy() == []
    assert not [r for r in caplog_demo.records if r.levelno >= logging.ERROR]


def test_the_fleet_stops_at_its_total_and_a_restarted_fleet_does_not_start_over(live_server, seeded):
    port, configs = seeded
    if connection.vendor == "sqlite":
        seeded, interval = (port, configs[:1]), 1.0  # one agent, one run at a time (see above)
    else:
        interval = 0.1
    fleet = fleet_for(live_server.url, seeded, fault_rate=0.0, interval=interval, total=4)
    fleet.start()
    try:
        wait_until(
            lambda: len(fleet.journal.runs(status="completed")) == 4,
            timeout=60,
            interval=0.05,
            what="four completed runs",
        )
        wait_until(
            lambda: not any(t.is_alive() for t in fleet.threads if t.name.startswith("launch-")),
            timeout=30,
            interval=0.05,
            what="the launch loops to stop at the total",
        )
    finally:
        fleet.shutdown(timeout=30)
    assert fleet.busy() == []

    restarted = fleet_for(live_server.url, seeded, fault_rate=0.0, interval=interval, total=4)
    restarted.start()  # the journal counts what the killed process launched
    try:
        wait_until(
            lambda: not any(t.is_alive() for t in restarted.threads if t.name.startswith("launch-")),
            timeout=30,
            interval=0.05,
            what="the restarted launch loops to see the total reached",
        )
    finally:
        restarted.shutdown(timeout=30)
    assert restarted.busy() == []
    assert restarted.journal.launched() == 4
    assert Workflow.objects.count() == 4


def test_a_restarted_fleet_picks_up_the_runs_its_killed_process_left_mid_run(live_server, seeded):
    """What a SIGKILL leaves: journal rows of runs nobody drives any more, running in the console.
    The webhook agent's run is left to the console's silence sweep; the polling agent, to which
    nothing is ever delivered, reports the run it lost track of and polls that checkpoint."""
    from django.utils import timezone

    from tests.helpers import make_user
    from workflows import tasks
    from workflows.models import Checkpoint

    killed = fleet_for(live_server.url, seeded, fault_rate=0.0)
    runs = {name: killed.agents[name].create_run() for name in ("support-bot", "ticket-bot")}
    killed.server.httpd.server_close()  # killed: its port is free again, its runs are left behind
    alice = make_user("alice")

    restarted = fleet_for(live_server.url, seeded, fault_rate=0.0, total=0, reconcile_interval=0.1)
    restarted.start()
    try:
        polled = Workflow.objects.get(external_id=runs["ticket-bot"].external_id, agent__name="ticket-bot")
        wait_until(
            lambda: polled.checkpoints.exists(),
            timeout=30,
            interval=0.05,
            what="the polling agent to report the run it lost track of",
        )
        wait_until(
            lambda: restarted.journal.run(runs["support-bot"].external_id)["status"] == "orphaned",
            timeout=30,
            interval=0.05,
            what="the webhook agent's run to be left to the console",
        )
        Decider(polled.checkpoints.get()).decide(by=alice, action="resume")
        wait_until(
            lambda: Workflow.objects.get(pk=polled.pk).status == "completed",
            timeout=30,
            interval=0.05,
            what="the polling agent to find the decision and finish the run",
        )

        hooked = Workflow.objects.get(external_id=runs["support-bot"].external_id, agent__name="support-bot")
        assert hooked.status == "running" and not hooked.checkpoints.exists()
        assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1)) == 1
        checkpoint = Checkpoint.objects.get(workflow=hooked)
        assert checkpoint.opened_by_console
        decision = Decider(checkpoint).decide(by=alice, action="resume", money_confirmed=True)
        assert tasks.deliver_decision(decision.pk) == "delivered"
        wait_until(
            lambda: Workflow.objects.get(pk=hooked.pk).status == "completed",
            timeout=30,
            interval=0.05,
            what="the webhook agent to carry the delivered decision out",
        )
    finally:
        restarted.shutdown(timeout=30)
    assert restarted.busy() == []
    assert restarted.ledgers.duplicates() == {}
    assert len(restarted.ledgers.executions_for(f"{runs['support-bot'].external_id}:refund")) == 1
    assert len(restarted.ledgers.executions_for(f"{runs['ticket-bot'].external_id}:message")) == 1


def test_a_polling_agent_killed_after_fetching_its_decision_finds_the_checkpoint_that_overtook_it(live_server, seeded):
    """Found by make chaos (1,000 workflows, seed 2026): the ticket-bot fetched its decision (for a polling
    agent that is the delivery: the workflow ran again) and was killed before it acted on it; the console's
    silence sweep paused the run at a new checkpoint and an operator decided that one. The restarted fleet's
    journal still waited on the first checkpoint: every poll found its overtaken decision, nobody ever
    fetched the new one, and 13 decisions stayed queued until the run's deadline."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.helpers import make_user
    from workflows import tasks
    from workflows.models import Checkpoint

    killed = fleet_for(live_server.url, seeded, fault_rate=0.0)
    agent = killed.agents["ticket-bot"]
    agent.faults.forced["classify_ticket"] = "model_timeout"
    run = agent.create_run()
    assert agent.proceed(run) == "paused"
    alice = make_user("alice")
    Decider(Checkpoint.objects.get(pk=run.checkpoint_id)).decide(by=alice, action="resume")
    assert agent.client.wait_for_decision(run.checkpoint_id, timeout=0)["action"] == "resume"  # fetched...
    killed.server.httpd.server_close()  # ...and killed before acting on it
    workflow = Workflow.objects.get(external_id=run.external_id, agent__name="ticket-bot")
    assert workflow.status == "running"
    assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1)) == 1
    later = workflow.checkpoints.get(status="open")
    decision = Decider(later).decide(by=alice, action="resume")

    assert_a_restarted_fleet_carries_the_decision_out_once(
        live_server,
        seeded,
        workflow,
        decision,
        what="the polling agent to fetch the decision on the checkpoint that overtook its own",
    )


def test_a_workflow_paused_by_the_console_before_its_create_was_answered_is_picked_up(live_server, seeded, monkeypatch):
    """Found by make chaos (1,000 workflows, seed 2026): the ticket-bot's create committed, the web server was
    killed before answering, and the console's silence sweep paused the new workflow before the retry was
    answered. The agent took the paused workflow for a number used before and skipped it; its checkpoint was
    decided and the decision waited for a fetch that never came."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.helpers import make_user
    from workflows import tasks

    killed = fleet_for(live_server.url, seeded, fault_rate=0.0)
    agent = killed.agents["ticket-bot"]
    register = agent.register
    first: list[str] = []

    def answer_lost_then_retried(external_id):
        if first:
            return register(external_id)
        first.append(external_id)
        register(external_id)  # committed; the answer is lost
        assert tasks.pause_silent_workflows(now=timezone.now() + timedelta(hours=1)) == 1
        return register(external_id)  # the retry answers the workflow, paused meanwhile

    monkeypatch.setattr(agent, "register", answer_lost_then_retried)
    run = agent.create_run()
    assert run is not None and run.external_id != first[0]  # the launch goes on with a new number
    killed.server.httpd.server_close()
    workflow = Workflow.objects.get(external_id=first[0], agent__name="ticket-bot")
    decision = Decider(workflow.checkpoints.get(status="open")).decide(by=make_user("alice"), action="resume")

    assert_a_restarted_fleet_carries_the_decision_out_once(
        live_server,
        seeded,
        workflow,
        decision,
        what="the polling agent to fetch the decision on the workflow it once skipped",
    )


def assert_a_restarted_fleet_carries_the_decision_out_once(live_server, seeded, workflow, decision, *, what):
    """A fresh fleet process finds ``decision`` and completes ``workflow``: the decision succeeds, nothing of the
    fleet outlives it, and the customer is messaged exactly once, with no effect run twice."""
    restarted = fleet_for(live_server.url, seeded, fault_rate=0.0, total=0, reconcile_interval=0.1)
    restarted.start()
    try:
        wait_until(
            lambda: Workflow.objects.get(pk=workflow.pk).status == "completed", timeout=30, interval=0.05, what=what
        )
    finally:
        restarted.shutdown(timeout=30)
    decision.refresh_from_db()
    assert decision.status == "succeeded"
    assert restarted.busy() == []
    assert restarted.ledgers.duplicates() == {}
    assert len(restarted.ledgers.executions_for(f"{workflow.external_id}:message")) == 1


@pytest.mark.parametrize("committed", [True, False], ids=["create-committed", "create-never-arrived"])
def test_a_create_whose_answer_was_lost_is_asked_again_under_the_same_ticket_at_the_next_launch(
    live_server, seeded, committed
):
    """Found by the suite's chaos run (seed 372100): the web server was killed while a create was in flight,
    the next launch took a new ticket number, and the unanswered one waited a minute for the stale scan,
    so its workflow appeared after the run's deadline. The idempotent create is asked again at once."""
    from recovery_client import Unavailable

    fleet = fleet_for(live_server.url, seeded, fault_rate=0.0)
    agent = fleet.agents["ticket-bot"]
    register = agent.register
    asked: list[str] = []

    def killed_mid_request(external_id):
        asked.append(external_id)
        if len(asked) == 1:
            if committed:
                register(external_id)
            raise Unavailable("connection reset by peer")
        return register(external_id)

    agent.register = killed_mid_request
    try:
        with pytest.raises(Unavailable):
            agent.create_run()
        run = agent.create_run()
    finally:
        fleet.server.httpd.server_close()
    assert run is not None
    assert asked == [asked[0], asked[0]]  # the same ticket, asked twice
    assert run.external_id == asked[0]
    workflow = Workflow.objects.get(external_id=asked[0], agent__name="ticket-bot")
    assert str(workflow.pk) == run.workflow_id and workflow.status == "running"
    assert Workflow.objects.filter(agent__name="ticket-bot").count() == 1
    assert fleet.journal.run(asked[0])["status"] == "running"
