"""Replaying a step range: drift found at the right step, effects never executed, never a stuck replay.

The demo runtime answers over real HTTP (its resume server); the ``run_replay`` task is called directly.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import make_checkpoint
from workflows import tasks
from workflows.models import Conflict, DriftIgnoreRule, Event, ReplayRun


def replay(runtime, workflow, by, from_seq=3, to_seq=7, **kwargs):
    run = ReplayRun.request(workflow, from_seq=from_seq, to_seq=to_seq, by=by, **kwargs)
    tasks.run_replay(run.pk)
    run.refresh_from_db()
    return run


def test_a_clean_range_reports_no_drift_and_moves_no_ledger(runtime, olga):
    workflow = runtime.recorded_workflow()
    before = runtime.executions()

    run = replay(runtime, workflow, olga)

    assert run.status == "succeeded", run.reason
    assert run.first_divergent_seq is None and run.explanation == "" and run.safety_violations == []
    assert [(r["seq"], r["verdict"]) for r in run.comparison] == [(s, "same") for s in range(3, 8)]
    assert run.runtime_version.startswith("demo-agent/")
    assert runtime.executions() == before == 0


def test_with_the_provider_changed_the_first_divergence_is_the_decision_and_names_the_field(runtime, olga):
    workflow = runtime.recorded_workflow()
    amount = workflow.steps.get(seq=5).output["amount"]
    runtime.provider.changed = True

    run = replay(runtime, workflow, olga, from_seq=1, to_seq=8)

    assert run.status == "succeeded", run.reason
    assert run.first_divergent_seq == 5
    assert run.explanation == f"step 5 `decide_refund`: output.amount {amount} → {float(amount) * 100:.2f}"
    verdicts = {r["seq"]: r["verdict"] for r in run.comparison}
    assert verdicts == {1: "same", 2: "same", 3: "same", 4: "same", 5: "diverged", 6: "same", 7: "same", 8: "same"}
    assert runtime.executions() == 0  # the effects 6..8 answered their recording
    assert Event.objects.filter(workflow=workflow, verb="replay_succeeded").get().data["first_divergent_seq"] == 5


def test_later_divergent_steps_are_downstream_of_the_first(runtime, olga):
    workflow = runtime.recorded_workflow()
    step = workflow.steps.get(seq=2)  # recorded with another category than the model gives now
    step.output = {**step.output, "category": "something else"}
    step.save()
    runtime.provider.changed = True

    run = replay(runtime, workflow, olga, from_seq=1, to_seq=5)

    assert run.first_divergent_seq == 2 and "output.category something else →" in run.explanation
    assert [r["verdict"] for r in run.comparison] == ["same", "diverged", "same", "same", "downstream"]


def test_an_admin_ignore_rule_hides_a_difference_that_does_not_matter(runtime, olga):
    workflow = runtime.recorded_workflow()
    step = workflow.steps.get(seq=5)
    step.output = {**step.output, "rationale": "worded differently last week"}
    step.save()
    DriftIgnoreRule.objects.create(step_kind="model", path="output.rationale", note="free text")

    run = replay(runtime, workflow, olga)

    assert run.status == "succeeded" and run.first_divergent_seq is None
    row = next(r for r in run.comparison if r["seq"] == 5)
    assert row["verdict"] == "same" and [d["path"] for d in row["ignored"]] == ["output.rationale"]


@pytest.mark.parametrize("misbehaviour", ["fabricate_effect", "extra_effect"])
def test_a_runtime_that_misbehaves_on_effects_is_a_safety_violation_and_no_ledger_moves(runtime, olga, misbehaviour):
    workflow = runtime.recorded_workflow()
    runtime.agent.replay_misbehaviour = misbehaviour

    run = replay(runtime, workflow, olga)

    assert run.status == "failed"
    assert run.reason.startswith("Safety violation:")
    assert "Step 6 `issue_refund`" in run.safety_violations[0]
    assert {r["seq"]: r["verdict"] for r in run.comparison}[6] == "violation"
    assert Event.objects.filter(workflow=workflow, verb="replay_safety_violation").exists()
    assert runtime.executions() == 0
    assert all(not runtime.ledgers.executions_for(f"T-4242:{n}") for n in ("issue_refund", "write_ticket_note"))


def test_garbage_from_the_runtime_fails_the_replay_with_the_reason(runtime, olga):
    workflow = runtime.recorded_workflow()
    runtime.server.replay_fault = "garbage"

    run = replay(runtime, workflow, olga)

    assert run.status == "failed" and "not JSON" in run.reason and "502 Bad Gateway" in run.reason


def test_a_runtime_that_does_not_answer_in_time_fails_the_replay(runtime, olga, settings):
    settings.REPLAY_TIMEOUT_SECONDS = 0.5
    workflow = runtime.recorded_workflow()
    runtime.server.replay_fault = "hang"

    run = replay(runtime, workflow, olga)

    assert run.status == "failed" and run.reason == "The agent's replay endpoint did not answer within 0.5 s."
    assert run.finished_at is not None


def test_an_unreachable_runtime_fails_the_replay(runtime, olga):
    workflow = runtime.recorded_workflow()
    runtime.record.replay_url = "http://127.0.0.1:9/agents/support-bot/replay"
    runtime.record.save()

    run = replay(runtime, workflow, olga)

    assert run.status == "failed" and "could not be reached" in run.reason


@pytest.mark.parametrize(
    "answer, reason",
    [
        ([1, 2], "expected a JSON object"),
        ({"results": [{"seq": "3", "output": 1}]}, "results.0 needs an integer"),
        ({"results": [{"seq": 3, "output": 1}, {"seq": 3, "output": 2}]}, "reported twice"),
    ],
)
def test_results_of_the_wrong_shape_fail_the_replay_with_the_reason(runtime, olga, answer, reason):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    run.start()

    assert run.record_results(answer)
    assert run.status == "failed" and reason in run.reason


def test_results_that_leave_a_step_out_fail_the_replay(runtime, olga):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    run.start()

    run.record_results({"results": [{"seq": 3, "output": runtime.ledgers.tickets.read("T-4242")}]})

    assert run.status == "failed" and run.reason == "The runtime returned no result for step(s) 4."


def test_a_replay_past_its_deadline_is_failed_by_the_sweep_never_left_running(runtime, olga):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    run.start()  # accepted by the runtime (202), results never came
    ReplayRun.objects.filter(pk=run.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))

    assert tasks.settle_replays() == (1, 0)

    run.refresh_from_db()
    assert run.status == "failed" and run.reason.startswith("No result before the deadline")
    assert not run.record_results({"results": []})  # late results are refused


def test_a_cancelled_replay_refuses_results_and_the_task_skips_it(runtime, olga):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)

    assert run.cancel(by=olga)
    assert tasks.run_replay(run.pk) == "skipped"
    assert not run.record_results({"results": []})
    assert run.status == "cancelled" and run.reason == "Cancelled by olga."


def test_replays_are_bounded_by_range_capability_and_concurrency(runtime, olga, settings):
    workflow = runtime.recorded_workflow()
    settings.REPLAY_MAX_STEPS = 3
    with pytest.raises(ValueError, match="At most 3 steps"):
        ReplayRun.request(workflow, from_seq=1, to_seq=4, by=olga)
    with pytest.raises(ValueError, match="not all recorded"):
        ReplayRun.request(workflow, from_seq=7, to_seq=9, by=olga)
    with pytest.raises(ValueError, match="end at or after its start"):
        ReplayRun.request(workflow, from_seq=4, to_seq=3, by=olga)
    settings.REPLAY_MAX_REQUEST_BYTES = 100
    with pytest.raises(ValueError, match="weigh"):
        ReplayRun.request(workflow, from_seq=1, to_seq=2, by=olga)
    settings.REPLAY_MAX_REQUEST_BYTES = 1_000_000
    settings.REPLAY_MAX_CONCURRENT_PER_AGENT = 2
    ReplayRun.request(workflow, from_seq=1, to_seq=2, by=olga)
    ReplayRun.request(workflow, from_seq=2, to_seq=3, by=olga)
    with pytest.raises(Conflict, match="already running 2 replays"):
        ReplayRun.request(workflow, from_seq=3, to_seq=4, by=olga)
    assert ReplayRun.objects.count() == 2  # the refused ones left nothing behind

    runtime.record.capabilities = []
    runtime.record.save()
    with pytest.raises(ValueError, match="does not advertise"):
        ReplayRun.request(workflow, from_seq=1, to_seq=1, by=olga)


def test_the_step_limit_bounds_one_replays_range_not_the_length_of_the_trajectory(runtime, olga, settings):
    """A 1,000-step workflow is replayed a range at a time: the limit is on i..j, wherever it lies."""
    workflow = runtime.recorded_workflow()
    settings.REPLAY_MAX_STEPS = 3
    assert workflow.steps.count() == 8
    late = ReplayRun.request(workflow, from_seq=6, to_seq=8, by=olga)
    assert (late.from_seq, late.to_seq) == (6, 8)
    with pytest.raises(ValueError, match="At most 3 steps"):
        ReplayRun.request(workflow, from_seq=5, to_seq=8, by=olga)


def test_the_request_carries_recorded_inputs_and_for_effects_the_recorded_output(runtime, olga):
    workflow = runtime.recorded_workflow()
    run = ReplayRun.request(workflow, from_seq=5, to_seq=6, by=olga, checkpoint=None)

    payload = run.request_payload()

    assert [s["seq"] for s in payload["steps"]] == [5, 6]
    assert "recorded_output" not in payload["steps"][0] and payload["steps"][0]["input"] == {
        "model": "support-model-v3"
    }
    assert payload["steps"][1]["recorded_output"] == {"ref": "R-1A2B3C4D"}
    assert payload["steps"][1]["idempotency_key"] == "T-4242:issue_refund"
    assert payload["results_path"] == f"/api/v1/replays/{run.replay_id}/results"


def test_a_replay_asked_from_a_checkpoint_is_linked_to_it(runtime, olga):
    workflow = runtime.recorded_workflow()
    checkpoint = make_checkpoint(workflow, at_seq=7)

    run = replay(runtime, workflow, olga, checkpoint=checkpoint)

    assert run.checkpoint == checkpoint and run.status == "succeeded"
