"""Schemathesis over every operation of the agent API, against a live server (finding 9 of issue 12).

The OpenAPI document at /api/v1/openapi.json is the contract generated clients and fuzzers trust. This
run generates requests from it — valid ones, and ones that break it on purpose — for every operation,
sends them with a real agent token to a live server whose ids point at real workflows, checkpoints and a
replay, and fails on any 5xx and any disagreement schemathesis can see: a valid request refused, an
invalid one accepted, a status code or a response body the document does not describe, a wrong content
type. Bounded (SCHEMATHESIS_MAX_EXAMPLES per operation and phase, 12 by default) and seeded: the seed is
printed, and SCHEMATHESIS_SEED=<seed> replays the run.

Two rules cannot be written in JSON Schema, and the document states them in words; this test applies them
to the valid requests it generates, as any client must:
- ``owner`` has ``format: username``: a username of an active operator or admin. The format's strategy
  draws from this console's real users.
- each ``seq`` at most once per batch: a valid batch's repeated seqs are renumbered.
"""

from __future__ import annotations

import os
import random
from datetime import timedelta
from typing import Any, cast

import jsonschema
import pytest
import requests
import schemathesis
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.core.parameters import ParameterLocation

from tests.helpers import make_agent, make_step, make_user, make_worked_example
from workflows.api import api
from workflows.api.schemas import MAX_SEQ
from workflows.models import Checkpoint, ReplayRun

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SEED = int(os.environ.get("SCHEMATHESIS_SEED") or random.SystemRandom().randrange(2**32))
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES") or 12)
OWNERS = ("alice", "adam")  # an operator and an admin: who may own a workflow
schemathesis.openapi.format("username", st.sampled_from(OWNERS))

EXERCISED: set[str] = set()  # operation labels that received at least one request


def _fixtures(live_url: str) -> dict[str, str]:
    """Realistic objects for every id the paths take: each writing operation gets its own workflow, so
    finishing one does not turn every later step report into 409 workflow_finished."""
    alice = make_user("alice")
    make_user("adam", role="admin")
    make_user("tess", role="tpm")  # exists, and may not own a workflow
    agent, token = make_agent("schemathesis-bot", owner=alice)
    agent.advertise(["replay", "fork"], runtime_version="bot/1.0", kinds=["refund"])
    agent.replay_url = f"{live_url}/nowhere"  # never called: the replay below is already running
    agent.save()

    def running(name: str) -> str:
        workflow = make_worked_example(agent=agent, owner=alice)
        make_step(workflow, 4, f"{name}_note", "effect", status="pending", input={"note": "refund issued"})
        return str(workflow.pk)

    paused = make_worked_example(agent=agent, owner=alice)
    checkpoint = Checkpoint.open_for(
        paused,
        reason="model_timeout",
        detail="the model timed out",
        at_seq=3,
        state={"remaining": ["write_ticket_note"]},
        plan=None,
        actor=agent,
    )
    replay = ReplayRun.objects.create(
        workflow=paused,
        agent=agent,
        from_seq=1,
        to_seq=3,
        requested_by=alice,
        status=ReplayRun.Status.RUNNING,
        started_at=timezone.now(),
        deadline_at=timezone.now() + timedelta(hours=1),
    )
    return {
        "token": token,
        "read": str(paused.pk),
        "steps": running("steps"),
        "batch": running("batch"),
        "checkpoints": running("checkpoints"),
        "finish": running("finish"),
        "checkpoint_id": str(checkpoint.pk),
        "replay_id": str(replay.replay_id),
    }


# The document the server serves, read from the app at collection time so that pytest names one test per
# operation; test_the_live_server_serves_this_document checks the server answers the same. (The lazy
# from_fixture loader would fetch it from the live server, but fails under pytest 9.2.)
DOCUMENT = api.get_openapi_schema()
schema = schemathesis.openapi.from_dict(
    DOCUMENT,
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none", "mode": "all"},
            # Random valid and invalid examples for every operation. The coverage phase (boundaries, each
            # constraint broken in turn) takes minutes over all of them on a 2-core machine: the table of
            # test_the_document_and_the_server_agree_on_each_rule below makes the known edges deterministic.
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": False},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": False},
            },
            # Invalid data must be refused: schemathesis's list plus 413, the answer to a body over
            # API_MAX_BODY_BYTES (a generated batch of 3 MB got it, seed 1406866710) — a refusal too.
            # Valid examples only for the replay results: schemathesis 4.32.5 cannot negate an array of
            # StorableJSON (recursive anyOf) and stops with "Cannot generate an array with 1 demanded elements"
            # (InvalidSchema, seed 2502276077). Its invalid bodies are the replay rows of EDGES below.
            "operations": [{"include-path": "/api/v1/replays/{replay_id}/results", "generation": {"mode": "positive"}}],
            "checks": {
                "negative_data_rejection": {
                    "expected-statuses": [
                        "400",
                        "401",
                        "403",
                        "404",
                        "405",
                        "406",
                        "409",
                        "413",
                        "415",
                        "422",
                        "428",
                        "429",
                        "5xx",
                    ]
                }
            },
        }
    ),
)


