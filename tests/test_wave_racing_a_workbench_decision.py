"""A rollout's wave and a decision on one member's workbench, as two transactions open at once (PostgreSQL).

``tests/test_wave_decided_together.py`` decides a member on its workbench before the wave runs, one after the
other. Here they overlap, each on its own connection, and the test waits for the database to show the second
one blocked on the first (``pg_stat_activity``: a lock wait), never on a sleep:

- the workbench's decision is written first and still uncommitted when the wave's INSERT of its decisions
  reaches that member: the INSERT waits on the unique index (one active decision a checkpoint), fails when the
  workbench commits, and the wave goes one by one, passing that member over;
- the wave is written first and still uncommitted when an operator decides one of its members: the
  operator's decision waits, then is refused with a conflict (the API's 409), not a server error.

Either way the member ends with exactly one decision, the first one's, and every other member the wave's.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from tests.helpers import make_user, run_together
from tests.stack import wait_until
from tests.test_wave_decided_together import SIZE, incident_of, open_members
from workflows.models import Checkpoint, Decider, Decision, Rollout
from workflows.models.base import Conflict, moves_at_once
from workflows.models.rollouts import WaveContext
from workflows.models.wave_decisions import decide_members

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PATIENCE = 30.0  # seconds a thread may wait on the other on a busy machine: a bound, not an assertion


def another_session_waits_on_a_lock() -> bool:
    """Whether a session other than this one is waiting on a lock (read afresh: the view is kept per transaction
    otherwise)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def in_thread(call: Any, outcome: dict[str, Any]) -> Any:
    """``call`` for a thread of its own: what it returned or raised lands in ``outcome``; its connection closed."""

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # asserted on by the test: a thread must not fail silently
            outcome["error"] = exc
        finally:
            connection.close()

    return run


@pytest.fixture
def started(alice):
    """An abort rollout over SIZE members (alice holds one and started it; bob holds one, so it waits): its
    members as a wave reads them, and the member the race is about (unclaimed)."""
    rollout = Rollout.start(incident_of(resume_url="", alice=alice, bob=make_user("bob")), action="abort", by=alice)
    context = WaveContext()
    members = context.read(open_members(rollout.incident))
    return rollout, context, members, members[-1]


def test_a_workbench_decision_uncommitted_when_the_wave_inserts_wins_and_the_wave_passes_its_member_over(started):
    rollout, context, members, raced = started
    carol = make_user("carol")
    decided_on_workbench = threading.Event()
    workbench: dict[str, Any] = {}

    def decide_on_the_workbench_and_commit_once_the_wave_waits() -> Decision:
        with transaction.atomic():
            decision = Decider(Checkpoint.objects.get(pk=raced.pk)).decide(
                by=carol, action="abort", instructions="Mine."
            )
            decided_on_workbench.set()
            wait_until(another_session_waits_on_a_lock, timeout=PATIENCE, what="the wave to wait on this decision")
        return decision

    def wave() -> list[int]:
        assert decided_on_workbench.wait(PATIENCE), "the workbench never decided"
        with moves_at_once():
            return decide_members(rollout, members, context, SIZE)

    waved: dict[str, Any] = {}
    threads = run_together(
        [in_thread(decide_on_the_workbench_and_commit_once_the_wave_waits, workbench), in_thread(wave, waved)],
        timeout=PATIENCE * 3,
    )
    assert not any(t.is_alive() for t in threads), "a side hung"
    assert "error" not in workbench and "error" not in waved, (workbench, waved)

    ids = waved["result"]
    # Bob holds one; an abort does not wait for the unknown effect: the four others, one by one once refused.
    assert raced.pk not in ids and len(ids) == 4
    [only] = Decision.objects.filter(checkpoint=raced)
    assert only.pk == workbench["result"].pk and only.decided_by == carol and only.instructions == "Mine."
    assert Decision.objects.filter(checkpoint_id__in=ids, decided_by=rollout.started_by).count() == 4
    assert Decision.objects.count() == 5
    raced.refresh_from_db()
    assert raced.status == Checkpoint.Status.DECIDED


def test_a_wave_uncommitted_when_an_operator_decides_its_member_wins_and_the_operator_gets_a_conflict(started):
    rollout, context, members, raced = started
    carol = make_user("carol")
    read_by_the_workbench = Checkpoint.objects.get(pk=raced.pk)  # the page carol decides from, read before
    wave_written = threading.Event()
    waved: dict[str, Any] = {}

    def wave_committed_once_the_operator_waits() -> list[int]:
        with transaction.atomic(), moves_at_once():
            ids = decide_members(rollout, members, context, SIZE)
            wave_written.set()
            wait_until(another_session_waits_on_a_lock, timeout=PATIENCE, what="the operator to wait on the wave")
        return ids

    def decide_on_the_workbench() -> Decision:
        assert wave_written.wait(PATIENCE), "the wave was never written"
        return Decider(read_by_the_workbench).decide(by=carol, action="abort", instructions="Mine.")

    workbench: dict[str, Any] = {}
    threads = run_together(
        [in_thread(wave_committed_once_the_operator_waits, waved), in_thread(decide_on_the_workbench, workbench)],
        timeout=PATIENCE * 3,
    )
    assert not any(t.is_alive() for t in threads), "a side hung"
    assert "error" not in waved, waved
    assert isinstance(workbench.get("error"), Conflict), workbench

    ids = waved["result"]
    assert raced.pk in ids and len(ids) == 5  # every member but bob's
    [only] = Decision.objects.filter(checkpoint=raced)
    assert only.decided_by == rollout.started_by
    assert not Decision.objects.filter(decided_by=carol).exists()
    assert Decision.objects.count() == 5
