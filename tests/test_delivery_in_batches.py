"""Decisions committed together (a rollout's wave) go to the workers in batches, one broker message for
``relay.BATCH`` decisions (``tasks.deliver_decisions``); each is still delivered with its own lease, POST and
record, so a copy of the batch, a decision delivered meanwhile or one that fails leaves every other as it would
be alone. The 500-member rollout of tests/test_guarantee_incident_rollout.py runs it with a real worker, and
``make chaos`` kills workers under it."""

from __future__ import annotations

import pytest

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows import tasks
from workflows.models import Decider, Decision, relay

pytestmark = pytest.mark.django_db


def decided(n: int, *, resume_url: str) -> list[Decision]:
    alice = make_user("alice")
    agent, _ = make_agent("support-bot", resume_url=resume_url)
    decisions = []
    for _ in range(n):
        checkpoint = make_checkpoint(make_worked_example(agent=agent))
        decisions.append(Decider(checkpoint).decide(by=alice, action="abort", instructions="Close it."))
    return decisions


def test_a_batch_delivers_each_once_and_its_copy_delivers_nothing_again(receiver):
    first, *rest = decided(4, resume_url=receiver.url)
    assert tasks.deliver_decision(first.pk) == "delivered"  # delivered alone before its batch came

    assert tasks.deliver_decisions([d.pk for d in (first, *rest)]) == {"skipped": 1, "delivered": 3}
    assert tasks.deliver_decisions([d.pk for d in (first, *rest)]) == {"skipped": 4}, "a copy after a crash"

    assert sorted(r["delivery"] for r in receiver.deliveries) == sorted(str(d.delivery_id) for d in (first, *rest))
    assert set(Decision.objects.values_list("status", "attempts")) == {(Decision.Status.SUCCEEDED, 1)}


def test_a_decision_that_fails_in_a_batch_leaves_the_others_delivered_and_itself_due(receiver, monkeypatch):
    decisions = decided(3, resume_url=receiver.url)
    broken = decisions[1]
    real = tasks.deliver_decision

    def deliver(decision_id: int) -> str:
        if decision_id == broken.pk:
            raise RuntimeError("the database went away under this one")
        return real(decision_id)

    monkeypatch.setattr(tasks, "deliver_decision", deliver)
    assert tasks.deliver_decisions([d.pk for d in decisions]) == {"delivered": 2, "error": 1}

    broken.refresh_from_db()
    assert broken.status == Decision.Status.QUEUED and Decision.objects.dispatchable().filter(pk=broken.pk).exists()
    assert len(receiver.deliveries) == 2


def test_a_wave_is_handed_over_in_batches_of_a_message_each(receiver, monkeypatch):
    sent: list[list[int]] = []
    monkeypatch.setattr(relay, "BATCH", 2)
    monkeypatch.setattr(tasks.deliver_decisions, "apply_async", lambda args, **kwargs: sent.append(args[0]))
    relay.hand_many_to_broker([11, 12, 13, 14, 15])
    assert sent == [[11, 12], [13, 14], [15]]
