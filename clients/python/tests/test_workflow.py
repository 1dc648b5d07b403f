"""workflow(), step() and effect(): pending -> committed/failed, stable keys, checkpoints on failure, resume."""

from __future__ import annotations

import json
import random

import pytest
from fakeconsole import FakeConsole
from recovery_client import ApiError, InvalidOutput, Paused, RecoveryClient, Stopped

SEED = 1042


class ProviderChanged(Exception):
    pass


class Payments:
    """A refund API that dedupes on the idempotency key, like a real payment provider."""

    def __init__(self) -> None:
        self.refunds: dict[str, str] = {}
        self.calls = 0

    def refund(self, key: str, amount: str) -> str:
        self.calls += 1
        return self.refunds.setdefault(key, f"R-{len(self.refunds) + 88}")


def refund_run(
    client: RecoveryClient,
    payments: Payments,
    notes: list[str],
    *,
    fail_at: str | None = None,
    failure: Exception | None = None,
) -> str:
    """The worked example: read ticket, decide, refund (effect), note (effect), notify (effect)."""
    with client.workflow(
        "T-1042",
        "refund",
        "Refund for ticket T-1042",
        summary="Refunded, noted, notified.",
        reasons={ProviderChanged: "provider_change"},
    ) as wf:
        with wf.step("read_ticket") as step:
            ticket = step.verify({"ticket": "T-1042", "amount": "42.00"}, lambda t: t["amount"] == "42.00")
        wf.state["ticket"] = ticket
        with wf.step("decide_refund", kind="model", promise="refund within 5 days") as step:
            step.record({"refund": True})
        with wf.effect("issue_refund", input={"amount": "42.00"}) as refund:
            if not refund.done:
                refund.record(external_ref=payments.refund(refund.idempotency_key or "", "42.00"))
        with wf.step("draft_note", kind="model") as step:
            if fail_at == "draft_note" and failure is not None:
                raise failure
            step.record("Refunded 42.00 EUR")
        with wf.effect("write_ticket_note") as note:
            if not note.done:
                notes.append(note.idempotency_key or "")
        return refund.external_ref or ""


def test_a_clean_run_reports_every_step_committed_and_finishes(client: RecoveryClient, console: FakeConsole) -> None:
    payments, notes = Payments(), []
    assert refund_run(client, payments, notes) == "R-88"
    workflow = console.workflow_by_external_id("T-1042")
    steps = console.steps(workflow["id"])
    assert [(s["seq"], s["name"], s["kind"], s["status"]) for s in steps] == [
        (1, "read_ticket", "tool", "committed"),
        (2, "decide_refund", "model", "committed"),
        (3, "issue_refund", "effect", "committed"),
        (4, "draft_note", "model", "committed"),
        (5, "write_ticket_note", "effect", "committed"),
    ]
    assert steps[0]["verified"] and not steps[1]["verified"]
    assert steps[1]["promise"] == "refund within 5 days"
    assert (steps[2]["idempotency_key"], steps[2]["external_ref"]) == ("T-1042:issue_refund", "R-88")
    assert (workflow["status"], workflow["summary"]) == ("completed", "Refunded, noted, notified.")


