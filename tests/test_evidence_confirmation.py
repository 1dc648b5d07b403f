"""Bulk confirmation of unknown effects against a provider's evidence: lines match the unknown effects
exactly (only surrounding whitespace dropped; case, look-alike letters and invisible characters make another
id), the matching is shown before anything is confirmed, applying it confirms through the single decision's
rule and is audited, and a rollout then decides those members carrying the confirmations."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_worked_example
from workflows.models import (
    Checkpoint,
    Conflict,
    Decision,
    EffectConfirmation,
    Event,
    Evidence,
    EvidenceError,
    Incident,
    Rollout,
)
from workflows.models.evidence import read_lines, text_of, unconfirmed_effects

pytestmark = pytest.mark.django_db


def _incident(n=4, *, unknown=4):
    """``n`` members, the first ``unknown`` with an unknown refund (key "<external id>:issue_refund")."""
    agent, _ = make_agent()
    agent.incident_threshold = n
    agent.save()
    for i in range(n):
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending" if i < unknown else "committed"),
            reason="tool_error",
            detail=f"provider answered 502 for T-{i}",
        )
    return Incident.objects.get()


def _keys(incident):
    return sorted(e.key for e in unconfirmed_effects(incident))


def test_lines_match_exactly_and_look_alikes_are_reported_not_matched(alice):
    incident = _incident(4)
    k1, k2, k3, k4 = _keys(incident)
    lookalikes = {
        k2.replace("i", "\u0456", 1): "mixes",  # Cyrillic "і" in "issue_refund"
        k3.upper(): "case",
        k4 + "\u200b": "U+200B",  # a trailing zero-width space is not whitespace
    }
    text = "\n".join([f"  {k1}  ,  re_001 ", *lookalikes, "re_unknown_999", ""])
    evidence = Evidence.submit(incident, text=text, by=alice)
    result = evidence.matching()

    assert [(m.effect.key, m.line.reference) for m in result.matched] == [(k1, "re_001")]
    unmatched = {u.line.key: u for u in result.unmatched_lines}
    assert set(unmatched) == {*lookalikes, "re_unknown_999"}
    for seen, why in lookalikes.items():
        assert unmatched[seen].looks_like is not None and why in unmatched[seen].why, (seen, unmatched[seen].why)
    assert unmatched["re_unknown_999"].looks_like is None
    assert sorted(e.key for e in result.unmatched_effects) == [k2, k3, k4]
    assert not EffectConfirmation.objects.exists(), "reading the evidence confirms nothing"


def test_an_o_for_a_zero_is_another_reference():
    from workflows.models.evidence import Line, UnknownEffect, match

    effect = UnknownEffect(1, "ord-1042-0", "refund", "", "Refund")
    result = match([Line(1, "ord-1O42-O", "ord-1O42-O")], [effect])
    assert not result.matched and result.unmatched_lines[0].looks_like == effect
    assert "U+004F" in result.unmatched_lines[0].why


def test_full_width_forms_are_not_folded_either():
    from workflows.models.evidence import Line, UnknownEffect, match

    effect = UnknownEffect(1, "T-1042", "refund", "", "Refund")
    assert not match([Line(1, "T-\uff11\uff10\uff14\uff12", "x")], [effect]).matched
    assert match([Line(1, "T-1042", "x")], [effect]).matched


def test_a_header_a_reference_column_tabs_and_repeats():
    lines = read_lines("idempotency_key\treference\nA:1\tre_1\n\nB:2\t\nA:1\tre_1b\n")
    assert [(line.number, line.key, line.reference) for line in lines] == [
        (2, "A:1", "re_1"),
        (4, "B:2", "B:2"),
        (5, "A:1", "re_1b"),
    ]
    mixed = read_lines("A:1,re_1\nB:2\tre_2\nC:3;re_3\n")  # pasted from two exports: each line its separator
    assert [(line.key, line.reference) for line in mixed] == [("A:1", "re_1"), ("B:2", "re_2"), ("C:3", "re_3")]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"  \n\t\n", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"caf\xe9,re_1", "not UTF-8"),
        (b"A:1\x07,re_1", "control character"),
        (b"x" * 1_000_001, "at most"),
    ],
)
def test_bad_input_gets_a_clear_error(data, says):
    with pytest.raises(EvidenceError, match=says):
        read_lines(text_of(data))


def test_a_utf8_bom_from_a_spreadsheet_export_is_not_part_of_the_first_key():
    assert read_lines(text_of("\ufeffA:1,re_1\n".encode()))[0].key == "A:1"


def test_bad_evidence_is_not_kept(alice):
    incident = _incident(2)
    with pytest.raises(EvidenceError):
        Evidence.submit(incident, text="\n \n", by=alice)
    assert not Evidence.objects.exists()


def test_applying_confirms_the_matched_as_happened_with_their_reference_audited(alice):
    incident = _incident(3)
    k1, k2, k3 = _keys(incident)
    evidence = Evidence.submit(incident, text=f"{k1},re_001\n{k2},re_002\n", by=alice, filename="refunds.csv")
    preview = evidence.matching()
    evidence.apply(by=alice, digest=preview.digest)

    rows = {r.idempotency_key: r for r in EffectConfirmation.objects.all()}
    assert set(rows) == {k1, k2}
    assert (rows[k1].verdict, rows[k1].reference, rows[k1].confirmed_by) == ("happened", "re_001", alice)
    evidence.refresh_from_db()
    assert evidence.status == Evidence.Status.APPLIED and evidence.summary["matched"] == 2
    trail = Event.objects.get(subject=f"incident:{incident.pk}", verb=Event.Verb.EVIDENCE_APPLIED)
    assert trail.actor_user == alice and trail.data["unmatched_effects"] == 1 and trail.data["did_not_happen"] == 0
    member = Checkpoint.objects.get(pk=rows[k1].checkpoint_id)
    assert Event.objects.get(checkpoint=member, verb=Event.Verb.EFFECTS_CONFIRMED).data["confirmation_refs"] == {
        k1: "re_001"
    }
    assert _keys(incident) == [k3], "what is confirmed no longer waits"
    with pytest.raises(Conflict, match="applied already"):
        evidence.apply(by=alice, digest=preview.digest)
    assert EffectConfirmation.objects.count() == 2


def test_the_unmatched_are_did_not_happen_only_on_the_explicit_tick(alice):
    incident = _incident(3)
    k1, k2, k3 = _keys(incident)
    evidence = Evidence.submit(incident, text=f"{k1},re_001", by=alice)
    evidence.apply(by=alice, digest=evidence.matching().digest, did_not_happen=True)
    verdicts = dict(EffectConfirmation.objects.values_list("idempotency_key", "verdict"))
    assert verdicts == {k1: "happened", k2: "did_not_happen", k3: "did_not_happen"}


def test_a_matching_that_changed_since_the_preview_confirms_nothing(alice):
    incident = _incident(2)
    k1, k2 = _keys(incident)
    first = Evidence.submit(incident, text=f"{k1},re_001\n{k2},re_002", by=alice)
    seen = first.matching().digest
    other = Evidence.submit(incident, text=f"{k2},re_002", by=alice)  # someone confirms k2 meanwhile
    other.apply(by=alice, digest=other.matching().digest)
    with pytest.raises(Conflict, match="changed since the preview"):
        first.apply(by=alice, digest=seen)
    assert list(EffectConfirmation.objects.values_list("idempotency_key", flat=True)) == [k2]
    first.refresh_from_db()
    assert first.status == Evidence.Status.PREVIEWED


def test_a_rollout_decides_the_confirmed_members_carrying_their_confirmations(alice):
    incident = _incident(4, unknown=2)
    k1, k2 = _keys(incident)
    rollout = Rollout.start(
        incident, action="resume", by=alice, canary_percent=100, money_total={"EUR": "84.00"}
    )  # the two unknown refunds may be made again
    Rollout.advance_due(timezone.now())
    rollout.refresh_from_db()
    assert len(rollout.waves[0]["checkpoints"]) == 2, "the members with unknown effects wait"
    assert {c.pk for c, _ in rollout.waiting()} == {e.checkpoint_id for e in unconfirmed_effects(incident)}
    assert all("Confirm what happened" in why for _, why in rollout.waiting())

    evidence = Evidence.submit(incident, text=f"{k1},re_001\n{k2},re_002", by=alice)
    evidence.apply(by=alice, digest=evidence.matching().digest)
    Rollout.objects.filter(pk=rollout.pk).update(waves=[], next_at=timezone.now())  # judge afresh: a new wave
    Rollout.advance_due(timezone.now())
    confirmed = Decision.objects.filter(confirmations__has_key=k1).get()
    assert confirmed.confirmation_refs == {k1: "re_001"} and confirmed.status == Decision.Status.QUEUED
    assert Decision.objects.count() == 4 and not rollout.waiting()


def test_a_members_workbench_shows_what_the_evidence_confirmed_and_starts_from_it(client, alice, bob):
    """An operator deciding one member on its own workbench sees the bulk confirmation (verdict, reference, who,
    when, which evidence) and the form starts from it, instead of asking again as if nothing were known."""
    incident = _incident(2)
    k1, _k2 = _keys(incident)
    evidence = Evidence.submit(incident, text=f"{k1},re_001\n", by=alice)
    evidence.apply(by=alice, digest=evidence.matching().digest)
    confirmed = EffectConfirmation.objects.get(idempotency_key=k1)
    client.force_login(bob)

    html = client.get(f"/checkpoints/{confirmed.checkpoint_id}/").content.decode()

    shown = html.split('data-testid="evidence-confirmation"', 1)[1].split("</div>", 1)[0]
    assert "Happened" in shown and "re_001" in shown and "alice" in shown and f"evidence #{evidence.pk}" in shown
    assert 'value="happened" data-testid="confirm-happened"\n                checked' in html
    assert 'value="re_001"' in html
    unconfirmed = [c for c in incident.members.all() if c.pk != confirmed.checkpoint_id][0]
    assert 'data-testid="evidence-confirmation"' not in client.get(f"/checkpoints/{unconfirmed.pk}/").content.decode()


def test_the_members_a_rollout_waits_for_cost_the_same_queries_however_many_wait(alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def asked(n):
        agent, _ = make_agent(f"agent-{n}")
        agent.incident_threshold = n
        agent.save()
        for i in range(n):  # every member with an unknown refund: each waits for its confirmation
            make_checkpoint(make_worked_example(agent=agent, refund_status="pending"), reason="tool_error")
        incident = Incident.objects.get(agent=agent)
        rollout = Rollout.start(incident, action="resume", by=alice, money_total={"EUR": f"{42 * n}.00"})
        with CaptureQueriesContext(connection) as ctx:
            waiting = rollout.waiting()
        assert len(waiting) == n and all("Confirm what happened" in why for _, why in waiting)
        return len(ctx.captured_queries)

    # The incident page lists them: each member's confirmations and money were asked one by one before.
    assert asked(3) == asked(12)
