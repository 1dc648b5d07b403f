"""Every status change goes through one place: allowed ones move and record an Event, the rest are refused."""

import itertools

import pytest

from tests.helpers import make_checkpoint, make_step, make_user, make_workflow
from workflows.models import Checkpoint, Decision, Event, IllegalTransition, Step, Workflow
from workflows.models.base import Stateful

# The mechanism is under test here, not the vocabulary: any named verb will do.
ANY_VERB = Event.Verb.RESOLVED


def pairs(model):
    statuses = list(model.Status.values)
    return [(a, b, b in model.TRANSITIONS.get(a, set())) for a, b in itertools.product(statuses, statuses)]


def subject(model, status):
    obj: Stateful
    if model is Workflow:
        obj = make_workflow()
    elif model is Checkpoint:
        obj = make_checkpoint()
    elif model is Step:
        obj = make_step(make_workflow(), 1, "issue_refund", "effect", status="pending")
    else:
        operator = make_user("olga")
        obj = make_checkpoint().decisions.create(action="abort", decided_by=operator)
    model.objects.filter(pk=obj.pk).update(status=status)
    obj.refresh_from_db()
    return obj


@pytest.mark.parametrize(
    ("model", "current", "to", "allowed"),
    [
        pytest.param(model, current, to, allowed, id=f"{model.__name__}-{current}-{to}")
        for model in (Workflow, Checkpoint, Decision, Step)
        for current, to, allowed in pairs(model)
    ],
)
def test_every_transition_is_either_allowed_or_refused(db, model, current, to, allowed):
    obj = subject(model, current)
    before = Event.objects.count()
    if allowed:
        assert obj.move(to, verb=ANY_VERB), f"{current} -> {to}"
        assert obj.status == to
        event = Event.objects.latest("pk")
        assert event.data == {"from": current, "to": to}
        assert Event.objects.count() == before + 1
    else:
        with pytest.raises(IllegalTransition):
            obj.move(to, verb=ANY_VERB)
        obj.refresh_from_db()
        assert obj.status == current, f"{current} -> {to} changed the row"
        assert Event.objects.count() == before


def test_the_transition_tables_cover_the_lifecycles_of_design_md():
    assert Workflow.TRANSITIONS[Workflow.Status.RUNNING] >= {"paused", "completed", "failed"}
    assert Workflow.TRANSITIONS[Workflow.Status.PAUSED] >= {"resuming", "handed_off", "aborted"}
    assert Workflow.TRANSITIONS[Workflow.Status.RESUMING] >= {"running"}
    assert not any(Workflow.TRANSITIONS.get(s) for s in ("completed", "failed", "aborted"))
    # Issue 11: a failed effect may be retried under its key (failed -> pending); committed stays final.
    assert Step.TRANSITIONS == {"pending": {"committed", "failed"}, "failed": {"pending"}}
    assert Checkpoint.TRANSITIONS[Checkpoint.Status.OPEN] >= {"claimed", "decided"}
    assert not Checkpoint.TRANSITIONS.get(Checkpoint.Status.RESOLVED)
    assert not any(Decision.TRANSITIONS.get(s) for s in ("succeeded", "failed", "rejected"))


def test_a_move_from_a_stale_status_loses_instead_of_overwriting(db):
    workflow = make_workflow()
    stale = Workflow.objects.get(pk=workflow.pk)
    assert workflow.move(Workflow.Status.COMPLETED, verb=Event.Verb.FINISHED_COMPLETED)
    assert not stale.move(
        Workflow.Status.PAUSED, verb=Event.Verb.PAUSED
    )  # running -> paused is allowed, but the row moved on
    assert Workflow.objects.get(pk=workflow.pk).status == "completed"


def test_the_second_claim_loses(alice, bob):
    checkpoint = make_checkpoint()
    assert checkpoint.claim(by=alice)
    assert not checkpoint.claim(by=bob)
    assert checkpoint.assignee == alice
    assert checkpoint.status == Checkpoint.Status.CLAIMED


def test_events_are_append_only(db):
    workflow = make_workflow()
    workflow.move(Workflow.Status.PAUSED, verb=Event.Verb.PAUSED)
    event = Event.objects.get()
    event.verb = "rewritten"
    with pytest.raises(IllegalTransition):
        event.save()
