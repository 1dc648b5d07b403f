"""Shared by the demo fleet tests: waiting on the console's database while agents write to it.

On SQLite the tests run on a shared-cache in-memory database; its table locks do
not wait for a busy timeout, so a read from the test thread can meet "database
table is locked" while the live server handles an agent's report. The agents
retry (the API answers 503); the test thread does the same here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

from tests.stack import wait_until

T = TypeVar("T")


def retry_locked(fn: Callable[[], T], *, timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def wait_for(predicate: Callable[[], object], *, timeout: float = 20.0, what: str = "condition") -> object:
    return wait_until(lambda: retry_locked(predicate), timeout=timeout, interval=0.02, what=what)
