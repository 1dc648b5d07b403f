"""What a demo agent runtime is, apart from what it does: its name and token, the simulated systems it acts
on, its journal and fault plan, and the bookkeeping its threads share. ``DemoAgent`` (agent.py) builds on it
through ``StepKinds`` (steps.py, how each kind of step is carried out and reported) and ``Decisions``
(decisions.py, how an operator's decision is carried out).
"""

from __future__ import annotations

import logging
import re
import threading

from recovery_client import RecoveryClient
from recovery_client.drills import DrillFault

from .journal import Journal
from .plans import PLANS, FaultPlan, ProviderBehaviour
from .systems import Ledgers

log = logging.getLogger("workflows.demo")

REFERENCE = re.compile(r"[RNM]-[0-9A-F]{8}")
STOOD_DOWN = "stood_down"  # the journal status, and the API's error code for a workflow failed over elsewhere
RUNTIME_VERSION = "demo-agent/1.1"
# Drill faults this agent carries out (docs/API.md "Recovery drills"): both stop the run after step k as a killed
# process does; the console's silence watchdog opens the checkpoint. For "failover" the operator then fails the
# run over to the standby (support-bot-standby), which resumes it from the console's resume state.
DRILL_CRASHES = frozenset({"crash_after_step", "failover"})
# ...and one the run meets and reports itself, so it reaches the queue within seconds, as any throttled run does:
# a rate-limit storm from step k on (the provider answers 429), once; the resumed run goes on.
DRILL_REPORTED = {"rate_limit_storm": "rate_limit"}


class AgentBase:
    """One simulated agent runtime: one kind of workflow, its token, its fault plan."""

    def __init__(
        self,
        name: str,
        *,
        client: RecoveryClient,
        ledgers: Ledgers,
        journal: Journal,
        kind: str,
        faults: FaultPlan | None = None,
        signing_secret: str = "",
        polls: bool = False,
        poll_interval: float = 2.0,
        settle_timeout: float = 60.0,
        step_delay: float = 0.0,
        resume_fault_factor: float = 0.5,
        stop: threading.Event | None = None,
        provider: ProviderBehaviour | None = None,
    ) -> None:
        if kind not in PLANS:
            raise ValueError(f"Unknown workflow kind {kind!r}; known: {', '.join(PLANS)}")
        self.name, self.client, self.ledgers, self.journal, self.kind = name, client, ledgers, journal, kind
        self.faults = faults or FaultPlan()
        self.signing_secret = signing_secret
        self.polls = polls
        self.poll_interval = poll_interval
        self.settle_timeout = settle_timeout
        self.step_delay = step_delay
        self.resume_fault_factor = resume_fault_factor
        self.stop = stop or threading.Event()
        self.provider = provider or ProviderBehaviour()
        self.replay_misbehaviour = ""  # tests: "fabricate_effect", "extra_effect" (the console must catch both)
        self.plan = {spec.name: spec for spec in PLANS[kind]}
        self.active: set[str] = set()  # external ids of the runs this process is driving
        # A create whose answer never came (the console unreachable): the next launch asks again under the
        # same ticket number, since the console may have created it, instead of leaving it to the stale scan.
        self.unanswered_create = ""
        self.turns: dict[str, threading.Lock] = {}  # one thread drives a run at a time
        self.drills: dict[str, DrillFault] = {}  # workflow id -> the drill fault the console asked for
        # (workflow id, drill id) carried out: the console says the fault until the checkpoint opens, so the
        # answer to the failing step's own report says it once more; a resumed run must not meet it again.
        self.drills_done: set[tuple[str, str]] = set()
        self.promised: dict[str, list[str]] = {}  # workflow id -> promises reported (a drill's journal)
        self.lock = threading.Lock()
