"""One way to lose a race: every transition is a compare-and-set on the status and the fields it read,
and answers False when the row changed; IllegalTransition is only for a move that can never happen."""

import pytest

from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from workflows.models import Checkpoint, Conflict, Decider, Decision, Event, IllegalTransition


def stale(checkpoint):
    return Checkpoint.objects.get(pk=checkpoint.pk)


def test_a_release_loses_when_the_checkpoint_was_reassigned_since_it_was_read(alice, bob, adam):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    alices_view = stale(checkpoint)
    assert checkpoint.assign(to=bob, by=adam)

    assert alices_view.release(by=alice) is False
    assert stale(checkpoint).assignee == bob and stale(checkpoint).status == Checkpoint.Status.CLAIMED
    assert not Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.RELEASED).exists()


def test_an_assignment_loses_when_the_checkpoint_changed_hands_since_it_was_read(alice, bob, adam):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    adams_view = stale(checkpoint)
    assert checkpoint.assign(to=bob, by=alice)

    assert adams_view.assign(to=adam, by=adam) is False
    assert stale(checkpoint).assignee == bob


def test_a_decision_loses_when_someone_claimed_the_checkpoint_since_it_was_read(alice, bob):
    checkpoint = make_checkpoint()
    alices_view = stale(checkpoint)
    assert checkpoint.claim(by=bob)

    with pytest.raises(Conflict, match="bob has claimed this checkpoint"):
        Decider(alices_view).decide(by=alice, action="abort", instructions="duplicate")
    assert not Decision.objects.exists()
    assert stale(checkpoint).status == Checkpoint.Status.CLAIMED and stale(checkpoint).assignee == bob


@pytest.mark.parametrize("action", ["claim", "release", "assign"])
def test_acting_on_a_decided_checkpoint_answers_false_not_an_exception(alice, bob, action):
    checkpoint = make_checkpoint()
    Decider(checkpoint).decide(by=alice, action="abort", instructions="duplicate")
    kwargs = {"to": bob} if action == "assign" else {}

    assert getattr(checkpoint, action)(by=alice, **kwargs) is False
    assert stale(checkpoint).status == Checkpoint.Status.DECIDED


def test_approving_an_answered_proposal_or_ones_own_answers_false_and_says_why(alice, bob, adam):
    make_runbook(is_default=True, requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    proposal = Decider(checkpoint).decide(
        by=alice, action="resume", money_confirmed=True, confirmations={key: "did_not_happen"}
    )
    adams_view = Decision.objects.get(pk=proposal.pk)

    assert proposal.approve(by=alice) is False
    assert proposal.refusal(by=alice) == "The second approval must come from another operator."
    assert proposal.approve(by=bob)
    assert adams_view.approve(by=adam) is False and adams_view.reject(by=adam) is False
    assert adams_view.refusal(by=adam) == "The decision is queued; it no longer waits for approval."
    assert Decision.objects.get(pk=proposal.pk).approved_by == bob


def test_move_compares_the_expected_fields_and_writes_nothing_when_they_changed(alice, bob):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    before = Event.objects.count()

    assert not checkpoint.move(
        Checkpoint.Status.OPEN, verb=Event.Verb.RELEASED, expect={"assignee_id": bob.pk}, assignee=None
    )
    assert stale(checkpoint).assignee == alice and Event.objects.count() == before
    assert checkpoint.move(
        Checkpoint.Status.OPEN, verb=Event.Verb.RELEASED, expect={"assignee_id": alice.pk}, assignee=None
    )
    assert stale(checkpoint).assignee is None


def test_an_impossible_move_raises_whatever_the_row_holds(db):
    checkpoint = make_checkpoint()
    with pytest.raises(IllegalTransition):
        checkpoint.move(Checkpoint.Status.RESOLVED, from_=[Checkpoint.Status.OPEN], verb=Event.Verb.RESOLVED)
    assert stale(checkpoint).status == Checkpoint.Status.OPEN
