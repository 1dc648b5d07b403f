"""Client batching (issue 25 item 3): model and tool steps buffered, flushed before every effect, message,
checkpoint and finish, and by their size and time bounds; a crash loses only unreported model/tool steps,
which the re-run reports again; instructions on a batch's answer are honoured."""

from __future__ import annotations

import time

import pytest
from fakeconsole import TOKEN, FakeConsole
from recovery_client import ApiError, Batching, DrillCrash, Paused, RecoveryClient

PATIENCE = 10.0  # seconds a background flush may take on a loaded machine: a bound, not an assertion


def batching_client(console: FakeConsole, **bounds: float) -> RecoveryClient:
    return RecoveryClient(
        console.url,
        TOKEN,
        timeout=5,
        retries=3,
        backoff=0.001,
        max_wait=0.01,
        batching=Batching(**{"size": 50, "seconds": 60.0, **bounds}),
    )  # type: ignore[arg-type]


def posts(console: FakeConsole) -> list[str]:
    return [
        path.rsplit("/", 1)[-1] if "/steps" in path else path
        for method, path, _ in console.requests
        if method == "POST"
    ]


def test_a_run_costs_a_few_requests_and_every_step_is_in_the_console_before_the_effect_runs(console):
    client = batching_client(console)
    seen_at_effect = []
    with client.workflow("T-1", "refund", "Refund T-1") as wf:
        for k in range(10):
            with wf.step(f"think {k}", kind="model") as s:
                s.record({"k": k})
        with wf.effect("issue_refund", input={"ticket": "T-1"}) as e:
            # What the console holds while the effect runs: every step before it, and the effect pending.
            seen_at_effect = [(s["seq"], s["status"]) for s in console.steps(wf.id)]
            e.record({"refund": "R-1"})
        for k in range(5):
            with wf.step(f"tidy {k}") as s:
                s.record({"k": k})
    assert seen_at_effect == [(k, "committed") for k in range(1, 11)] + [(11, "pending")]
    steps = console.steps(wf.id)
    assert [(s["seq"], s["status"]) for s in steps] == [(k, "committed") for k in range(1, 17)]
    assert steps[10]["output"] == {"refund": "R-1"} and steps[0]["output"] == {"k": 0}
    # create; step 1 reported alone until finished (its answer may carry a hold or a drill); the buffer with
    # the effect's pending; the effect's commit; the last five before the finish.
    assert posts(console) == [
        "/api/v1/workflows",
        "steps",
        "steps",
        "batch",
        "steps",
        "batch",
        "/api/v1/workflows/1/finish",
    ]


def test_a_pending_report_still_in_the_buffer_is_sent_once_finished(console):
    client = batching_client(console)
    with client.workflow("T-2", "support", "T-2") as wf:
        for k in range(3):
            with wf.step(f"look {k}") as s:
                s.record(k)
    batches = [body["steps"] for method, path, body in console.requests if path.endswith("/batch")]
    # Step 1 went alone until finished (its answer tells of any hold or drill); the rest went finished.
    assert [(r["seq"], r["status"]) for r in batches[0]] == [(2, "committed"), (3, "committed")]


def test_the_size_bound_flushes_a_full_buffer(console):
    client = batching_client(console, size=4)
    with client.workflow("T-3", "support", "T-3") as wf:
        for k in range(9):
            with wf.step(f"look {k}") as s:
                s.record(k)
            if k == 3:
                assert [s["seq"] for s in console.steps(wf.id)] == [1], "steps 2..4 wait in the buffer"
            if k == 4:  # the commits of steps 2..5 filled it (each pending was replaced by its commit)
                assert [(s["seq"], s["status"]) for s in console.steps(wf.id)] == [
                    (k, "committed") for k in range(1, 6)
                ]
    assert len(console.steps(wf.id)) == 9


def test_the_time_bound_flushes_without_another_report(console):
    client = batching_client(console, seconds=0.05)
    with client.workflow("T-4", "support", "T-4") as wf:
        with wf.step("read") as s:
            s.record(1)
        with wf.step("think", kind="model") as s:
            s.record(2)
        deadline = time.monotonic() + PATIENCE
        while len(console.steps(wf.id)) < 2 or console.steps(wf.id)[1]["status"] != "committed":
            assert time.monotonic() < deadline, "the timer never flushed the buffer"
            time.sleep(0.01)
    assert [s["status"] for s in console.steps(wf.id)] == ["committed", "committed"]


