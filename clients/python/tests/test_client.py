"""RecoveryClient against an in-memory console: every endpoint, errors, retries, Retry-After, cut answers."""

from __future__ import annotations

import pytest
from fakeconsole import TOKEN, FakeConsole
from recovery_client import ApiError, RecoveryClient, Unavailable

REFUND = {"input": {"amount": "42.00", "currency": "EUR"}, "idempotency_key": "T-1042:refund"}


def test_the_client_drives_the_worked_example_through_every_endpoint(
    client: RecoveryClient, console: FakeConsole
) -> None:
    workflow = client.create_workflow("T-1042", "refund", "Refund for ticket T-1042", context={"ticket": "T-1042"})
    assert client.create_workflow("T-1042", "refund", "Refund for ticket T-1042")["id"] == workflow["id"]
    workflow_id = workflow["id"]
    client.report_step(workflow_id, 1, "read_ticket", "tool", "committed", output={"amount": "42.00"}, verified=True)
    client.report_step(workflow_id, 2, "decide_refund", "model", "committed", promise="refund within 5 days")
    step = client.report_step(workflow_id, 3, "issue_refund", "effect", "committed", external_ref="R-88", **REFUND)
    assert step["external_ref"] == "R-88"

    checkpoint = client.open_checkpoint(
        workflow_id, "model_timeout", detail="timed out", at_seq=4, state={"remaining": ["write_ticket_note"]}
    )
    assert checkpoint["resume_state"]["promises"] == ["refund within 5 days"]
    assert client.get_checkpoint(checkpoint["id"])["decision"] is None
    assert client.get_workflow(workflow_id)["status"] == "paused"

    console.decide(checkpoint["id"], "resume", instructions="Carry on.")
    decision = client.wait_for_decision(checkpoint["id"], interval=0.01, timeout=5)
    assert (decision["action"], decision["instructions"]) == ("resume", "Carry on.")

    client.report_step(workflow_id, 4, "write_ticket_note", "effect", "committed", idempotency_key="T-1042:note")
    assert client.finish(workflow_id, "completed", "Refunded and noted.")["status"] == "completed"
    assert [s["seq"] for s in client.get_workflow(workflow_id)["steps"]] == [1, 2, 3, 4]


def test_an_api_error_carries_status_code_and_field(client: RecoveryClient) -> None:
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]
    with pytest.raises(ApiError) as raised:
        client.report_step(workflow_id, 1, "issue_refund", "effect", "committed")
    assert (raised.value.status, raised.value.code, raised.value.field) == (
        422,
        "idempotency_key_required",
        "idempotency_key",
    )
    with pytest.raises(ApiError) as raised:
        client.get_workflow("424242")
    assert (raised.value.status, raised.value.code) == (404, "not_found")


def test_a_bad_token_is_an_api_error_401(console: FakeConsole) -> None:
    with pytest.raises(ApiError) as raised:
        RecoveryClient(console.url, "rc_wrong", retries=0).get_workflow("1")
    assert raised.value.status == 401


def test_a_503_is_retried_and_the_retry_is_harmless(client: RecoveryClient, console: FakeConsole) -> None:
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]
    console.fail_next(2, status=503)
    client.report_step(workflow_id, 1, "read_ticket", "tool", "committed")
    assert len(console.steps(workflow_id)) == 1


def test_a_429_that_outlasts_the_retries_is_raised(client: RecoveryClient, console: FakeConsole) -> None:
    console.fail_next(
        4, status=429, body=b'{"error": {"code": "rate_limited", "message": "Slow down.", "field": null}}'
    )
    with pytest.raises(ApiError) as raised:
        client.create_workflow("T-1", "refund", "t")
    assert (raised.value.status, raised.value.code) == (429, "rate_limited")
    assert not console.workflows


def test_a_client_error_is_not_retried(client: RecoveryClient, console: FakeConsole) -> None:
    with pytest.raises(ApiError):
        client.get_workflow("424242")
    assert len(console.requests) == 1


def test_a_non_json_error_body_is_still_an_api_error(client: RecoveryClient, console: FakeConsole) -> None:
    console.fail_next(status=418, body=b"<html>teapot</html>")
    with pytest.raises(ApiError) as raised:
        client.get_workflow("1")
    assert (raised.value.status, raised.value.code, raised.value.message) == (418, "http_error", "<html>teapot</html>")


def test_an_unreachable_console_is_unavailable_after_the_retries() -> None:
    client = RecoveryClient("http://127.0.0.1:9", TOKEN, timeout=1, retries=1, backoff=0.001)
    with pytest.raises(Unavailable):
        client.get_workflow("1")


def test_the_client_waits_as_long_as_retry_after_asks_within_its_cap(
    console: FakeConsole, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("recovery_client.client.time.sleep", slept.append)
    limited = {
        "status": 429,
        "headers": {"Retry-After": "5"},
        "body": b'{"error": {"code": "rate_limited", "message": "Slow down.", "field": null}}',
    }
    console.fail_next(3, **limited)
    with pytest.raises(ApiError) as raised:
        RecoveryClient(console.url, TOKEN, retries=2, backoff=0.01, max_wait=7).create_workflow("T-1", "refund", "t")
    assert raised.value.retry_after == 5
    assert slept == [5, 5]  # the server's word beats the 0.01 s backoff

    slept.clear()
    console.fail_next(2, **limited)
    with pytest.raises(ApiError):
        RecoveryClient(console.url, TOKEN, retries=1, backoff=0.01, max_wait=2).create_workflow("T-1", "refund", "t")
    assert slept == [2]  # capped


def test_a_truncated_answer_is_retried_and_applied_once(client: RecoveryClient, console: FakeConsole) -> None:
    console.cut_next()
    workflow = client.create_workflow("T-9", "refund", "t")
    assert workflow["external_id"] == "T-9"
    assert [r[1] for r in console.requests] == ["/api/v1/workflows", "/api/v1/workflows"]
    assert len(console.workflows) == 1


def test_waiting_for_a_decision_gives_up_after_its_timeout(client: RecoveryClient) -> None:
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]
    checkpoint = client.open_checkpoint(workflow_id, "manual")
    with pytest.raises(TimeoutError):
        client.wait_for_decision(checkpoint["id"], interval=0.01, timeout=0.05)