@pytest.fixture
def agent_api(live_server, settings):
    settings.API_RATE_LIMIT_PER_MINUTE = 1_000_000  # the run sends a few hundred requests a minute
    print(f"schemathesis seed {SEED} (SCHEMATHESIS_SEED={SEED} replays it), {MAX_EXAMPLES} examples a phase")
    return live_server.url, _fixtures(live_server.url)


# Which object each operation's ids name: every writing operation has a workflow of its own.
WORKFLOW_OF = {
    "POST /api/v1/workflows/{workflow_id}/steps": "steps",
    "POST /api/v1/workflows/{workflow_id}/steps/batch": "batch",
    "POST /api/v1/workflows/{workflow_id}/checkpoints": "checkpoints",
    "POST /api/v1/workflows/{workflow_id}/finish": "finish",
}


def _real_ids(case: Any, ids: dict[str, str]) -> None:
    """Point a valid path at real objects; an id generated to be invalid stays (it must answer 404)."""
    if not case.path_parameters:
        return
    component = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
    if component is not None and not component.mode.is_positive:
        return
    real = {
        "workflow_id": ids[WORKFLOW_OF.get(case.operation.label, "read")],
        "checkpoint_id": ids["checkpoint_id"],
        "replay_id": ids["replay_id"],
    }
    case.path_parameters = {name: real[name] for name in case.path_parameters}


def _seq_value(seq: Any) -> int | None:
    """The seq the server reads: an int, or a float with no fractional part (1.0 is seq 1, as JSON allows)."""
    if isinstance(seq, bool):
        return None
    if isinstance(seq, int):
        return seq
    if isinstance(seq, float) and seq.is_integer():
        return int(seq)
    return None


def _each_seq_once(case: Any) -> None:
    """A valid batch names each seq once (422 duplicate_seq otherwise): renumber repeats past the largest.
    Repeats are found by value, so 1 and 1.0 are the same seq (seed 2502276077 drew both)."""
    steps = case.body.get("steps") if isinstance(case.body, dict) else None
    if not isinstance(steps, list):
        return
    values = [_seq_value(step.get("seq")) for step in steps if isinstance(step, dict)]
    seen: set[int] = set()
    free = max((v for v in values if v is not None), default=0)
    for step in steps:
        seq = _seq_value(step.get("seq")) if isinstance(step, dict) else None
        if seq is None:
            continue
        if seq in seen:
            free = free + 1 if free < MAX_SEQ else 1
            while free in seen:
                free += 1
            step["seq"] = seq = free
        seen.add(seq)


@schema.parametrize()
# The objects of agent_api are made once per operation and live through its examples, as a real agent's do.
@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_operation_answers_as_its_schema_says(case, agent_api):
    base_url, ids = agent_api
    EXERCISED.add(case.operation.label)
    _real_ids(case, ids)
    if case.meta is not None and case.meta.generation.mode.is_positive and case.path.endswith("/batch"):
        _each_seq_once(case)
    case.call_and_validate(base_url=base_url, headers={"Authorization": f"Bearer {ids['token']}"})


