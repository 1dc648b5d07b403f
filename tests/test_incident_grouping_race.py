"""Grouping under concurrency on PostgreSQL: checkpoints of one signature opening at the same moment make
exactly one incident, and every one of them ends up in it (the advisory lock makes the count exact; the
partial unique constraint is the backstop)."""

import functools
import threading

import pytest
from django.db import IntegrityError, connection

from tests.helpers import make_agent, make_checkpoint, make_worked_example, run_together
from workflows.models import Incident, checkpoints

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 10


def _open_together(workflows):
    barrier = threading.Barrier(len(workflows))
    errors = []

    def run(workflow):
        try:
            barrier.wait(timeout=30)
            make_checkpoint(workflow, reason="tool_error", detail=f"provider answered 502 for {workflow.external_id}")
        except BaseException as exc:  # surfaced below: a thread must not fail silently
            errors.append(exc)
        finally:
            connection.close()

    threads = run_together([functools.partial(run, w) for w in workflows], timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not errors, errors


def test_checkpoints_opening_at_once_form_one_incident_holding_all_of_them():
    agent, _ = make_agent()
    workflows = [make_worked_example(agent=agent) for _ in range(WRITERS)]
    _open_together(workflows)
    incident = Incident.objects.get()
    assert incident.members.count() == WRITERS


def test_checkpoints_opening_at_once_join_the_open_incident():
    agent, _ = make_agent()
    for _ in range(5):
        make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail="provider answered 502 for T-1")
    _open_together([make_worked_example(agent=agent) for _ in range(WRITERS)])
    assert Incident.objects.get().members.count() == 5 + WRITERS


def test_two_checkpoints_that_both_counted_before_either_committed_still_form_the_incident(monkeypatch):
    """The worst interleaving, forced: both rows are inserted and uncommitted when either counts its peers.
    Counting without the per-signature lock, each sees only itself and no incident ever forms."""
    agent, _ = make_agent()
    agent.incident_threshold = 2
    agent.save()
    both_inserted = threading.Barrier(2, timeout=30)
    original = checkpoints.signature_of  # type: ignore[attr-defined]  # patched where checkpoints.py looks it up

    def signature_then_wait(checkpoint):
        signature = original(checkpoint)
        both_inserted.wait()
        return signature

    monkeypatch.setattr(checkpoints, "signature_of", signature_then_wait)
    _open_together([make_worked_example(agent=agent) for _ in range(2)])
    assert Incident.objects.get().members.count() == 2


def test_the_database_refuses_a_second_unresolved_incident_of_one_signature():
    agent, _ = make_agent()
    Incident.objects.create(title="one", signature="s" * 32, agent=agent)
    with pytest.raises(IntegrityError):
        Incident.objects.create(title="two", signature="s" * 32, agent=agent)
