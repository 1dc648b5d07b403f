"""Run the demo agent fleet against a console over its HTTP API (see demo/fleet.py)."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from demo import slack_workspace
from demo.fleet import Fleet, agents_file, load_agents
from demo.signin import sign_in_lines
from workflows.models import SlackWorkspace


class Command(BaseCommand):
    help = "Start the demo agents and their resume server; they report to the console through its API."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--console", default="http://127.0.0.1:8000", help="Base URL of the console.")
        parser.add_argument("--port", type=int, default=8765, help="Port of the fleet's resume server.")
        parser.add_argument(
            "--agents", type=int, default=None, help="How many of the seeded demo agents to run (default: all of them)."
        )
        parser.add_argument(
            "--interval", type=float, default=4.0, help="Seconds between two workflows of one agent (jittered)."
        )
        parser.add_argument(
            "--max-open",
            type=int,
            default=12,
            help="Hold new work while more checkpoints than this wait for a decision.",
        )
        parser.add_argument("--seed", type=int, default=None, help="Seed the fault injection.")
        parser.add_argument(
            "--fault-rate", type=float, default=0.35, help="Probability that a workflow hits a fault (0..1)."
        )
        parser.add_argument(
            "--step-delay",
            type=float,
            default=0.6,
            help="Average seconds an agent spends on a step (so the console shows progress).",
        )
        parser.add_argument(
            "--total",
            type=int,
            default=None,
            help="Stop launching after this many workflows in all, counted in the journal "
            "(so a restarted fleet goes on where it stopped); keep carrying out decisions.",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=2.0,
            help="Seconds between two looks of a polling agent at its checkpoint.",
        )
        parser.add_argument(
            "--provider-changed",
            action="store_true",
            help="Start with the model provider's changed behaviour on (amounts in cents); the "
            "ledgers page switches it.",
        )
        parser.add_argument(
            "--reconcile-interval",
            type=float,
            default=30.0,
            help="Seconds between two looks for paused and orphaned runs to pick up again.",
        )

    def sign_in_again(self, console: str) -> None:
        """Everything is up: say again where to sign in, below the processes' start-up logs."""
        self.stdout.write("")
        self.stdout.write("The demo fleet is up: sign in and watch it.")
        for line in sign_in_lines(console.rstrip("/") + reverse("login")):
            self.stdout.write(line)
        self.stdout.write("")
        self.stdout.flush()

    def handle(
        self,
        *args: Any,
        console: str,
        port: int,
        agents: int | None,
        interval: float,
        max_open: int,
        seed: int | None,
        fault_rate: float,
        step_delay: float,
        total: int | None,
        poll_interval: float,
        reconcile_interval: float,
        provider_changed: bool = False,
        **options: Any,
    ) -> None:
        if not 0 <= fault_rate <= 1:
            raise CommandError("--fault-rate must be between 0 and 1.")
        if total is not None and total < 0:
            raise CommandError("--total must be 0 or more.")
        path = agents_file()
        if not path.exists():
            raise CommandError(f"{path} is missing: run `python manage.py seed_demo` first.")
        configs = load_agents(path)
        agents = len(configs) if agents is None else agents
        if agents > len(configs):
            self.stderr.write(f"only {len(configs)} demo agents are seeded; running all of them")
        configs = configs[: max(agents, 0)]
        for config in configs:
            if config.resume_url and f":{port}/" not in config.resume_url:
                self.stderr.write(
                    f"warning: {config.name}'s resume URL {config.resume_url} is not on port {port}; "
                    f"run `manage.py seed_demo --fleet-port {port}`"
                )
        try:
            fleet = Fleet(
                console,
                configs,
                port=port,
                interval=interval,
                max_open=max_open,
                seed=seed,
                fault_rate=fault_rate,
                step_delay=step_delay,
                total=total,
                poll_interval=poll_interval,
                reconcile_interval=reconcile_interval,
                provider_changed=provider_changed,
            )
        except OSError as exc:
            raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc}") from exc

        def stop(signum: int, frame: FrameType | None) -> None:
            fleet.stop()

        workspace = SlackWorkspace.objects.filter(team_id=slack_workspace.TEAM, is_active=True).first()
        if workspace is not None:  # seed_demo connected the simulated workspace: serve it at /slack
            fleet.server.slack = slack_workspace.SimulatedSlack(
                console_url=console, signing_secret=workspace.signing_secret
            )
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        fleet.start()
        self.sign_in_again(console)
        fleet.wait()
        fleet.shutdown()