def test_a_crash_loses_only_buffered_model_and_tool_steps_and_the_rerun_reports_them_again(console):
    client = batching_client(console)
    refunds: list[str] = []

    def run(crash: bool) -> None:
        with client.workflow("T-5", "refund", "Refund T-5") as wf:
            with wf.step("read") as s:
                s.record({"ticket": "T-5"})
            with wf.effect("issue_refund") as e:
                if not e.done:
                    refunds.append(e.idempotency_key or "")
                    e.record({"refund": "R-5"})
            with wf.step("draft", kind="model") as s:
                s.record({"note": "refunded"})
            with wf.step("check") as s:
                s.record({"ok": True})
                if crash:
                    raise DrillCrash("killed")  # a BaseException: the process dies, nothing more is sent

    with pytest.raises(DrillCrash):
        run(crash=True)
    workflow = console.workflow_by_external_id("T-5")
    # The effect was reported before and after it ran; the two steps after it were only buffered: lost.
    assert [(s["seq"], s["name"], s["status"]) for s in console.steps(workflow["id"])] == [
        (1, "read", "committed"),
        (2, "issue_refund", "committed"),
    ]
    run(crash=False)
    assert [(s["seq"], s["name"], s["status"]) for s in console.steps(workflow["id"])] == [
        (1, "read", "committed"),
        (2, "issue_refund", "committed"),
        (3, "draft", "committed"),
        (4, "check", "committed"),
    ]
    assert refunds == ["T-5:issue_refund"], "the effect ran once"


def test_a_failing_checkpoint_sends_the_buffer_first(console):
    client = batching_client(console)
    with pytest.raises(Paused) as paused, client.workflow("T-6", "support", "T-6") as wf:
        with wf.step("read") as s:
            s.record(1)
        with wf.step("think", kind="model") as s:
            s.record(2)
        with wf.step("call"):
            raise TimeoutError("the model did not answer")
    workflow = console.workflow_by_external_id("T-6")
    assert [(s["seq"], s["status"]) for s in console.steps(workflow["id"])] == [
        (1, "committed"),
        (2, "committed"),
        (3, "failed"),
    ]
    assert paused.value.checkpoint["at_seq"] == 3 and paused.value.reason == "model_timeout"


def test_a_refused_batch_loses_nothing_and_is_sent_again(console):
    client = batching_client(console)
    with client.workflow("T-7", "support", "T-7") as wf:
        with wf.step("read") as s:
            s.record(1)
        with wf.step("think", kind="model") as s:
            s.record(2)
        console.fail_next(4, status=503)  # the request and its 3 retries
        with pytest.raises(ApiError) as refused:
            wf.flush()
        assert refused.value.status == 503
        wf.flush()
    assert [(s["seq"], s["status"]) for s in console.steps(wf.id)] == [(1, "committed"), (2, "committed")]


def test_a_hold_on_a_batch_answer_pauses_the_run_there(console):
    client = batching_client(console, size=2)
    ran = []
    with pytest.raises(Paused) as paused, client.workflow("T-8", "refund", "T-8") as wf:
        with wf.step("read") as s:
            s.record(1)
        with console.lock:  # an operator holds the agent: the console pauses the workflow at a held checkpoint
            _status, checkpoint = console.open_checkpoint({"reason": "manual", "at_seq": 2}, wf.id)
            console.instructions[wf.id] = {"pause": {"checkpoint_id": checkpoint["id"], "reason": "held"}}
        for k in range(5):
            with wf.step(f"think {k}", kind="model") as s:
                ran.append(k)
                s.record(k)
    # The commits of think 0 and think 1 filled the buffer; their flush brought the pause: nothing more ran.
    assert ran == [0, 1], "the run stopped at the flush the pause came with"
    assert paused.value.reason == "held" and paused.value.checkpoint_id == checkpoint["id"]


def test_a_drill_told_on_a_batch_answer_is_carried_out(console):
    client = batching_client(console, size=2)
    with pytest.raises(DrillCrash), client.workflow("T-9", "support", "T-9") as wf:
        with wf.step("read") as s:
            s.record(1)
        console.instructions[wf.id] = {"drill": {"id": "1", "fault": "crash_after_step", "at_seq": 4}}
        for k in range(5):
            with wf.step(f"think {k}", kind="model") as s:
                s.record(k)
    # Told at the flush after step 3; step 4 was committed and reported (flushed) before the crash.
    assert [(s["seq"], s["status"]) for s in console.steps(wf.id)] == [(k, "committed") for k in range(1, 5)]


def test_batching_bounds_are_checked():
    with pytest.raises(ValueError, match="1 to 499"):
        Batching(size=500)
    with pytest.raises(ValueError, match="positive"):
        Batching(seconds=0)
