"""Issue 28 item 14: the worker logs a sweep only when it did something, so `make run`'s sign-in block is
not pushed off screen by a line pair every 5 seconds; and the fleet prints the sign-in block again once up."""

from __future__ import annotations

import json
import logging

import pytest
from celery.app import trace
from celery.utils.saferepr import saferepr

from console import worker_logs
from workflows import tasks

SWEEP = "workflows.tasks.sweep"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def worker_log():
    """The two loggers Celery writes a task's lines to, with the filter the worker installs at start."""
    worker_logs.install({SWEEP, "workflows.tasks.roll_figures"}, quiet=False)
    lines = Lines()
    loggers = [logging.getLogger(name) for name in worker_logs.TASK_LOGGERS]
    for logger in loggers:
        logger.addHandler(lines)
        logger.setLevel(logging.INFO)
    yield lines, loggers
    for logger in loggers:
        logger.removeHandler(lines)
        for f in list(logger.filters):
            logger.removeFilter(f)


def _run(loggers, name: str, result) -> None:
    """What Celery logs around one task: its receipt (celery.worker.strategy), then its outcome (app.trace)."""
    received = {"id": "1", "name": name, "args": "()", "kwargs": "{}", "eta": None}
    loggers[1].info(trace.LOG_RECEIVED, received, extra={"data": received})
    done = {"id": "1", "name": name, "return_value": saferepr(result), "runtime": 0.01}
    loggers[0].info(trace.LOG_SUCCESS, done, extra={"data": done})


@pytest.mark.django_db
def test_an_idle_sweep_leaves_no_line_and_a_busy_one_says_what_it_did(worker_log):
    lines, loggers = worker_log
    idle = tasks.sweep()  # the real sweep over an empty console: nothing to do
    for _ in range(12):  # a minute of ticks
        _run(loggers, SWEEP, idle)
    assert lines.lines == []

    busy = {**idle, "sla": {**idle["sla"], "breaches": 1}}
    _run(loggers, SWEEP, busy)
    assert len(lines.lines) == 1 and "'breaches': 1" in lines.lines[0]


def test_other_tasks_keep_their_news_and_every_failure(worker_log):
    lines, loggers = worker_log
    _run(loggers, "workflows.tasks.deliver_decision", "delivered")
    _run(loggers, "workflows.tasks.deliver_decision", "skipped")
    failure = {"id": "2", "name": SWEEP, "description": "raised unexpected", "exc": "OperationalError()"}
    loggers[0].error(trace.LOG_FAILURE, failure, extra={"data": failure})
    assert [line.split("]")[1].strip() for line in lines.lines] == [
        "received",
        "succeeded in 0.01s: 'delivered'",
        "received",
        "raised unexpected: OperationalError()",
    ]


def test_make_run_quiets_every_received_line(worker_log):
    lines, loggers = worker_log
    worker_logs.install({SWEEP}, quiet=True)
    _run(loggers, "workflows.tasks.deliver_decision", "delivered")
    assert len(lines.lines) == 1 and "succeeded" in lines.lines[0]


def test_the_worker_installs_the_filter_before_its_pool_forks(settings):
    from console.celery import quiet_idle_task_lines

    settings.QUIET_POLL_LOGS = True
    quiet_idle_task_lines()
    idle = [f for f in logging.getLogger("celery.app.trace").filters if isinstance(f, worker_logs.IdleTaskLines)]
    assert len(idle) == 1 and idle[0].quiet and SWEEP in idle[0].periodic
    logging.getLogger("celery.app.trace").removeFilter(idle[0])
    logging.getLogger("celery.worker.strategy").removeFilter(idle[0])


@pytest.mark.django_db
def test_the_fleet_says_where_to_sign_in_again_once_it_is_up(settings, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    from demo.management.commands.run_demo_fleet import Command

    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--port", "8200", "--history-days", "0", stdout=StringIO())
    passwords = json.loads((tmp_path / "demo" / "users.json").read_text())
    out = StringIO()

    Command(stdout=out).sign_in_again("http://127.0.0.1:8200")

    text = out.getvalue()
    assert "http://127.0.0.1:8200/login/" in text
    for username, password in passwords.items():
        assert f"{username:<10}{username:<10}{password}" in text
