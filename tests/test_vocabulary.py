"""The domain's words are named once, on the models, and every other place uses those names."""

import pytest
from django import forms

from console.event_text import _EVENT_TEXTS, event_text
from console.forms import DecisionForm
from tests.helpers import make_checkpoint, make_workflow
from workflows.api import CheckpointIn, DecisionOut, StepIn, WorkflowOut
from workflows.api.schemas import CheckpointSummaryOut, FinishIn
from workflows.models import (
    RESUMING_ACTIONS,
    Action,
    Checkpoint,
    Confirmation,
    Decider,
    Decision,
    Event,
    Workflow,
)


def literal(schema, field):
    return list(schema.model_fields[field].annotation.__args__)


def test_every_event_verb_has_its_sentence_in_the_event_log():
    assert set(_EVENT_TEXTS) == set(Event.Verb), "a verb without display text falls through to its raw name"


@pytest.mark.parametrize("verb", list(Event.Verb), ids=str)
def test_no_verb_is_shown_as_its_raw_name(verb):
    text = event_text(Event(verb=verb, data={"seq": 3, "name": "issue_refund", "to": "bob", "reason": "other"}))
    assert text and text != verb.replace("_", " ")


def test_a_verb_nobody_named_is_refused_when_recorded(db):
    with pytest.raises(ValueError):
        Event.record(make_workflow(), "moved")  # type: ignore[arg-type]  # a word outside the vocabulary, on purpose
    assert not Event.objects.exists()


def test_checkpoint_is_open_while_open_or_claimed_and_the_queue_uses_the_same_set(db):
    assert set(Checkpoint.OPEN_STATUSES) == {Checkpoint.Status.OPEN, Checkpoint.Status.CLAIMED}
    checkpoint = make_checkpoint()
    for status in Checkpoint.Status:
        Checkpoint.objects.filter(pk=checkpoint.pk).update(status=status)
        checkpoint.refresh_from_db()
        assert checkpoint.is_open == (status in Checkpoint.OPEN_STATUSES)
        assert Checkpoint.objects.open().filter(pk=checkpoint.pk).exists() == checkpoint.is_open


def test_resume_retry_step_and_failover_are_the_resuming_actions():
    # Issue 11: a failover is a resume on a standby agent.
    assert RESUMING_ACTIONS == {Action.RESUME, Action.RETRY_STEP, Action.FAILOVER}
    assert [a for a in Action if a.resumes] == [Action.RESUME, Action.RETRY_STEP, Action.FAILOVER]


def test_the_confirmation_choices_are_one_enum_for_the_model_and_the_form(db):
    form = DecisionForm(checkpoint=make_checkpoint(make_workflow()))
    assert Confirmation.values == ["happened", "did_not_happen"]
    assert Confirmation.unreferenced({"a": "happened", "b": "did_not_happen", "c": "happened"}, {"c": " R-1 "}) == ["a"]
    action = form.fields["action"]
    assert isinstance(action, forms.ChoiceField) and action.choices == Action.choices


def test_the_model_refuses_an_effect_confirmed_as_happened_without_its_reference(alice):
    from tests.helpers import make_worked_example

    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    with pytest.raises(ValueError, match="external reference"):
        Decider(checkpoint).decide(
            by=alice,
            action="resume",
            money_confirmed=True,
            confirmations={key: "happened"},
            confirmation_refs={key: "  "},
        )
    assert not checkpoint.decisions.exists()
    decision = Decider(checkpoint).decide(
        by=alice,
        action="resume",
        money_confirmed=True,
        confirmations={key: "happened"},
        confirmation_refs={key: "R-88"},
    )
    assert decision.confirmation_refs == {key: "R-88"}


def test_a_reference_for_an_effect_that_did_not_happen_is_not_kept(alice):
    from tests.helpers import make_worked_example

    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    decision = Decider(checkpoint).decide(
        by=alice,
        action="resume",
        money_confirmed=True,
        confirmations={key: "did_not_happen"},
        confirmation_refs={key: "R-88"},
    )
    assert decision.confirmations == {key: "did_not_happen"} and decision.confirmation_refs == {}


def test_the_new_owner_is_named_once_for_the_payload_the_api_and_the_handoff(alice, bob):
    by_person = Decider(make_checkpoint()).decide(by=alice, action="handoff", new_owner=bob)
    by_process = Decider(make_checkpoint()).decide(by=alice, action="handoff", handoff_to="Payments desk")
    assert by_person.new_owner_name == "bob" and by_process.new_owner_name == "Payments desk"
    assert by_person.payload()["new_owner"] == "bob" and by_process.handoff_packet()["to"] == "Payments desk"


def test_every_api_enum_is_generated_from_the_model_choices():
    from workflows.models import Reason, Step
    from workflows.models.runbooks import AGENT_REASONS

    assert literal(StepIn, "kind") == Step.Kind.values
    assert literal(StepIn, "status") == Step.Status.values
    # Every reason but the console's own ("held"): agents report the others.
    assert literal(CheckpointIn, "reason") == list(AGENT_REASONS) == [r for r in Reason.values if r != Reason.HELD]
    assert literal(FinishIn, "status") == list(Workflow.FINISHED_BY_AGENT)
    assert literal(CheckpointSummaryOut, "status") == Checkpoint.Status.values
    assert literal(WorkflowOut, "status") == Workflow.Status.values
    assert literal(DecisionOut, "action") == Action.values
    assert literal(DecisionOut, "state") == list(Decision.SHOWN_TO_AGENT)
