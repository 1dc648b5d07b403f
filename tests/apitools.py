"""Talking to the Agent API in tests: an agent with its token, and the error-shape assertion.

Registered for the whole suite through ``pytest_plugins`` in conftest.py: the ``bot`` fixture (an agent
that speaks the API) and ``workflow_id`` (a workflow it started, ticket T-1042).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.helpers import make_agent
from workflows.models import Agent

UNSET = object()


class AgentApi:
    """A Django test client that speaks for one agent."""

    def __init__(self, agent: Agent, token: str) -> None:
        self.agent, self.token = agent, token
        self.client = Client(headers={"Authorization": f"Bearer {token}"})
        self.workflow_id = ""  # the one workflow a test keeps, when it keeps one

    def get(self, path: str) -> Any:
        return self.client.get("/api/v1" + path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.post_raw(path, json.dumps(body).encode())

    def post_raw(self, path: str, raw: bytes, content_type: str = "application/json") -> Any:
        return self.client.post("/api/v1" + path, data=raw, content_type=content_type)

    # --- the endpoints, answering the JSON body and asserting the expected status ---
    def create_workflow(self, external_id: str = "T-1042", *, status: int = 201, **fields: Any) -> dict:
        body = {
            "external_id": external_id,
            "kind": "refund",
            "title": f"Refund for ticket {external_id}",
            "owner": None,
            "context": {"ticket": external_id},
            **fields,
        }
        return expect(self.post("/workflows", body), status)

    def report(
        self,
        workflow_id: str,
        seq: int,
        name: str,
        kind: str = "tool",
        status: str = "committed",
        *,
        expect_status: int = 201,
        **fields: Any,
    ) -> dict:
        body = {"seq": seq, "name": name, "kind": kind, "status": status, **fields}
        return expect(self.post(f"/workflows/{workflow_id}/steps", body), expect_status)

    def open_checkpoint(self, workflow_id: str, *, status: int = 201, **fields: Any) -> dict:
        body = {"reason": "model_timeout", "detail": "the model timed out", "at_seq": None, "state": {}, **fields}
        return expect(self.post(f"/workflows/{workflow_id}/checkpoints", body), status)

    def checkpoint(self, checkpoint_id: str) -> dict:
        return expect(self.get(f"/checkpoints/{checkpoint_id}"), 200)

    def workflow(self, workflow_id: str) -> dict:
        return expect(self.get(f"/workflows/{workflow_id}"), 200)

    def finish(
        self, workflow_id: str, status: str = "completed", *, expect_status: int = 200, summary: str = "done"
    ) -> dict:
        return expect(
            self.post(f"/workflows/{workflow_id}/finish", {"status": status, "summary": summary}), expect_status
        )


def api_agent(name: str | None = None, **kwargs: Any) -> AgentApi:
    agent, token = make_agent(name, **kwargs)
    return AgentApi(agent, token)


def expect(response: Any, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    return response.json()


def assert_error(response: Any, status: int, code: str, field: Any = UNSET) -> dict:
    """The response is the API's error shape with this status and code (and field, when given)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "field"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"].endswith("."), error
    assert error["field"] is None or isinstance(error["field"], str), error
    if field is not UNSET:
        assert error["field"] == field, error
    return error


# The worked example of DESIGN.md, as the agent reports it.
READ_TICKET = {
    "seq": 1,
    "name": "read_ticket",
    "kind": "tool",
    "status": "committed",
    "input": {"ticket": "T-1042"},
    "output": {"ticket": "T-1042", "amount": "42.00"},
    "verified": True,
}
DECIDE_REFUND = {
    "seq": 2,
    "name": "decide_refund",
    "kind": "model",
    "status": "committed",
    "output": {"decision": "refund", "amount": "42.00"},
    "promise": "refund within 5 days",
}


def issue_refund(status: str = "committed", **fields: Any) -> dict:
    return {
        "seq": 3,
        "name": "issue_refund",
        "kind": "effect",
        "status": status,
        "input": {"amount": "42.00", "currency": "EUR"},
        "idempotency_key": "T-1042:refund",
        "external_ref": "R-88" if status == "committed" else None,
        **fields,
    }


@pytest.fixture
def bot(db: None) -> AgentApi:
    return api_agent()


@pytest.fixture
def workflow_id(bot: AgentApi) -> Any:
    return bot.create_workflow("T-1042")["id"]
