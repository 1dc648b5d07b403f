"""A fresh world: the run's database, broker, VAR_DIR and environment, migrated and seeded."""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import (
    DEFAULT_BROKER_URL,
    DEFAULT_DATABASE_URL,
    NETWORK,
    ROOT,
    database_name,
    flush_broker,
    free_port,
    next_database,
    observed,
    recreate_database,
)
from .disk import FullDisk
from .stores import PrivateRedis


@dataclass
class World:
    args: argparse.Namespace
    var_dir: Path
    web_port: int
    fleet_port: int
    env: dict[str, str]
    users: dict[str, str]  # operator username -> password
    redis: PrivateRedis | None = None  # --kill-redis: the broker and cache this script owns and kills
    disk: FullDisk | None = None  # --filesystem-broker: the broker folder's tmpfs, filled by --disk-pressure
    proxy: Any = None  # --lossy-network: the LossyProxy the deliveries cross
    incident_users: dict[str, str] = field(default_factory=dict)  # --incident: the commander and its deputy

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


def prepare(args: argparse.Namespace) -> World:
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    broker_url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER_URL
    database_name(database_url)  # checked before anything is flushed
    recreate_database(database_url)
    private_redis = disk = None
    args.given = {key: os.environ[key] for key in ("CELERY_BROKER_URL", "CACHE_URL") if key in os.environ}
    var_dir = Path(args.var_dir or tempfile.mkdtemp(prefix="rc-chaos-")).resolve()
    if var_dir.exists() and any(var_dir.iterdir()):  # an earlier run's journal would count as this run's launches
        raise SystemExit(f"--var-dir {var_dir} holds an earlier run's files: give a new or empty folder")
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "logs").mkdir(exist_ok=True)
    if args.filesystem_broker:  # the embedded default's broker, in a folder whose disk this run may fill
        disk = FullDisk(var_dir / "broker")
        disk.mount()
        # The web workers share a cache, Redis (CACHE_URL, or the database after CELERY_BROKER_URL's): no broker.
        cache_url = os.environ.get("CACHE_URL") or next_database(broker_url)
        broker_url = "filesystem://"
    else:
        if args.kill_redis:  # a Redis this run may kill: never the one CELERY_BROKER_URL names
            private_redis = PrivateRedis(random.Random(args.seed))
            private_redis.start()
            broker_url = private_redis.url
        flush_broker(broker_url)
        # Two gunicorn workers need a shared cache (the console refuses to start without one): the
        # broker's Redis, the next database number, unless CACHE_URL names one.
        cache_url = (
            next_database(broker_url) if private_redis else (os.environ.get("CACHE_URL") or next_database(broker_url))
        )
    web_port, fleet_port = free_port(), free_port()
    env = {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_QUEUE": "chaos",
        "VAR_DIR": str(var_dir),
        "CACHE_URL": cache_url,
        "GUNICORN_ACCESS_LOG": "",  # no access log, as before
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "false",
        "MANIFEST_STATIC": "false",
        "DEMO_APPS": "true",  # seed_demo and run_demo_fleet, with DEBUG off
        "SECURE_COOKIES": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
        "PYTHONPATH": str(ROOT),  # every process imports this tree, whatever else is on the path
        # Short clocks, so a killed agent's workflows reach the queue and stuck deliveries come back quickly.
        "AGENT_SILENCE_SECONDS": str(args.silence),
        "DELIVERY_LEASE_SECONDS": "10",
        "SWEEP_INTERVAL_SECONDS": "1",
        "DELIVERY_BACKOFF_SECONDS": "0.5",
        "DELIVERY_MAX_ATTEMPTS": str(args.delivery_attempts),
        "DELIVERY_TIMEOUT_SECONDS": "5",
        # A worker whose Celery consumer stalls after a Redis kill exits within this and is started again.
        "WORKER_WATCHDOG_SECONDS": "30",
        # The faults under test are the simulated systems' rate limits, not the console's own.
        "API_RATE_LIMIT_PER_MINUTE": "0",
        # The demo fleet listens on loopback over plain http: allow exactly that for deliveries.
        "DELIVERY_ALLOWED_NETWORKS": "127.0.0.1/32",
        "DELIVERY_REQUIRE_HTTPS": "false",
        # seed_demo connects the fleet's simulated Slack workspace: its notifications go there, as in `make run`
        # (left to the real Slack API, each would hold a worker process through its retries).
        "SLACK_API_URL": f"http://127.0.0.1:{fleet_port}/slack/api/",
        # The incident scenario's rollout: its "minute" shortened, so that its waves go out within the run under
        # the same rules (--rollout-window), and an unsettled wave looked at again soon.
        "ROLLOUT_RATE_WINDOW_SECONDS": f"{args.rollout_window:g}",
        "ROLLOUT_RECHECK_SECONDS": "2",
    }
    os.environ.update({**env, "DATABASE_URL": observed(database_url)})
    import django

    django.setup()
    from django.core.management import call_command

    world = World(
        args=args,
        var_dir=var_dir,
        web_port=web_port,
        fleet_port=fleet_port,
        env={**os.environ, **env},
        users={},
        redis=private_redis,
        disk=disk,
    )
    resume_port = world.fleet_port
    if args.lossy_network:  # the agents' resume endpoints, as the console knows them, are behind the proxy
        from demo.netfaults import LossyProxy

        world.proxy = LossyProxy(world.fleet_port, rng=random.Random(f"{args.seed}-network"), **NETWORK).start()
        resume_port = world.proxy.port
    call_command("migrate", verbosity=0)
    call_command(
        "seed_demo",
        port=world.web_port,
        fleet_port=resume_port,
        history_days=0,  # the live fleet only
        stdout=io.StringIO(),
    )
    world.users = configure(args, var_dir)
    if args.incident:
        from .incident import incident_users

        world.incident_users = incident_users()
    if disk is not None:
        disk.base_url, disk.login = world.console_url, ("operator", world.users["operator"])
    return world


def configure(args: argparse.Namespace, var_dir: Path) -> dict[str, str]:
    """What an admin would set for this run: the global silence limit, operators, four eyes on money."""
    from django.contrib.auth import get_user_model

    from console.roles import set_role
    from workflows.models import Agent, Runbook

    Agent.objects.update(silence_seconds=None)  # seed_demo's 300 s would outlast the run's clocks
    users = {"operator": json.loads((var_dir / "demo" / "users.json").read_text())["operator"]}
    for n in range(2, args.operators + 1):
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.create_user(f"operator{n}", password=password)
        set_role(user, "operator")
        users[user.username] = password
    if args.operators > 1:  # someone must be there to approve
        for runbook in Runbook.objects.filter(slug__in=["refund-unknown-refund", "billing-unknown-credit"]):
            runbook.requires_four_eyes = True
            runbook.save()  # a save, not an update(): the checkpoints follow the runbook's new version
    return users
