"""A demo runtime that answers replays, and a recorded workflow it can replay (shared by the replay tests).

Registered for the whole suite through ``pytest_plugins`` in conftest.py: the ``runtime`` fixture (a
``ReplayRuntime`` on temp files, closed after the test) and ``olga``, the operator who asks for replays.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from recovery_client import RecoveryClient

from demo.agent import DemoAgent
from demo.journal import Journal
from demo.plans import FaultPlan, ProviderBehaviour
from demo.server import ResumeServer
from demo.systems import Ledgers
from tests.helpers import make_step, make_user, make_workflow
from workflows.models import Agent, Workflow

# The recorded trajectory: triage, then a refund (the model steps 2, 4 and 5; effects 6, 7, 8).
TRAJECTORY = (
    ("read_ticket", "tool"),
    ("classify_ticket", "model"),
    ("read_ticket", "tool"),
    ("classify_ticket", "model"),
    ("decide_refund", "model"),
    ("issue_refund", "effect"),
    ("write_ticket_note", "effect"),
    ("notify_customer", "effect"),
)


class ReplayRuntime:
    """The demo fleet's resume server with one demo agent registered in the console as able to replay."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        console_url: str = "http://127.0.0.1:9",
        name: str = "support-bot",
        capabilities: tuple[str, ...] = ("replay",),
    ) -> None:
        self.ledgers = Ledgers(tmp_path / "ledgers.sqlite3")
        self.journal = Journal(tmp_path / "runtime.sqlite3")
        self.provider = ProviderBehaviour()
        self.agents: dict[str, DemoAgent] = {}
        self.server = ResumeServer(
            self.agents, journal=self.journal, ledgers=self.ledgers, port=0, provider=self.provider
        )
        self.server.start()
        self.record, token = Agent.register(name, resume_url=self.server.url(f"/agents/{name}/resume"))
        self.record.replay_url = self.server.url(f"/agents/{name}/replay")
        self.record.capabilities = list(capabilities)
        self.record.save()
        self.agent = DemoAgent(
            name,
            client=RecoveryClient(console_url, token, retries=0),
            ledgers=self.ledgers,
            journal=self.journal,
            kind="refund",
            faults=FaultPlan(0.0),
            signing_secret=self.record.signing_secret,
            stop=threading.Event(),
            provider=self.provider,
        )
        self.agents[name] = self.agent

    def recorded_workflow(self, external_id: str = "T-4242", **fields: Any) -> Workflow:
        """Eight steps recorded as this runtime really answers them, effects with real-looking references."""
        workflow = make_workflow(
            self.record, external_id=external_id, title=f"Refund for ticket {external_id}", **fields
        )
        ticket = self.ledgers.tickets.read(external_id)
        refs = {"issue_refund": "R-1A2B3C4D", "write_ticket_note": "N-1A2B3C4D", "notify_customer": "M-1A2B3C4D"}
        for seq, (name, kind) in enumerate(TRAJECTORY, start=1):
            if kind == "tool":
                make_step(workflow, seq, name, kind, input={"ticket": external_id}, output=ticket, verified=True)
            elif kind == "model":
                make_step(
                    workflow,
                    seq,
                    name,
                    kind,
                    input={"model": "support-model-v3"},
                    output=self.agent.model_answer(name, ticket, external_id),
                )
            else:
                make_step(
                    workflow,
                    seq,
                    name,
                    kind,
                    input={"ticket": external_id},
                    output={"ref": refs[name]},
                    idempotency_key=f"{external_id}:{name}",
                    external_ref=refs[name],
                )
        return workflow

    def executions(self) -> int:
        return self.ledgers.totals()["executions"]

    def close(self) -> None:
        self.server.unhang.set()
        self.server.stop(wait=2)


@pytest.fixture
def runtime(db: None, tmp_path: Path) -> Iterator[ReplayRuntime]:
    runtime = ReplayRuntime(tmp_path)
    yield runtime
    runtime.close()


@pytest.fixture
def olga(db: None) -> Any:
    return make_user("olga")
