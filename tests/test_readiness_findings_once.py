"""Readiness names each gap once: the findings are deduplicated where they are made, and the verdict's
reasons never repeat them (issue 28, item 7)."""

from __future__ import annotations

from workflows import metrics, readiness


def _kind(**fields):
    shares = {
        slug: metrics.Share(slug, figure.label, 0, 0, figure.definition) for slug, figure in metrics.FIGURES.items()
    }
    values = {
        "kind": "refund",
        "filters": metrics.Filters.last(),
        "launched": 10,
        "degraded": 6,
        "interruptions": [],
        "effects": [],
        "tool_outputs": 0,
        "verified_outputs": 0,
        "promises": 1,
        "reasons": [],
        "median_decision_seconds": None,
        "shares": shares,
        "counts": {"blank_failure": 0, "lost_effect": 0, "duplicate_attempt": 0},
    }
    kind = readiness.KindReadiness(**{**values, **fields})
    kind.findings = readiness._findings(kind)
    return kind


def test_a_gap_two_checks_find_alike_is_one_finding():
    half_without_ref = readiness.EffectState("notify_customer", steps=12, committed=12, with_ref=6)
    kind = _kind(effects=[half_without_ref, half_without_ref])  # the same effect counted from two rows

    assert [f.text for f in kind.findings] == ["`refund`: 50% of `notify_customer` effects have no external ref"]


def test_blockers_come_first_and_the_verdict_does_not_repeat_them():
    kind = _kind(
        effects=[readiness.EffectState("notify_customer", steps=12, committed=12, with_ref=6)],
        promises=0,
        counts={"blank_failure": 1, "lost_effect": 0, "duplicate_attempt": 0},
    )

    assert [f.severity for f in kind.findings] == ["blocker", "blocker", "gap"]
    assert kind.verdict == "not ready"
    assert kind.verdict_reasons == []  # the findings are the reasons, listed once


def test_too_few_incidents_is_said_as_such_and_the_gaps_stay_findings():
    kind = _kind(degraded=2, promises=0)

    assert kind.verdict == "not enough data"
    assert kind.verdict_reasons == ["only 2 degraded workflows in the period; a review needs at least 5"]
    assert [f.text for f in kind.findings] == [
        "`refund`: no promise to the user recorded, so a resume cannot tell what was promised"
    ]
