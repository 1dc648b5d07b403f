"""The demo fleet for tests that drive real demo agents over HTTP against ``live_server``.

Registered for the whole suite through ``pytest_plugins`` in conftest.py: the ``fleet`` fixture, and
``olivia`` (the workflows' owner) and ``operator`` (who decides), the people of those tests.
"""

import threading
from typing import Any

import pytest
from django.db import connection
from recovery_client import RecoveryClient

from demo.agent import DemoAgent
from demo.journal import Journal
from demo.plans import FaultPlan
from demo.server import ResumeServer
from demo.systems import Ledgers
from tests.helpers import make_user
from workflows.models import Agent


class HoldingServer(ResumeServer):
    """On SQLite the live server shares the test thread's database connection, so the agent's work
    starts only once the delivery task has returned; on PostgreSQL it starts at once, racing it."""

    def __init__(self, *args, hold, **kwargs):
        super().__init__(*args, **kwargs)
        self.hold, self.held = hold, []

    def dispatch(self, *args):
        if self.hold:
            self.held.append(args)
        else:
            super().dispatch(*args)

    def release(self):
        held, self.held = self.held, []
        for args in held:
            super().dispatch(*args)


class Fleet:
    """A resume server and demo agents, as run_demo_fleet runs them, on temp files and a free port."""

    def __init__(self, console_url, tmp_path):
        self.console_url = console_url
        self.ledgers = Ledgers(tmp_path / "ledgers.sqlite3")
        self.journal = Journal(tmp_path / "runtime.sqlite3")
        self.agents: dict[str, Any] = {}
        self.stop = threading.Event()
        self.server = HoldingServer(
            self.agents, journal=self.journal, ledgers=self.ledgers, port=0, hold=connection.vendor == "sqlite"
        )
        self.server.start()

    def agent(self, name="support-bot", kind="refund", *, owner, polls=False, forced=None):
        resume_url = "" if polls else self.server.url(f"/agents/{name}/resume")
        record, token = Agent.register(name, resume_url=resume_url, owner=owner)
        agent = DemoAgent(
            name,
            client=RecoveryClient(self.console_url, token, retries=2, backoff=0.05),
            ledgers=self.ledgers,
            journal=self.journal,
            kind=kind,
            faults=FaultPlan(0.0, forced=forced),
            signing_secret=record.signing_secret,
            polls=polls,
            poll_interval=0.05,
            settle_timeout=15.0,
            stop=self.stop,
            provider=self.server.provider,
        )
        if not polls:
            self.agents[name] = agent
        return agent

    def executed(self, external_id):
        """How often each effect of the ticket really ran in the simulated systems."""
        return {
            suffix: len(self.ledgers.executions_for(f"{external_id}:{suffix}"))
            for suffix in ("refund", "note", "message")
        }

    def close(self):
        self.stop.set()
        self.server.stop()


@pytest.fixture
def fleet(live_server, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    settings.DELIVERY_TIMEOUT_SECONDS = 5.0
    fleet = Fleet(live_server.url, tmp_path)
    yield fleet
    fleet.close()


@pytest.fixture
def olivia(transactional_db):
    return make_user("olivia")


@pytest.fixture
def operator(transactional_db):
    return make_user("alice")
