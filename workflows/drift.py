"""The drift finder: a structural diff of replayed outputs against the recording, and the replay's safety check.

Pure functions over JSON values, so the Celery task, the results endpoint and the
tests share one definition of "drift" and of "a replay executed an effect".

A small JSON diff rather than a general object-diff library: the values are
JSON only, the paths must read as the operator sees them (``output.items.2.amount``)
and be matched by the admins' glob-style ignore rules, and numbers written
``42.0`` and ``42`` are the same JSON number.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any, TypedDict

from .shapes import Json, JsonObject

MAX_DIFFERENCES = 50  # per step: enough to explain, bounded for a 1 MiB output
MAX_SHOWN_CHARS = 120


class DifferenceRecord(TypedDict):
    """A difference as a replay's comparison keeps it (``ReplayRun.comparison``)."""

    path: str
    change: str
    recorded: Json
    replayed: Json


@dataclass(frozen=True)
class Difference:
    path: str  # "output.amount", "output.items.2"
    change: str  # "changed" | "added" | "removed" | "type"
    recorded: Json = None
    replayed: Json = None

    def as_dict(self) -> DifferenceRecord:
        return DifferenceRecord(path=self.path, change=self.change, recorded=self.recorded, replayed=self.replayed)

    def sentence(self) -> str:
        if self.change == "added":
            return f"{self.path} added: {shown(self.replayed)}"
        if self.change == "removed":
            return f"{self.path} removed (was {shown(self.recorded)})"
        return f"{self.path} {shown(self.recorded)} → {shown(self.replayed)}"


def shown(value: Json) -> str:
    """A value as an operator reads it in one line: strings bare, everything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _same_scalar(a: Json, b: Json) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def diff(recorded: Json, replayed: Json, path: str = "output") -> list[Difference]:
    """Every difference between two JSON values, depth first, paths in dotted form."""
    found: list[Difference] = []

    def walk(a: Json, b: Json, at: str) -> None:
        if len(found) >= MAX_DIFFERENCES:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in list(a) + [k for k in b if k not in a]:
                sub = f"{at}.{key}"
                if key not in b:
                    found.append(Difference(sub, "removed", recorded=a[key]))
                elif key not in a:
                    found.append(Difference(sub, "added", replayed=b[key]))
                else:
                    walk(a[key], b[key], sub)
        elif isinstance(a, list) and isinstance(b, list):
            for i in range(max(len(a), len(b))):
                sub = f"{at}.{i}"
                if i >= len(b):
                    found.append(Difference(sub, "removed", recorded=a[i]))
                elif i >= len(a):
                    found.append(Difference(sub, "added", replayed=b[i]))
                else:
                    walk(a[i], b[i], sub)
        elif isinstance(a, dict | list) or isinstance(b, dict | list):
            found.append(Difference(at, "type", recorded=a, replayed=b))
        elif not _same_scalar(a, b):
            found.append(Difference(at, "changed", recorded=a, replayed=b))

    walk(recorded, replayed, path)
    return found


def ignored(path: str, patterns: list[str]) -> bool:
    """An admin's rule matches the path as a glob (``output.*_at``, ``*.request_id``)."""
    return any(fnmatchcase(path, p) or fnmatchcase(path, f"output.{p}") for p in patterns)


@dataclass
class StepComparison:
    seq: int
    name: str
    kind: str
    recorded: Json
    replayed: Json
    verdict: str = "same"  # same | diverged | downstream | missing | violation
    differences: list[DifferenceRecord] = field(default_factory=list)
    ignored: list[DifferenceRecord] = field(default_factory=list)
    note: str = ""


@dataclass
class Comparison:
    steps: list[StepComparison]
    first_divergent_seq: int | None = None
    explanation: str = ""
    violations: list[str] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)

    def as_json(self) -> list[JsonObject]:
        return [asdict(step) for step in self.steps]


def canonical(value: Json) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compare(
    recorded_steps: list[dict[str, Any]],
    results: list[dict[str, Any]],
    *,
    rules: dict[str, list[str]] | None = None,
    from_seq: int,
    to_seq: int,
) -> Comparison:
    """Compare a replay's results to the recorded steps of ``from_seq..to_seq``.

    ``recorded_steps``: the steps as ``Step.as_dict()``. ``results``: ``[{"seq", "output",
    "effects"?}]`` as the runtime returned them. ``rules``: step kind (or ``"*"``) -> ignored globs.
    Effect steps are never drift: any difference there, a result that reports effects, or a result
    outside the range is a **safety violation** (the runtime may have executed something).
    """
    rules = rules or {}
    by_seq: dict[int, dict[str, Any]] = {}
    violations: list[str] = []
    for result in results:
        seq = result["seq"]
        if not from_seq <= seq <= to_seq:
            violations.append(f"The runtime reported step {seq}, outside the replayed range {from_seq}..{to_seq}.")
            continue
        by_seq[seq] = result
    comparison = Comparison(steps=[], violations=violations)
    for step in recorded_steps:
        seq, kind = step["seq"], step["kind"]
        replayed = by_seq.get(seq)
        row = StepComparison(
            seq=seq,
            name=step["name"],
            kind=kind,
            recorded=step["output"],
            replayed=replayed.get("output") if replayed else None,
        )
        comparison.steps.append(row)
        if replayed is None:
            row.verdict, row.note = "missing", "no result for this step"
            comparison.missing.append(seq)
            continue
        if replayed.get("effects"):
            row.verdict = "violation"
            row.note = f"the runtime reported {len(replayed['effects'])} new effect(s) during a replay"
            violations.append(f"Step {seq} `{step['name']}`: {row.note}: {shown(replayed['effects'])}.")
        differences = diff(step["output"], replayed.get("output"))
        if kind == "effect":
            row.differences = [d.as_dict() for d in differences]
            if differences:
                row.verdict = "violation"
                row.note = "an effect's replayed output differs from the recording: it may have been executed"
                violations.append(
                    f"Step {seq} `{step['name']}` (effect): the replayed output differs from the "
                    f"recording ({differences[0].sentence()}); replay must return the recorded "
                    "output and never execute an effect."
                )
            continue
        patterns = rules.get(kind, []) + rules.get("*", [])
        kept = [d for d in differences if not ignored(d.path, patterns)]
        row.ignored = [d.as_dict() for d in differences if d not in kept]
        row.differences = [d.as_dict() for d in kept]
        if kept and row.verdict != "violation":
            if comparison.first_divergent_seq is None:
                comparison.first_divergent_seq = seq
                row.verdict = "diverged"
                more = f" (and {len(kept) - 1} more field{'s' if len(kept) > 2 else ''})" if len(kept) > 1 else ""
                comparison.explanation = f"step {seq} `{step['name']}`: {kept[0].sentence()}{more}"
            else:
                row.verdict = "downstream"
                row.note = f"downstream of step {comparison.first_divergent_seq}"
    return comparison
