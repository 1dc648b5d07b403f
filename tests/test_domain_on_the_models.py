"""What the API and the console do is a model method that any other caller can use the same way."""

import pytest

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example, make_workflow
from workflows.models import Checkpoint, Conflict, Decider, Decision, Event, Invalid, Step, Workflow


def report(seq, name="read_ticket", kind="tool", status="committed", **fields):
    return {
        "seq": seq,
        "name": name,
        "kind": kind,
        "status": status,
        "input": None,
        "output": None,
        "verified": False,
        "promise": None,
        "idempotency_key": None,
        "external_ref": None,
        **fields,
    }


def test_starting_a_workflow_twice_answers_the_first_one(db):
    agent, _ = make_agent()
    first, created = Workflow.objects.start(agent, external_id="T-1", kind="refund", title="Refund")
    again, created_again = Workflow.objects.start(agent, external_id="T-1", kind="other", title="Other")
    assert created and not created_again and again == first and again.kind == "refund"
    assert Event.objects.filter(workflow=first, verb=Event.Verb.CREATED).count() == 1


def test_a_started_workflow_belongs_to_the_named_user_or_the_agents_owner(db):
    olga, paul = make_user("olga"), make_user("paul")
    agent, _ = make_agent(owner=olga)
    assert Workflow.objects.start(agent, external_id="T-1", kind="k", title="t")[0].owner == olga
    assert Workflow.objects.start(agent, external_id="T-2", kind="k", title="t", owner_name="paul")[0].owner == paul
    with pytest.raises(Invalid) as refused:
        Workflow.objects.start(agent, external_id="T-3", kind="k", title="t", owner_name="nobody")
    assert (refused.value.code, refused.value.field) == ("unknown_owner", "owner")
    assert not agent.workflows.filter(external_id="T-3").exists()


def test_recording_a_step_then_its_resend_then_its_commit(db):
    workflow = make_workflow()
    agent = workflow.agent
    step, created = workflow.record_step(
        report(1, "issue_refund", "effect", "pending", idempotency_key="k"), actor=agent
    )
    assert created and step.status == Step.Status.PENDING
    assert workflow.record_step(report(1, "issue_refund", "effect", "pending", idempotency_key="k"), actor=agent) == (
        step,
        False,
    )
    step, created = workflow.record_step(
        report(1, "issue_refund", "effect", "committed", external_ref="R-1"), actor=agent
    )
    assert not created and step.status == Step.Status.COMMITTED and step.idempotency_key == "k"
    assert list(Event.objects.filter(workflow=workflow).values_list("verb", flat=True)) == [
        Event.Verb.STEP_PENDING,
        Event.Verb.STEP_COMMITTED,
    ]


@pytest.mark.parametrize(
    ("second", "code", "field"),
    [
        (
            report(2, "refund_again", "effect", "pending", idempotency_key="k"),
            "idempotency_key_taken",
            "idempotency_key",
        ),
        (report(1, "another_name", "effect", "pending", idempotency_key="k"), "step_conflict", "name"),
        (
            report(1, "issue_refund", "effect", "pending", idempotency_key="k", input={"amount": 1}),
            "step_conflict",
            "input",
        ),
    ],
    ids=["key_of_another_step", "new_name", "new_input"],
)
def test_a_report_that_would_change_a_recorded_step_is_a_conflict_naming_the_field(db, second, code, field):
    workflow = make_workflow()
    workflow.record_step(report(1, "issue_refund", "effect", "pending", idempotency_key="k"), actor=workflow.agent)
    with pytest.raises(Conflict) as refused:
        workflow.record_step(second, actor=workflow.agent)
    assert (refused.value.code, refused.value.field) == (code, field)
    assert workflow.steps.count() == 1


def test_a_finished_workflow_takes_no_more_steps(db):
    workflow = make_workflow()
    workflow.finish(Workflow.Status.COMPLETED, "done", actor=workflow.agent)
    with pytest.raises(Conflict) as refused:
        workflow.record_step(report(1), actor=workflow.agent)
    assert refused.value.code == "workflow_finished" and not workflow.steps.exists()


def test_a_polled_decision_is_marked_fetched_explicitly_and_once(alice):
    checkpoint = make_checkpoint()  # the agent has no resume_url: it polls
    decision = Decider(checkpoint).decide(by=alice, action="resume")
    assert checkpoint.decision_for_agent() == decision and decision.awaits_fetch
    assert decision.status == Decision.Status.QUEUED  # reading it changed nothing
    assert decision.mark_fetched()
    assert not decision.mark_fetched()
    checkpoint.refresh_from_db()
    assert decision.status == Decision.Status.SUCCEEDED and checkpoint.status == Checkpoint.Status.RESOLVED
    assert Event.objects.filter(decision=decision, verb=Event.Verb.FETCHED_BY_AGENT).count() == 1


def test_a_decision_with_a_resume_endpoint_is_never_marked_fetched(alice):
    agent, _ = make_agent(resume_url="https://agent.example/resume")
    decision = Decider(make_checkpoint(make_worked_example(agent=agent))).decide(by=alice, action="resume")
    assert not decision.awaits_fetch and not decision.mark_fetched()
    assert decision.status == Decision.Status.QUEUED


def test_who_may_decide_is_the_models_predicate(alice, bob):
    checkpoint = make_checkpoint()
    assert checkpoint.may_be_decided_by(alice) and checkpoint.may_be_decided_by(bob)
    checkpoint.claim(by=alice)
    assert checkpoint.may_be_decided_by(alice) and not checkpoint.may_be_decided_by(bob)
    with pytest.raises(Conflict, match="alice has claimed"):
        Decider(checkpoint).decide(by=bob, action="abort", instructions="no")
    Decider(checkpoint).decide(by=alice, action="abort", instructions="no")
    assert not checkpoint.may_be_decided_by(alice)


def test_who_may_approve_is_the_models_predicate(alice, bob):
    from tests.helpers import make_runbook

    make_runbook(is_default=True, requires_four_eyes=True)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    key = checkpoint.unknown_effects[0]["idempotency_key"]
    proposal = Decider(checkpoint).decide(
        by=alice, action="resume", money_confirmed=True, confirmations={key: "did_not_happen"}
    )
    assert proposal.status == Decision.Status.PROPOSED
    assert not proposal.may_be_approved_by(alice) and proposal.may_be_approved_by(bob)
    assert proposal.approve(by=bob)
    assert not proposal.may_be_approved_by(bob)


def test_a_drafted_decision_is_validated_but_not_recorded(alice):
    checkpoint = make_checkpoint()
    draft = Decider(checkpoint).draft(action="handoff", handoff_to="  Payments desk ")
    assert draft.pk is None and draft.handoff_to == "Payments desk" and not checkpoint.decisions.exists()
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN
    with pytest.raises(ValueError, match="handoff needs a new owner"):
        Decider(checkpoint).draft(action="handoff")
    recorded = Decider(checkpoint).record(draft, by=alice)
    assert recorded.pk and recorded.decided_by == alice and checkpoint.status == Checkpoint.Status.DECIDED