def test_every_step_is_reported_pending_before_its_body_runs(client: RecoveryClient, console: FakeConsole) -> None:
    with client.workflow("T-1", "refund", "t") as wf, wf.effect("issue_refund") as refund:
        assert console.steps(wf.id)[0]["status"] == "pending"
        assert refund.idempotency_key == "T-1:issue_refund"


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (TimeoutError("the model did not answer in 30 s"), "model_timeout"),
        (ApiError(429, "rate_limited", "Slow down."), "rate_limit"),
        (InvalidOutput("not a note"), "tool_error"),
        (json.JSONDecodeError("Expecting value", "garbage", 0), "tool_error"),
        (ProviderChanged("the provider answers differently"), "provider_change"),
        (KeyError("surprise"), "other"),
    ],
)
def test_a_failing_step_becomes_a_checkpoint_with_the_reason_it_stands_for(
    client: RecoveryClient, console: FakeConsole, failure: Exception, reason: str
) -> None:
    with pytest.raises(Paused) as paused:
        refund_run(client, Payments(), [], fail_at="draft_note", failure=failure)
    assert paused.value.__cause__ is failure
    checkpoint = paused.value.checkpoint
    assert (checkpoint["reason"], checkpoint["at_seq"]) == (reason, 4)
    assert type(failure).__name__ in checkpoint["detail"] and "draft_note" in checkpoint["detail"]
    state = checkpoint["resume_state"]
    assert state["state"]["ticket"] == {"ticket": "T-1042", "amount": "42.00"}
    assert state["state"]["error"]["step"] == "draft_note"
    assert [s["name"] for s in state["committed"]] == ["issue_refund"]  # the committed effects
    assert (state["pending"]["name"], state["pending"]["status"]) == ("draft_note", "failed")
    assert state["promises"] == ["refund within 5 days"]
    assert state["unknown_effects"] == []
    workflow = console.workflow_by_external_id("T-1042")
    assert workflow["status"] == "paused"
    assert console.steps(workflow["id"])[3]["status"] == "failed"


def test_an_invalid_output_is_refused_by_verify_and_becomes_a_tool_error(client: RecoveryClient) -> None:
    with pytest.raises(Paused) as paused, client.workflow("T-2", "refund", "t") as wf, wf.step("read_ticket") as step:
        step.verify({"amount": None}, lambda ticket: ticket["amount"] is not None)
    assert paused.value.reason == "tool_error"


def test_a_resumed_run_does_not_repeat_committed_effects_and_retries_the_failed_step(
    client: RecoveryClient, console: FakeConsole
) -> None:
    payments, notes = Payments(), []
    with pytest.raises(Paused) as paused:
        refund_run(client, payments, notes, fail_at="draft_note", failure=TimeoutError("model died"))
    console.decide(paused.value.checkpoint_id, "resume", instructions="Carry on.")

    assert refund_run(client, payments, notes) == "R-88"
    assert payments.calls == 1  # the refund was not issued twice
    assert notes == ["T-1042:write_ticket_note"]
    workflow = console.workflow_by_external_id("T-1042")
    assert [(s["seq"], s["name"], s["status"]) for s in console.steps(workflow["id"])] == [
        (1, "read_ticket", "committed"),
        (2, "decide_refund", "committed"),
        (3, "issue_refund", "committed"),
        (4, "draft_note", "failed"),
        (5, "draft_note", "committed"),
        (6, "write_ticket_note", "committed"),
    ]
    assert workflow["status"] == "completed"


def crash_inside_refund(client: RecoveryClient) -> Paused:
    with (
        pytest.raises(Paused) as paused,
        client.workflow("T-7", "refund", "t") as wf,
        wf.effect("issue_refund", input={"amount": "42.00"}),
    ):
        raise TimeoutError("the payment API did not answer")
    return paused.value


def test_an_effect_that_raises_stays_pending_as_an_unknown_effect(client: RecoveryClient, console: FakeConsole) -> None:
    paused = crash_inside_refund(client)
    unknown = paused.checkpoint["resume_state"]["unknown_effects"]
    assert [(s["name"], s["status"], s["idempotency_key"]) for s in unknown] == [
        ("issue_refund", "pending", "T-7:issue_refund")
    ]


@pytest.mark.parametrize(("verdict", "executed"), [("happened", 0), ("did_not_happen", 1)])
def test_an_unknown_effect_follows_the_operators_confirmation(
    client: RecoveryClient, console: FakeConsole, verdict: str, executed: int
) -> None:
    paused = crash_inside_refund(client)
    console.decide(paused.checkpoint_id, "resume", confirmations={"T-7:issue_refund": verdict})
    calls = 0
    with client.workflow("T-7", "refund", "t") as wf, wf.effect("issue_refund", input={"amount": "42.00"}) as refund:
        assert wf.decision is not None and wf.decision.confirmations == {"T-7:issue_refund": verdict}
        if not refund.done:
            calls += 1
            refund.record(external_ref="R-1")
    assert calls == executed
    step = console.steps(console.workflow_by_external_id("T-7")["id"])[0]
    assert (step["seq"], step["status"]) == (1, "committed")


