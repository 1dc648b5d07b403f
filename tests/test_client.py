"""recovery_client.RecoveryClient against a live console: every endpoint, errors, retries."""

import pytest
from django.db import OperationalError
from recovery_client import ApiError, RecoveryClient, Unavailable

from tests.helpers import make_agent, make_user
from workflows import api as api_module
from workflows.api import steps as steps_api
from workflows.api import workflows as workflows_api
from workflows.models import Checkpoint, Decider, Step, Workflow

# The live server runs in another thread: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"input": {"amount": "42.00", "currency": "EUR"}, "idempotency_key": "T-1042:refund"}


@pytest.fixture
def olivia():
    return make_user("olivia")


@pytest.fixture
def client(live_server, olivia):
    _, token = make_agent("support-bot", owner=olivia)
    return RecoveryClient(live_server.url, token, timeout=10, retries=3, backoff=0.01, max_wait=0.05)


def counting(monkeypatch, module, name, behaviour):
    """Replace <module>.<name> with ``behaviour(call_number, original, *args)``; returns the call log."""
    original, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        calls.append(args)
        return behaviour(len(calls), original, *args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_the_client_drives_the_worked_example_through_every_endpoint(client, alice):
    workflow = client.create_workflow("T-1042", "refund", "Refund for ticket T-1042", context={"ticket": "T-1042"})
    assert client.create_workflow("T-1042", "refund", "Refund for ticket T-1042")["id"] == workflow["id"]
    workflow_id = workflow["id"]
    client.report_step(workflow_id, 1, "read_ticket", "tool", "committed", output={"amount": "42.00"}, verified=True)
    client.report_step(workflow_id, 2, "decide_refund", "model", "committed", promise="refund within 5 days")
    step = client.report_step(workflow_id, 3, "issue_refund", "effect", "committed", external_ref="R-88", **REFUND)
    assert step["external_ref"] == "R-88"

    checkpoint = client.open_checkpoint(
        workflow_id,
        "model_timeout",
        detail="timed out",
        at_seq=4,
        state={"remaining": ["write_ticket_note"]},
        plan=[{"name": "write_ticket_note", "kind": "effect"}],
    )
    assert checkpoint["status"] == "open"
    assert checkpoint["resume_state"]["plan"] == [
        {"name": "write_ticket_note", "kind": "effect", "amount": None, "currency": None, "moves_money": False}
    ]
    assert checkpoint["resume_state"]["promises"] == ["refund within 5 days"]
    assert client.get_checkpoint(checkpoint["id"])["decision"] is None
    assert client.get_workflow(workflow_id)["status"] == "paused"

    Decider(Checkpoint.objects.get(pk=checkpoint["id"])).decide(by=alice, action="resume", instructions="Carry on.")
    decision = client.wait_for_decision(checkpoint["id"], interval=0.01, timeout=30)
    assert (decision["action"], decision["state"], decision["decided_by"]) == ("resume", "succeeded", "alice")

    client.report_step(workflow_id, 4, "write_ticket_note", "effect", "committed", idempotency_key="T-1042:note")
    finished = client.finish(workflow_id, "completed", "Refunded and noted.")
    assert finished["status"] == "completed"
    assert finished["owner"] == "olivia"
    assert [s["seq"] for s in client.get_workflow(workflow_id)["steps"]] == [1, 2, 3, 4]


def finish_with_a_checkpoint_open(client, workflow_id):
    client.open_checkpoint(workflow_id, "manual")
    client.finish(workflow_id, "completed")


@pytest.mark.parametrize(
    ("call", "status", "code", "field"),
    [
        (
            lambda client, workflow_id: client.report_step(workflow_id, 1, "issue_refund", "effect", "committed"),
            422,
            "idempotency_key_required",
            "idempotency_key",
        ),
        (lambda client, workflow_id: client.get_workflow("424242"), 404, "not_found", None),
        (finish_with_a_checkpoint_open, 409, "checkpoint_open", None),
    ],
    ids=["effect-without-key", "unknown-workflow", "finish-with-checkpoint-open"],
)
def test_an_api_error_carries_status_code_and_field(client, call, status, code, field):
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]
    with pytest.raises(ApiError) as raised:
        call(client, workflow_id)
    assert (raised.value.status, raised.value.code, raised.value.field) == (status, code, field)


def test_a_bad_token_is_an_api_error_401(live_server):
    with pytest.raises(ApiError) as raised:
        RecoveryClient(live_server.url, "rc_wrong", retries=0).get_workflow("1")
    assert raised.value.status == 401


def test_a_429_is_retried_until_the_window_lets_the_call_through(client, monkeypatch):
    verdicts = iter([False, False, True])
    consulted = []

    def limited(self, request):
        consulted.append(request.path)
        return next(verdicts)

    monkeypatch.setattr(api_module.AgentRateLimit, "allow_request", limited)
    workflow = client.create_workflow("T-1", "refund", "t")
    assert len(consulted) == 3
    assert Workflow.objects.filter(pk=workflow["id"]).exists()


def test_a_429_that_outlasts_the_retries_is_raised(client, monkeypatch):
    monkeypatch.setattr(api_module.AgentRateLimit, "allow_request", lambda self, request: False)
    with pytest.raises(ApiError) as raised:
        client.create_workflow("T-1", "refund", "t")
    assert (raised.value.status, raised.value.code) == (429, "rate_limited")
    assert not Workflow.objects.exists()


def test_a_503_is_retried_and_the_retry_is_harmless(client, monkeypatch):
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]

    def flaky(n, original, *args, **kwargs):
        if n == 1:
            raise OperationalError("the database restarted")
        return original(*args, **kwargs)

    calls = counting(monkeypatch, steps_api, "own_workflow", flaky)
    client.report_step(workflow_id, 1, "read_ticket", "tool", "committed")
    assert len(calls) == 2
    assert Step.objects.filter(workflow_id=workflow_id).count() == 1


