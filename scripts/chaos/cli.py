"""The command line: every option, the hard profile's defaults, and what the killer may take down."""

from __future__ import annotations

import argparse
import random

import scripts.chaos

from .common import HARD_CLOCK_SKEW, HARD_TARGETS, KILL_TARGETS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.chaos",
        description=scripts.chaos.__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workflows", type=int, default=1000, help="Workflows the fleet launches in all.")
    parser.add_argument("--seed", type=int, default=None, help="Seed faults, kills and operator choices.")
    parser.add_argument(
        "--kill-interval", type=float, default=6.0, help="Mean seconds between two kills (0: no kills)."
    )
    parser.add_argument(
        "--kill-rounds",
        type=int,
        default=0,
        help="Keep killing until this many rounds (each kind once, shuffled) are done, even when "
        "every workflow is launched: a short run still kills each kind that often.",
    )
    parser.add_argument(
        "--timeout", type=float, default=1200.0, help="Deadline of the whole run in seconds, drain included."
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=0.0,
        help="The drain gets at least this many seconds after the last launch, even past "
        "--timeout: on a slow machine the launches take longer, not the settling.",
    )
    parser.add_argument("--operators", type=int, default=2, help="Scripted operators working the queue.")
    parser.add_argument("--fault-rate", type=float, default=0.7, help="Probability that a workflow hits a fault.")
    parser.add_argument(
        "--interval", type=float, default=0.9, help="Mean seconds between two launches of one agent (three agents)."
    )
    parser.add_argument("--step-delay", type=float, default=0.1, help="Mean seconds an agent spends on a step.")
    parser.add_argument(
        "--silence",
        type=int,
        default=15,
        help="AGENT_SILENCE_SECONDS: a killed agent's workflows are paused after this.",
    )
    parser.add_argument(
        "--think", type=float, default=0.6, help="Mean seconds an operator reads a checkpoint before deciding."
    )
    parser.add_argument(
        "--delivery-attempts",
        type=int,
        default=4,
        help="DELIVERY_MAX_ATTEMPTS: few enough that a delivery to a killed fleet sometimes fails "
        "and its checkpoint goes back to the queue.",
    )
    incident = parser.add_argument_group(
        "incident scenario",
        "A provider outage hits every workflow of one agent; a scripted incident commander recovers the "
        "incident it forms with a rollout (scripts/chaos/incident.py).",
    )
    incident.add_argument(
        "--incident",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Run the incident scenario (on unless --no-incident).",
    )
    incident.add_argument(
        "--outage-agent", default="billing-bot", help="The agent whose model calls fail during the outage."
    )
    incident.add_argument(
        "--outage-seconds",
        type=float,
        default=180.0,
        help="How long the provider is out; the commander holds the agent halfway through.",
    )
    incident.add_argument(
        "--rollout-rate", type=int, default=10, help="The rollout's rate limit: decisions per rate window."
    )
    incident.add_argument(
        "--rollout-window",
        type=float,
        default=20.0,
        help='ROLLOUT_RATE_WINDOW_SECONDS: the rollout\'s "minute", shortened so that it ends within the run.',
    )
    hard = parser.add_argument_group(
        "hard faults",
        "The stores and the network under the stack fail too. --hard turns every one on; "
        "each flag also works alone, and --no-<flag> leaves one out of --hard.",
    )
    hard.add_argument("--hard", action="store_true", help="The hard profile: every fault below.")
    hard.add_argument(
        "--kill-redis",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Run a private Redis (broker and cache) and SIGKILL it in the kill rounds; it comes "
        "back EMPTY: queued Celery messages are gone and the outbox must send them again.",
    )
    hard.add_argument(
        "--kill-postgres",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="In the kill rounds, PostgreSQL goes away for the run's database: new connections "
        "refused (ALLOW_CONNECTIONS false) and every session cut (pg_terminate_backend) for "
        "the outage, as in a restart; never the shared cluster itself.",
    )
    hard.add_argument(
        "--lossy-network",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Deliveries cross a slow, lossy proxy to the agents: latency, connections dropped "
        "mid-response and black holes, after the agent acted.",
    )
    hard.add_argument(
        "--clock-skew",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"One Celery worker's clock runs this far ahead (--hard: {HARD_CLOCK_SKEW:g}).",
    )
    hard.add_argument(
        "--disk-pressure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="After the run, a shorter one on the embedded default's broker (the filesystem "
        "transport) in a small tmpfs folder (needs root to mount it) that the kill rounds fill "
        "to the last byte and free again: the console must say so and lose nothing.",
    )
    hard.add_argument(
        "--disk-workflows",
        type=int,
        default=None,
        help="Workflows of the disk-pressure run (default: a tenth of --workflows, 20 to 300).",
    )
    hard.add_argument(
        "--filesystem-broker",
        action="store_true",
        help="Run on the filesystem broker in a tmpfs folder, no Redis (the disk-pressure run is one; "
        "with --disk-pressure, this run's own kill rounds fill its disk).",
    )
    parser.add_argument(
        "--rss-interval",
        type=float,
        default=30.0,
        help="Seconds between two samples of each process's resident memory (the soak's figure: "
        "every process that lived 10 minutes must stay within 10 %% of its RSS after 2).",
    )
    parser.add_argument("--var-dir", default=None, help="VAR_DIR for this run (default: a fresh temp dir).")
    parser.add_argument("--json", dest="json_path", default=None, help="Also write the figures to this file.")
    args = parser.parse_args(argv)
    if args.workflows < 1 or args.operators < 1:
        parser.error("--workflows and --operators must be at least 1")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    for flag in ("kill_redis", "kill_postgres", "lossy_network", "disk_pressure"):
        if getattr(args, flag) is None:
            setattr(args, flag, args.hard)
    if args.filesystem_broker and args.kill_redis:
        parser.error("--filesystem-broker runs without Redis: add --no-kill-redis")
    if args.disk_workflows is None:
        args.disk_workflows = min(300, max(20, args.workflows // 10))
    if args.clock_skew is None:
        args.clock_skew = HARD_CLOCK_SKEW if args.hard else 0.0
    return args


def kill_targets(args: argparse.Namespace) -> tuple[str, ...]:
    disk = ("disk",) if args.filesystem_broker and args.disk_pressure else ()
    return KILL_TARGETS + tuple(t for t in HARD_TARGETS if getattr(args, f"kill_{t}")) + disk
