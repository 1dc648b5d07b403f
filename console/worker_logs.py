"""The worker's log says what happened, not that a timer ticked (issue 28 item 14).

Celery logs two INFO lines per task: "received" and "succeeded … : <result>". The beat's sweep runs every
5 seconds and almost always finds nothing to do, so under ``make run`` those lines were 836 of 2,971 and
pushed the demo's passwords off screen. A task line is dropped when it carries no news:

- a "succeeded" line whose result says nothing happened (``'skipped'``, ``0``, ``None``, or a dict/tuple
  of such: the sweep's counts all zero);
- a "received" line of a beat-scheduled task (its outcome line follows when it did something), and with
  ``QUIET_POLL_LOGS`` (``make run``) a "received" line of any task.

Warnings and errors (a retry, a failure, a traceback) are never dropped.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Collection

NOTHING = ("skipped", "lost", "polls", "")
TASK_LOGGERS = ("celery.app.trace", "celery.worker.strategy")


def did_nothing(value: object) -> bool:
    if isinstance(value, dict):
        return all(did_nothing(v) for v in value.values())
    if isinstance(value, list | tuple | set):
        return all(did_nothing(v) for v in value)
    return value is None or value is False or value == 0 or value in NOTHING


def _result(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a repr that is no literal: something, shown as it is


class IdleTaskLines(logging.Filter):
    def __init__(self, periodic: Collection[str], *, quiet: bool) -> None:
        super().__init__()
        self.periodic, self.quiet = set(periodic), quiet

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        if record.levelno > logging.INFO or not isinstance(data, dict):
            return True
        if "return_value" in data:  # the outcome line
            return not did_nothing(_result(str(data["return_value"])))
        if record.name == "celery.worker.strategy":  # the received line
            return not (self.quiet or data.get("name") in self.periodic)
        return True


def install(periodic: Collection[str], *, quiet: bool) -> IdleTaskLines:
    idle = IdleTaskLines(periodic, quiet=quiet)
    for name in TASK_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, IdleTaskLines)]:
            logger.removeFilter(old)
        logger.addFilter(idle)
    return idle
