"""One agent cannot see or touch another agent's data (404, never 403); no valid token, no API (401)."""

import pytest
from django.test import Client

from tests.apitools import api_agent, assert_error, issue_refund
from workflows.models import Checkpoint, Decider, Event, Step, Workflow


@pytest.fixture
def alpha(db):
    return api_agent("alpha")


@pytest.fixture
def beta(db):
    return api_agent("beta")


@pytest.fixture
def alphas(alpha):
    """alpha's workflow (one step) and its open checkpoint."""
    workflow_id = alpha.create_workflow("T-1042")["id"]
    alpha.report(workflow_id, **issue_refund())
    checkpoint_id = alpha.open_checkpoint(workflow_id)["id"]
    return workflow_id, checkpoint_id


def snapshot(workflow_id):
    workflow = Workflow.objects.get(pk=workflow_id)
    return (
        workflow.status,
        workflow.last_activity_at,
        workflow.summary,
        list(Step.objects.filter(workflow=workflow).values()),
        list(Checkpoint.objects.values()),
        Event.objects.count(),
    )


def test_another_agents_workflow_is_404(beta, alphas):
    workflow_id, _ = alphas
    assert_error(beta.get(f"/workflows/{workflow_id}"), 404, "not_found")


def test_another_agents_checkpoint_is_404(beta, alphas):
    _, checkpoint_id = alphas
    assert_error(beta.get(f"/checkpoints/{checkpoint_id}"), 404, "not_found")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/workflows/{id}/steps", {"seq": 4, "name": "write_ticket_note", "kind": "tool", "status": "committed"}),
        ("/workflows/{id}/steps", issue_refund()),
        ("/workflows/{id}/checkpoints", {"reason": "manual", "detail": "", "at_seq": None, "state": {}}),
        ("/workflows/{id}/finish", {"status": "failed", "summary": "hijacked"}),
    ],
)
def test_another_agents_workflow_cannot_be_changed_and_is_not_even_touched(beta, alphas, path, body):
    workflow_id, _ = alphas
    before = snapshot(workflow_id)
    assert_error(beta.post(path.replace("{id}", workflow_id), body), 404, "not_found")
    assert snapshot(workflow_id) == before


def test_the_not_found_answer_is_the_same_for_missing_and_foreign_ids(beta, alphas):
    workflow_id, _ = alphas
    foreign = beta.get(f"/workflows/{workflow_id}").json()
    missing = beta.get("/workflows/987654").json()
    assert foreign == missing


def test_the_same_external_id_is_a_separate_workflow_for_another_agent(alpha, beta, alphas):
    workflow_id, _ = alphas
    theirs = beta.create_workflow("T-1042")
    assert theirs["id"] != workflow_id
    assert theirs["steps"] == [] and theirs["status"] == "running"
    assert Workflow.objects.filter(external_id="T-1042").count() == 2


def test_a_polling_agent_cannot_collect_another_agents_decision(beta, alphas, alice):
    _, checkpoint_id = alphas
    # The refund kind has moved money and the agent sent no plan: the resume needs the money tick (issue 8).
    Decider(Checkpoint.objects.get(pk=checkpoint_id)).decide(by=alice, action="resume", money_confirmed=True)
    assert_error(beta.get(f"/checkpoints/{checkpoint_id}"), 404, "not_found")
    assert Checkpoint.objects.get(pk=checkpoint_id).decisions.get().status == "queued"


ENDPOINTS = [
    ("get", "/workflows/{wf}", None),
    ("post", "/workflows", {"external_id": "T-9", "kind": "refund", "title": "t"}),
    ("post", "/workflows/{wf}/steps", {"seq": 9, "name": "x", "kind": "tool", "status": "committed"}),
    ("post", "/workflows/{wf}/checkpoints", {"reason": "manual"}),
    ("get", "/checkpoints/{cp}", None),
    ("post", "/workflows/{wf}/finish", {"status": "failed", "summary": ""}),
]
BAD_HEADERS = {
    "missing": None,
    "empty": "",
    "bearer-only": "Bearer",
    "bearer-blank": "Bearer ",
    "wrong-token": "Bearer rc_not-a-real-token",
    "wrong-scheme": "Basic {token}",
    "token-without-scheme": "{token}",
    "huge": "Bearer " + "x" * 5000,
}


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
@pytest.mark.parametrize("header", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_without_a_valid_token_every_endpoint_is_401(alpha, alphas, method, path, body, header):
    workflow_id, checkpoint_id = alphas
    before = snapshot(workflow_id)
    headers = {} if header is None else {"Authorization": header.replace("{token}", alpha.token)}
    client = Client(headers=headers)
    url = "/api/v1" + path.replace("{wf}", workflow_id).replace("{cp}", checkpoint_id)
    response = client.get(url) if method == "get" else client.post(url, body, content_type="application/json")
    assert_error(response, 401, "unauthorized", None)
    assert snapshot(workflow_id) == before
    assert Workflow.objects.count() == 1


def test_a_deactivated_agent_is_401(alpha, alphas):
    workflow_id, _ = alphas
    alpha.agent.is_active = False
    alpha.agent.save()
    assert_error(alpha.get(f"/workflows/{workflow_id}"), 401, "unauthorized")


def test_a_rotated_token_stops_working(alpha, alphas):
    workflow_id, _ = alphas
    fresh = alpha.agent.set_new_token()
    alpha.agent.save()
    assert_error(alpha.get(f"/workflows/{workflow_id}"), 401, "unauthorized")
    client = Client(headers={"Authorization": f"Bearer {fresh}"})
    assert client.get(f"/api/v1/workflows/{workflow_id}").status_code == 200


def test_the_scheme_is_case_insensitive(alpha, alphas):
    workflow_id, _ = alphas
    client = Client(headers={"Authorization": f"bearer {alpha.token}"})
    assert client.get(f"/api/v1/workflows/{workflow_id}").status_code == 200
