from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[3] / "examples"))  # the examples are exercised here too

from fakeconsole import TOKEN, FakeConsole, running
from recovery_client import RecoveryClient


@pytest.fixture
def console() -> Iterator[FakeConsole]:
    with running() as fake:
        yield fake


@pytest.fixture
def client(console: FakeConsole) -> RecoveryClient:
    return RecoveryClient(console.url, TOKEN, timeout=5, retries=3, backoff=0.001, max_wait=0.01)


def need(module: str) -> None:
    """Skip without the extra, unless RECOVERY_CLIENT_EXTRAS=required (CI) makes that a failure."""
    if os.environ.get("RECOVERY_CLIENT_EXTRAS") == "required":
        __import__(module)
    else:
        pytest.importorskip(module)