def test_a_run_started_while_the_checkpoint_waits_is_paused_again(client: RecoveryClient) -> None:
    paused = crash_inside_refund(client)
    with pytest.raises(Paused) as again, client.workflow("T-7", "refund", "t"):
        pytest.fail("the body must not run while an operator has not decided")
    assert again.value.checkpoint_id == paused.checkpoint_id


@pytest.mark.parametrize(("action", "status"), [("abort", "aborted"), ("handoff", "handed_off")])
def test_an_aborted_or_handed_off_workflow_stops_the_agent(
    client: RecoveryClient, console: FakeConsole, action: str, status: str
) -> None:
    paused = crash_inside_refund(client)
    console.decide(paused.checkpoint_id, action)
    with pytest.raises(Stopped) as stopped, client.workflow("T-7", "refund", "t"):
        pytest.fail("the body must not run on a stopped workflow")
    assert stopped.value.status == status


def test_a_polling_agent_waits_for_the_decision_and_resumes(client: RecoveryClient, console: FakeConsole) -> None:
    paused = crash_inside_refund(client)
    console.decide(
        paused.checkpoint_id,
        "resume",
        instructions="Check the ledger first.",
        confirmations={"T-7:issue_refund": "happened"},
    )
    decision = paused.wait_for_decision(interval=0.01, timeout=5)
    assert (decision.action, decision.instructions, decision.resumes) == ("resume", "Check the ledger first.", True)


def test_a_manual_pause_opens_a_checkpoint_with_the_agent_state_and_plan(client: RecoveryClient) -> None:
    plan = [{"name": "issue_refund", "kind": "effect", "amount": "42.00", "currency": "EUR"}]
    with pytest.raises(Paused) as paused, client.workflow("T-3", "refund", "t", state={"ticket": "T-3"}) as wf:
        wf.plan = plan
        raise wf.pause("untrusted_output", "the subagent's answer cannot be trusted")
    assert paused.value.checkpoint["reason"] == "untrusted_output"
    assert paused.value.checkpoint["resume_state"]["state"] == {"ticket": "T-3"}
    assert paused.value.checkpoint["resume_state"]["plan"] == plan


def test_the_same_step_name_twice_gets_its_own_key_and_is_matched_by_occurrence(
    client: RecoveryClient, console: FakeConsole
) -> None:
    rng = random.Random(SEED)
    print("seed", SEED)
    amounts = [str(rng.randint(1, 99)) for _ in range(3)]
    sent: list[str] = []

    def run(fail: bool) -> None:
        with client.workflow("T-5", "refund", "t") as wf:
            for amount in amounts:
                with wf.effect("send_message", input={"amount": amount}) as message:
                    if not message.done:
                        sent.append(message.idempotency_key or "")
            if fail:
                raise ConnectionResetError("the agent's host went away")

    with pytest.raises(Paused) as paused:
        run(fail=True)
    assert paused.value.reason == "other"
    console.decide(paused.value.checkpoint_id)
    run(fail=False)
    assert sent == ["T-5:send_message", "T-5:send_message:2", "T-5:send_message:3"]


def test_a_standby_carries_a_failover_on_and_the_replaced_agent_is_told_to_stand_down() -> None:
    from recovery_client.workflow import Decision

    assert Decision("1", "failover").resumes and not Decision("1", "failover").stands_down
    assert Decision("1", "stand_down").stands_down and not Decision("1", "stand_down").resumes
    assert not Decision("1", "abort").resumes
    assert ApiError(409, "stood_down", "Workflow 12 was failed over to standby-bot").stood_down
    assert not ApiError(409, "workflow_finished", "done").stood_down
    assert not ApiError(404, "not_found", "No workflow").stood_down