STEP = {"seq": 5, "name": "write_ticket_note", "kind": "tool", "status": "committed"}
EFFECT = {**STEP, "kind": "effect", "idempotency_key": "T-1042:note"}
PLAN_STEP = {"name": "issue_refund", "kind": "effect", "amount": "42.00", "currency": "EUR"}
# (operation, body): each of the edges where the document and the server once disagreed, and their neighbours.
EDGES = {
    "owner: an operator": ("workflows", {"external_id": "E-1", "kind": "refund", "title": "t", "owner": "alice"}),
    "owner: unknown": ("workflows", {"external_id": "E-2", "kind": "refund", "title": "t", "owner": "nobody"}),
    "owner: a TPM": ("workflows", {"external_id": "E-3", "kind": "refund", "title": "t", "owner": "tess"}),
    "seq: 16777215.0": ("steps", {**STEP, "seq": 16777215.0}),
    "seq: 5.5": ("steps", {**STEP, "seq": 5.5}),
    "seq: 2147483648.0": ("steps", {**STEP, "seq": 2147483648.0}),
    "at_seq: 3.0": ("checkpoints", {"reason": "manual", "at_seq": 3.0}),
    "effect without idempotency_key": ("steps", {**STEP, "kind": "effect"}),
    "effect with idempotency_key": ("steps", EFFECT),
    "effect in a batch without a key": ("batch", {"steps": [{**STEP, "kind": "effect"}]}),
    "NUL in a key of input": ("steps", {**STEP, "input": {"a\x00b": 1}}),
    "NUL in a key of an unknown field": ("steps", {**STEP, "x\x00": 1}),
    "NUL in a nested string": ("steps", {**STEP, "output": [{"note": "a\x00"}]}),
    "NUL in a context key": (
        "workflows",
        {"external_id": "E-4", "kind": "refund", "title": "t", "context": {"k\x00": "v"}},
    ),
    "NUL in a name": ("steps", {**STEP, "name": "a\x00"}),
    "plan: amount without currency": ("checkpoints", {"reason": "manual", "plan": [{**PLAN_STEP, "currency": None}]}),
    "plan: money on a model step": ("checkpoints", {"reason": "manual", "plan": [{**PLAN_STEP, "kind": "model"}]}),
    "plan: amount 1e5 as a string": ("checkpoints", {"reason": "manual", "plan": [{**PLAN_STEP, "amount": "1e5"}]}),
    "plan: amount 1e18": ("checkpoints", {"reason": "manual", "plan": [{**PLAN_STEP, "amount": 1e18}]}),
    "plan: amount 120.5": ("checkpoints", {"reason": "manual", "plan": [{**PLAN_STEP, "amount": 120.5}]}),
    "replay: neither results nor error": ("results", {"runtime_version": "bot/2"}),
    "replay: an empty error": ("results", {"error": ""}),
    "replay: an error": ("results", {"error": "model v3 is retired"}),
    "replay: results not a list": ("results", {"results": {"seq": 1}}),
    "replay: a result without seq": ("results", {"results": [{"output": {"ok": True}}]}),
    "replay: seq 0": ("results", {"results": [{"seq": 0}]}),
    "replay: seq 1.5": ("results", {"results": [{"seq": 1.5}]}),
    "replay: effects not a list": ("results", {"results": [{"seq": 1, "effects": "refund"}]}),
    "replay: NUL in an effect": ("results", {"results": [{"seq": 1, "effects": [{"note": "a\x00"}]}]}),
    "replay: NUL in an output key": ("results", {"results": [{"seq": 1, "output": {"k\x00": 1}}]}),
    "replay: NUL in an unknown field's key": ("results", {"results": [{"seq": 1, "x\x00": 1}]}),
    "replay: an error of 2001 characters": ("results", {"error": "e" * 2001}),
    "replay: a runtime version of 201 characters": ("results", {"error": "x", "runtime_version": "v" * 201}),
}
OPERATIONS = {
    "workflows": ("/api/v1/workflows", "WorkflowIn"),
    "steps": ("/api/v1/workflows/{workflow_id}/steps", "StepIn"),
    "batch": ("/api/v1/workflows/{workflow_id}/steps/batch", "StepBatchIn"),
    "checkpoints": ("/api/v1/workflows/{workflow_id}/checkpoints", "CheckpointIn"),
    "results": ("/api/v1/replays/{replay_id}/results", "ReplayResultsIn"),
}


def _document_accepts(component: str, body: Any) -> bool:
    formats = jsonschema.FormatChecker()
    formats.checks("username")(lambda name: not isinstance(name, str) or name in OWNERS)
    root = {"$ref": f"#/components/schemas/{component}", "components": DOCUMENT["components"]}
    return jsonschema.Draft202012Validator(root, format_checker=formats).is_valid(body)


def test_the_document_and_the_server_agree_on_each_rule(agent_api):
    """Deterministic: for each edge the fuzzing above may or may not draw, the document's verdict (JSON
    Schema, with format username checked against the real users) is the server's (refused means 422)."""
    base_url, ids = agent_api
    disagreements = []
    for edge, (operation, body) in EDGES.items():
        path, component = OPERATIONS[operation]
        url = base_url + path.format(
            workflow_id=ids["checkpoints" if operation == "checkpoints" else "steps"], replay_id=ids["replay_id"]
        )
        response = requests.post(
            url, json=cast(dict[str, Any], body), headers={"Authorization": f"Bearer {ids['token']}"}, timeout=10
        )
        assert response.status_code in (200, 201, 409, 422), (edge, response.status_code, response.text[:300])
        server, document = response.status_code != 422, _document_accepts(component, body)
        if server != document:
            disagreements.append(
                f"{edge}: the document {'accepts' if document else 'refuses'} it, the server "
                f"answers {response.status_code} {response.text[:200]}"
            )
    assert not disagreements, "\n".join(disagreements)


def test_the_live_server_serves_this_document(live_server):
    assert requests.get(f"{live_server.url}/api/v1/openapi.json", timeout=10).json() == DOCUMENT


def test_the_run_above_reached_every_operation_of_the_document():
    operations = {f"{method.upper()} {path}" for path, ops in DOCUMENT["paths"].items() for method in ops}
    assert len(operations) == 12
    assert operations == EXERCISED
