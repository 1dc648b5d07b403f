"""What the sections share: the run's options, database, processes, seeded randomness and web server."""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import time

from .environment import BIN, Procs, answers, free_port
from .output import SEED
from .rows import step_report


class Bench:
    """One run of the suite: the sections read its options and helpers and leave their figures on it."""

    def __init__(self, args: argparse.Namespace, db_url: str, env: dict[str, str]) -> None:
        self.args, self.db_url, self.env = args, db_url, env
        self.rng = random.Random(SEED)
        self.procs = Procs(env)
        self.web_port = 0
        self.web: subprocess.Popen | None = None  # start_web: gunicorn, whose CPU the ingest figures read
        self.before_port = 0  # start_web with --before: the console from another checkout
        self.bare_port = 0  # start_web: the bare Django view (bare.py) under the same gunicorn settings
        self.single: dict[int, float] = {}  # ingest: steps/s per client count, LangGraph's baseline
        self.curve: list[dict] = []  # tiers: one point per volume, for the pages figures and the chart

    def agent(self, name: str, **kwargs):
        from workflows.models import Agent

        return Agent.register(f"{name}-{self.rng.getrandbits(32):08x}", **kwargs)

    def workflow(self, agent, label: str):
        from workflows.models import Workflow

        return Workflow.objects.create(
            agent=agent, external_id=f"{label}-{self.rng.getrandbits(48):012x}", kind="refund", title=f"bench {label}"
        )

    def reports(self, wf: int, n: int, first: int = 1) -> list[dict]:
        return [step_report(self.rng, wf, seq) for seq in range(first, first + n)]

    def start_web(self) -> None:
        from django.db import connection

        connection.close()
        self.web_port = free_port()
        env = {**self.env, "GUNICORN_BIND": f"127.0.0.1:{self.web_port}", "GUNICORN_ACCESS_LOG": ""}
        self.procs.env = env
        self.web = self.procs.start(
            [str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "console.wsgi"], answers(self.web_port), "gunicorn"
        )
        self.bare_port = free_port()
        self.procs.env = {**env, "GUNICORN_BIND": f"127.0.0.1:{self.bare_port}"}
        self.procs.start(
            [str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "scripts.bench.bare:application"],
            answers(self.bare_port),
            "gunicorn (bare Django view)",
        )
        if self.args.before:  # the same server from another checkout (say main's), for before/after in one run
            self.before_port = free_port()
            self.procs.env = {**env, "GUNICORN_BIND": f"127.0.0.1:{self.before_port}"}
            self.procs.start(
                [str(BIN / "gunicorn"), "-c", "python:console.gunicorn", "console.wsgi"],
                answers(self.before_port),
                f"gunicorn ({self.args.before})",
                cwd=self.args.before,
            )
        self.procs.env = self.env

    def operator_client(self):
        from django.contrib.auth import get_user_model
        from django.test import Client

        from console.roles import OPERATOR, set_role

        user, _ = get_user_model().objects.get_or_create(username="bench-reader")
        set_role(user, OPERATOR)
        client = Client()
        client.force_login(user)
        return client

    def page_ms(self, client, url: str, rounds: int | None = None) -> float:
        times = []
        for _ in range(rounds or self.args.rounds):
            t = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")
        return statistics.median(times)