def test_a_lost_answer_is_safe_to_resend(client, monkeypatch):
    workflow_id = client.create_workflow("T-1", "refund", "t")["id"]

    # The step is recorded, then the answer is lost (a 500 after the commit): the retry answers 200.
    original, calls = Step.as_dict, []

    def as_dict(step):
        calls.append(step.seq)
        if len(calls) == 1:
            raise RuntimeError("the answer is lost after the commit")
        return original(step)

    monkeypatch.setattr(Step, "as_dict", as_dict)
    step = client.report_step(workflow_id, 3, "issue_refund", "effect", "committed", **REFUND)
    assert step["idempotency_key"] == "T-1042:refund"
    assert len(calls) > 1  # the first answer was lost and the client asked again
    assert Step.objects.filter(workflow_id=workflow_id).count() == 1


def test_a_client_error_is_not_retried(client, monkeypatch):
    calls = counting(monkeypatch, workflows_api, "own_workflow", lambda n, original, *a, **k: original(*a, **k))
    with pytest.raises(ApiError):
        client.get_workflow("424242")
    assert len(calls) == 1


def test_an_unreachable_console_is_unavailable_after_the_retries():
    client = RecoveryClient("http://127.0.0.1:9", "rc_x", timeout=1, retries=1, backoff=0.01)
    with pytest.raises(Unavailable):
        client.get_workflow("1")


def test_the_client_waits_as_long_as_retry_after_asks_within_its_cap(live_server, monkeypatch):
    _, token = make_agent("patient-bot")
    slept: list[float] = []
    monkeypatch.setattr("recovery_client.client.time.sleep", slept.append)
    monkeypatch.setattr(api_module.AgentRateLimit, "allow_request", lambda self, request: False)
    monkeypatch.setattr(api_module.AgentRateLimit, "wait", lambda self: 5.0)  # Retry-After: 5
    client = RecoveryClient(live_server.url, token, retries=2, backoff=0.01, max_wait=7)
    with pytest.raises(ApiError) as raised:
        client.create_workflow("T-1", "refund", "t")
    assert raised.value.retry_after == 5
    assert slept == [5, 5]  # the server's word beats the 0.01 s backoff

    slept.clear()
    impatient = RecoveryClient(live_server.url, token, retries=1, backoff=0.01, max_wait=2)
    with pytest.raises(ApiError):
        impatient.create_workflow("T-1", "refund", "t")
    assert slept == [2]  # capped


def test_a_truncated_answer_is_retried(client, monkeypatch):
    import urllib.request  # the module recovery_client.client calls urlopen through

    real = urllib.request.urlopen
    calls = []

    class Cut:
        def __init__(self, response):
            self.response = response

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.response.close()

        def read(self):
            return self.response.read()[:7]

    def urlopen(request, timeout):
        calls.append(request.full_url)
        response = real(request, timeout=timeout)
        return Cut(response) if len(calls) == 1 else response

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    workflow = client.create_workflow("T-9", "refund", "t")
    assert len(calls) == 2 and workflow["external_id"] == "T-9"
    assert Workflow.objects.filter(external_id="T-9").count() == 1


def test_report_steps_records_a_batch_once_however_often_it_is_sent(client):
    wf = client.create_workflow("T-1042", "refund", "Refund for ticket T-1042")
    steps = [
        {"seq": 1, "name": "read_ticket", "kind": "tool", "status": "committed", "verified": True},
        {"seq": 2, "name": "issue_refund", "kind": "effect", "status": "pending", **REFUND},
    ]
    assert client.report_steps(wf["id"], steps)["created"] == [1, 2]
    again = client.report_steps(wf["id"], steps)
    assert again["created"] == [] and [s["seq"] for s in again["steps"]] == [1, 2]
    with pytest.raises(ApiError) as refused:
        client.report_steps(
            wf["id"],
            [{"seq": 3, "name": "again", "kind": "effect", "status": "pending", "idempotency_key": "T-1042:refund"}],
        )
    assert (refused.value.status, refused.value.field) == (409, "steps.0.idempotency_key")
    assert Step.objects.filter(workflow_id=wf["id"]).count() == 2


def test_the_client_advertises_capabilities_and_posts_a_long_replays_results(client, olivia):
    from workflows.models import Agent, ReplayRun

    body = client.advertise(["replay", "fork"], runtime_version="support-bot/2.3", kinds=["refund"])
    assert body["capabilities"] == ["fork", "replay"] and body["runtime_version"] == "support-bot/2.3"
    agent = Agent.objects.get(name="support-bot")
    agent.replay_url = "http://127.0.0.1:9/replay"  # an admin's setting
    agent.save()
    workflow = Workflow.objects.create(agent=agent, external_id="T-1", kind="refund", title="Refund")
    Step.objects.create(
        workflow=workflow, seq=1, name="read_ticket", kind="tool", status="committed", output={"amount": "42.00"}
    )
    run = ReplayRun.request(workflow, from_seq=1, to_seq=1, by=olivia)
    run.start()  # the runtime answered 202

    assert client.get_replay(str(run.replay_id))["status"] == "running"
    done = client.post_replay_results(
        str(run.replay_id), [{"seq": 1, "output": {"amount": "42.00"}}], runtime_version="support-bot/2.3"
    )
    assert done["status"] == "succeeded" and done["first_divergent_seq"] is None
    with pytest.raises(ApiError) as late:
        client.post_replay_results(str(run.replay_id), error="too late")
    assert late.value.status == 409 and late.value.code == "replay_finished"
