"""The OpenAPI document is served at /api/v1/openapi.json and describes the contract."""

import pytest
from django.test import Client

PATHS = {
    "/api/v1/workflows": {"post"},
    "/api/v1/workflows/{workflow_id}": {"get"},
    "/api/v1/workflows/{workflow_id}/steps": {"post"},
    "/api/v1/workflows/{workflow_id}/steps/batch": {"post"},
    "/api/v1/workflows/{workflow_id}/checkpoints": {"post"},
    "/api/v1/checkpoints/{checkpoint_id}": {"get"},
    "/api/v1/workflows/{workflow_id}/finish": {"post"},
    # Additions for replays (issue 11); v1's endpoints above are unchanged.
    "/api/v1/agent": {"get"},
    "/api/v1/agent/capabilities": {"post"},
    "/api/v1/replays/{replay_id}": {"get"},
    "/api/v1/replays/{replay_id}/results": {"post"},
    # Addition for recovery drills (issue 26): the runtime's journal at a drill's fault.
    "/api/v1/workflows/{workflow_id}/drill-journal": {"put"},
}


@pytest.fixture
def document(db):
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    return response.json()


def test_the_document_is_served_without_a_token_and_names_the_api(document):
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Recovery Console Agent API"
    assert document["info"]["version"] == "1"


def test_every_endpoint_of_the_contract_is_described(document):
    assert {path: set(ops) for path, ops in document["paths"].items()} == PATHS


def test_every_endpoint_requires_the_bearer_token(document):
    schemes = document["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    for path, ops in document["paths"].items():
        for op in ops.values():
            assert op["security"], path


def test_the_documented_status_codes_match_the_contract(document):
    paths = document["paths"]
    assert {"200", "201", "422", "401", "404"} <= set(paths["/api/v1/workflows"]["post"]["responses"])
    assert {"200", "201", "409"} <= set(paths["/api/v1/workflows/{workflow_id}/steps"]["post"]["responses"])
    assert {"201", "409"} <= set(paths["/api/v1/workflows/{workflow_id}/checkpoints"]["post"]["responses"])
    assert {"200", "201", "409", "413", "422"} <= set(
        paths["/api/v1/workflows/{workflow_id}/steps/batch"]["post"]["responses"]
    )


def test_the_schemas_name_the_contract_fields_and_enums(document):
    schemas = document["components"]["schemas"]
    step = schemas["StepIn"]
    assert set(step["required"]) == {"seq", "name", "kind", "status"}
    assert step["properties"]["kind"]["enum"] == ["model", "tool", "effect", "message"]
    assert step["properties"]["seq"]["minimum"] == 1
    assert schemas["CheckpointIn"]["properties"]["reason"]["enum"] == [
        "model_timeout",
        "tool_error",
        "rate_limit",
        "provider_change",
        "untrusted_output",
        "manual",
        "other",
    ]
    assert set(schemas["ErrorBody"]["properties"]) == {"code", "message", "field"}
    assert set(schemas["DecisionOut"]["properties"]["state"]["enum"]) == {"queued", "running", "succeeded", "failed"}


def test_the_interactive_docs_page_is_not_served(db):
    # It would load its scripts from a CDN that the target network cannot reach.
    assert Client().get("/api/v1/docs").status_code == 404


def test_the_api_enums_match_the_model_choices():
    from workflows import api
    from workflows.models import Action, Reason, Step, Workflow

    def literal(model, field):
        return list(model.model_fields[field].annotation.__args__)

    assert literal(api.StepIn, "kind") == list(Step.Kind.values)
    assert literal(api.StepIn, "status") == list(Step.Status.values)
    assert literal(api.CheckpointIn, "reason") == [r for r in Reason.values if r != Reason.HELD]  # console's own
    assert literal(api.DecisionOut, "action") == list(Action.values)
    assert literal(api.WorkflowOut, "status") == list(Workflow.Status.values)
