import pytest

from tests.helpers import make_checkpoint, make_workflow
from workflows.models import Checkpoint, Event, IllegalTransition, Workflow


def test_an_allowed_transition_moves_and_records_an_event(db):
    workflow = make_workflow()
    assert workflow.move(Workflow.Status.PAUSED, verb="paused")
    assert workflow.status == "paused"
    assert Event.objects.filter(workflow=workflow, verb="paused").count() == 1


def test_a_refused_transition_raises_and_changes_nothing(db):
    workflow = make_workflow()
    with pytest.raises(IllegalTransition):
        workflow.move(Workflow.Status.RUNNING)
    assert not Event.objects.exists()


def test_the_second_claim_loses(alice, bob):
    checkpoint = make_checkpoint()
    assert checkpoint.claim(by=alice)
    assert not checkpoint.claim(by=bob)
    assert checkpoint.assignee == alice
    assert checkpoint.status == Checkpoint.Status.CLAIMED
