"""The async variants: the same reporting and checkpoints under asyncio."""

from __future__ import annotations

import asyncio

import pytest
from fakeconsole import TOKEN, FakeConsole
from recovery_client import AsyncRecoveryClient, Paused


def make(console: FakeConsole) -> AsyncRecoveryClient:
    return AsyncRecoveryClient(console.url, TOKEN, retries=2, backoff=0.001, max_wait=0.01)


def test_an_async_run_reports_steps_and_an_asyncio_timeout_becomes_a_model_timeout(console: FakeConsole) -> None:
    client = make(console)

    async def slow_model() -> str:
        await asyncio.sleep(5)
        return "never"

    async def run() -> None:
        async with client.workflow("T-1042", "refund", "t") as wf:
            async with wf.step("read_ticket") as step:
                step.record({"amount": "42.00"}, verified=True)
            async with wf.effect("issue_refund") as refund:
                refund.record(external_ref="R-88")
            async with wf.step("draft_note", kind="model"):
                await asyncio.wait_for(slow_model(), timeout=0.01)

    with pytest.raises(Paused) as paused:
        asyncio.run(run())
    assert (paused.value.reason, paused.value.checkpoint["at_seq"]) == ("model_timeout", 3)
    workflow_id = console.workflow_by_external_id("T-1042")["id"]
    assert [s["status"] for s in console.steps(workflow_id)] == ["committed", "committed", "failed"]

    console.decide(paused.value.checkpoint_id, "resume", instructions="Try again.")

    async def resume() -> tuple[str, bool]:
        decision = await client.wait_for_decision(paused.value.checkpoint_id, interval=0.01, timeout=5)
        async with client.workflow("T-1042", "refund", "t") as wf:
            async with wf.step("read_ticket") as step:
                assert step.done
            async with wf.effect("issue_refund") as refund:
                done = refund.done
            async with wf.step("draft_note", kind="model") as step:
                step.record("Refunded")
        return decision["instructions"], done

    assert asyncio.run(resume()) == ("Try again.", True)
    assert console.workflow_by_external_id("T-1042")["status"] == "completed"
