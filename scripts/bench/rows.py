"""The rows: the same ~250 B steps for the console, psycopg and LangGraph."""

from __future__ import annotations

import json
import random


def step_report(rng: random.Random, wf: int, seq: int) -> dict:
    from demo.volume import step_payload

    data_in, data_out = step_payload(rng, wf, seq)
    return {
        "seq": seq,
        "name": "lookup_order",
        "kind": "tool",
        "status": "committed",
        "input": json.loads(data_in),
        "output": json.loads(data_out),
        "verified": True,
    }


STEP_COLUMNS = (
    "workflow_id",
    "seq",
    "name",
    "kind",
    "status",
    "input",
    "output",
    "verified",
    "promise",
    "idempotency_key",
    "external_ref",
    "created_at",
    "updated_at",
    "attempts",
    "history",
)
INSERT_STEP = (
    f"INSERT INTO workflows_step ({', '.join(STEP_COLUMNS)}) "  # noqa: S608 - constant
    f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now(), now(), 1, '[]')"
)


def step_row(workflow_id: int, report: dict) -> tuple:
    from psycopg.types.json import Jsonb

    return (
        workflow_id,
        report["seq"],
        report["name"],
        report["kind"],
        report["status"],
        Jsonb(report["input"]),
        Jsonb(report["output"]),
        report["verified"],
        None,
        None,
        None,
    )


def made_reports(seed: int, wf: int, count: int = 500) -> list[dict]:
    rng = random.Random(seed)
    return [step_report(rng, wf, seq) for seq in range(1, count + 1)]
