"""Grouping checkpoints into incidents: the fingerprint of a detail, the signature, the window and the
threshold, and the operator's own grouping (open from a selection, merge, take one out), all audited."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_step, make_worked_example, make_workflow
from workflows.models import Checkpoint, Event, Incident
from workflows.models.incidents import fingerprint, normalised_detail

# Templates of an agent's detail; {v} slots take a different random value in every checkpoint.
TEMPLATES = [
    "model gpt timed out after {secs}s (request {uuid})",
    "Refund {amount} for ticket {ticket} failed: provider answered 502 at {stamp}",
    "tool lookup_order returned garbage for order {order} trace={hexid}",
    "rate limited: retry after {secs} seconds, bucket {hexid}",
    "payment of {money} to customer {customer} declined, code {code}",
    # Ids whose letters and digits interleave anywhere: one id each, however its digits fall.
    "model call {reqid} failed: 503 from upstream {span}",
]


def _values(rng: random.Random) -> dict[str, str]:
    return {
        "secs": str(rng.randrange(1, 900)),
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
        "amount": f"{rng.randrange(1, 99999) / 100:.2f} {rng.choice(['EUR', 'USD', 'GBP'])}",
        "ticket": f"T-{rng.randrange(1, 10**6)}",
        "stamp": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
        f"{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z",
        "order": f"ord_{rng.randrange(10**9)}",
        "hexid": f"{rng.getrandbits(64):016x}" if rng.random() < 0.5 else hex(rng.getrandbits(32)),
        "money": rng.choice(["€", "$", "£"]) + f"{rng.randrange(1, 5000)},{rng.randrange(100):02d}",
        "customer": f"C{rng.randrange(10**7)}",
        "code": str(rng.randrange(100, 600)),
        "reqid": "req_" + "".join(rng.choice("0123456789abcdef") for _ in range(rng.randrange(6, 24))),
        "span": rng.choice(["sp", "span-", "x"]) + "".join(rng.choice("0123456789abcdefghkz") for _ in range(12)) + "9",
    }


def test_details_that_differ_only_in_their_variables_share_a_fingerprint(rng):
    for template in TEMPLATES:
        prints = {fingerprint(template.format(**_values(rng))) for _ in range(40)}
        assert len(prints) == 1, (template, {normalised_detail(template.format(**_values(rng))) for _ in range(5)})


def test_details_of_different_failures_never_share_a_fingerprint(rng):
    samples = {template: fingerprint(template.format(**_values(rng))) for template in TEMPLATES}
    assert len(set(samples.values())) == len(TEMPLATES)
    # Words matter, variables do not: one word changed is another failure.
    assert fingerprint("provider answered 502 for ticket T-1") != fingerprint("provider refused 502 for ticket T-1")
    assert fingerprint("tool lookup_order timed out") != fingerprint("tool lookup_customer timed out")


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("timeout after 30s on 2026-12-01T13:09:57Z", "timeout after 31s on 2026-11-30 08:00:01+01:00"),
        ("request 123e4567-e89b-12d3-a456-426614174000 failed", "request 00000000-0000-4000-8000-000000000001 failed"),
        ("digest 9f86d081884c7d65 mismatch", "digest 0xdeadbeef mismatch"),
        ("refund €42.00 failed", "refund 1,234.56 EUR failed"),
        ("order ord_99 stuck at 12:01", "order ord_123456 stuck at 23:59:59"),
        ("model call req_1a2b3c4d5e6f failed", "model call req_a1b2c3d4e5f6a7 failed"),
    ],
)
def test_each_kind_of_variable_is_normalised_away(one, other):
    assert fingerprint(one) == fingerprint(other), (normalised_detail(one), normalised_detail(other))


def test_plain_words_that_look_like_hex_are_kept():
    assert fingerprint("cafe deadbeef added") != fingerprint("cafe feedface added")


# --- forming an incident ---


def _failing(agent, n, *, detail="provider answered 502 for ticket {i}", kind="refund", reason="tool_error", now=None):
    return [
        make_checkpoint(
            make_worked_example(agent=agent) if kind == "refund" else _kind_workflow(agent, kind),
            reason=reason,
            detail=detail.format(i=f"T-{9000 + i}"),
            now=now,
        )
        for i in range(n)
    ]


def _kind_workflow(agent, kind):
    workflow = make_workflow(agent, kind=kind)
    make_step(workflow, 1, "read_ticket")
    make_step(workflow, 2, "decide_refund", "model")
    make_step(workflow, 3, "issue_refund", "effect", input={"amount": "42.00", "currency": "EUR"}, external_ref="R")
    return workflow


@pytest.mark.django_db
def test_five_checkpoints_with_one_signature_become_one_incident_and_later_ones_join():
    agent, _ = make_agent()
    first = _failing(agent, 4)
    assert not Incident.objects.exists()
    fifth = _failing(agent, 1)[0]
    incident = Incident.objects.get()
    assert set(incident.members.values_list("pk", flat=True)) == {c.pk for c in first} | {fifth.pk}
    assert incident.agent == agent and incident.kind == "refund" and incident.reason == "tool_error"
    assert incident.step_name == "after issue_refund"
    assert "ticket <id>" in incident.detail_pattern
    sixth = _failing(agent, 1)[0]
    assert Incident.objects.count() == 1 and sixth.incident_id == incident.pk
    assert Event.objects.filter(subject=f"incident:{incident.pk}", verb=Event.Verb.INCIDENT_OPENED).count() == 1
    assert Event.objects.filter(verb=Event.Verb.INCIDENT_JOINED, data__incident=incident.pk).count() == 6


@pytest.mark.django_db
def test_what_differs_in_agent_kind_reason_step_or_detail_does_not_group():
    agent, _ = make_agent()
    other_agent, _ = make_agent()
    _failing(agent, 2)
    _failing(other_agent, 1)
    _failing(agent, 1, kind="billing")
    _failing(agent, 1, reason="model_timeout")
    _failing(agent, 1, detail="provider refused ticket {i}")
    workflow = make_worked_example(agent=agent)
    make_step(workflow, 4, "write_ticket_note", "effect", status="committed", external_ref="N-1")
    make_checkpoint(workflow, reason="tool_error", detail="provider answered 502 for ticket T-1", at_seq=5)
    assert Checkpoint.objects.values("signature").distinct().count() == 6
    assert not Incident.objects.exists()


@pytest.mark.django_db
def test_checkpoints_outside_the_agents_window_do_not_count():
    agent, _ = make_agent()
    agent.incident_window_minutes, agent.incident_threshold = 10, 3
    agent.save()
    long_ago = timezone.now() - timedelta(minutes=11)
    _failing(agent, 2, now=long_ago)
    _failing(agent, 2)
    assert not Incident.objects.exists()
    _failing(agent, 1)
    assert Incident.objects.get().members.count() == 3


@pytest.mark.django_db
def test_a_resolved_incident_lets_the_next_burst_form_a_new_one(alice):
    agent, _ = make_agent()
    agent.incident_threshold = 2
    agent.save()
    _failing(agent, 2)
    first = Incident.objects.get()
    assert first.set_status(Incident.Status.RESOLVED, by=alice)
    # Its members stay with it (they are its history); the next burst counts from zero.
    _failing(agent, 1)
    assert not Incident.objects.unresolved().exists()
    _failing(agent, 1)
    second = Incident.objects.unresolved().get()
    assert second.pk != first.pk and second.members.count() == 2 and first.members.count() == 2


@pytest.mark.django_db
def test_a_threshold_of_zero_never_groups():
    agent, _ = make_agent()
    agent.incident_threshold = 0
    agent.save()
    _failing(agent, 6)
    assert not Incident.objects.exists()


# --- by hand ---


@pytest.mark.django_db
def test_an_operator_opens_an_incident_from_a_selection_and_it_is_audited(alice):
    agent, _ = make_agent()
    picked = _failing(agent, 2) + _failing(agent, 1, reason="model_timeout")
    incident = Incident.open_from(picked, by=alice, title="Payments provider flapping")
    assert incident.title == "Payments provider flapping" and incident.opened_by == alice
    assert incident.signature == ""  # mixed reasons: no signature for later arrivals to match
    assert incident.members.count() == 3
    opened = Event.objects.get(subject=f"incident:{incident.pk}", verb=Event.Verb.INCIDENT_OPENED)
    assert opened.actor_user == alice and opened.data["by_hand"]


@pytest.mark.django_db
def test_a_selection_sharing_one_signature_lets_later_arrivals_join(alice):
    agent, _ = make_agent()
    incident = Incident.open_from(_failing(agent, 2), by=alice)
    assert incident.signature
    later = _failing(agent, 1)[0]
    assert later.incident_id == incident.pk


@pytest.mark.django_db
def test_merging_moves_every_member_and_resolves_the_other(alice):
    a, _ = make_agent()
    one = Incident.open_from(_failing(a, 2), by=alice)
    two = Incident.open_from(_failing(a, 3, reason="rate_limit"), by=alice)
    assert one.merge(two, by=alice)
    two.refresh_from_db()
    assert one.members.count() == 5 and two.members.count() == 0
    assert two.status == Incident.Status.RESOLVED and two.merged_into == one
    assert not one.merge(two, by=alice), "a resolved incident cannot be merged again"
    assert Event.objects.filter(
        subject=f"incident:{one.pk}", verb=Event.Verb.INCIDENT_MERGED, actor_user=alice
    ).exists()
    assert Event.objects.filter(subject=f"incident:{two.pk}", verb=Event.Verb.INCIDENT_MERGED).exists()


@pytest.mark.django_db
def test_taking_a_checkpoint_out_is_audited_and_happens_once(alice):
    agent, _ = make_agent()
    incident = Incident.open_from(_failing(agent, 3), by=alice)
    member = incident.members.first()
    assert incident.remove(member, by=alice)
    assert member.incident_id is None and incident.members.count() == 2
    assert not incident.remove(member, by=alice)
    assert Event.objects.filter(checkpoint=member, verb=Event.Verb.INCIDENT_REMOVED, actor_user=alice).count() == 1


@pytest.mark.django_db
def test_a_member_selected_into_a_new_incident_leaves_its_old_one_on_the_record(alice):
    agent, _ = make_agent()
    old = Incident.open_from(_failing(agent, 3), by=alice)
    moved = old.members.first()
    new = Incident.open_from([moved], by=alice)
    moved.refresh_from_db()
    assert moved.incident_id == new.pk and old.members.count() == 2
    assert Event.objects.filter(
        subject=f"incident:{old.pk}", verb=Event.Verb.INCIDENT_REMOVED, data__to_incident=new.pk
    ).exists()


@pytest.mark.django_db
def test_status_moves_through_the_transition_table(alice):
    agent, _ = make_agent()
    incident = Incident.open_from(_failing(agent, 1), by=alice)
    assert incident.set_status(Incident.Status.MITIGATING, by=alice)
    assert incident.set_status(Incident.Status.RECOVERING, by=alice)
    assert incident.set_status(Incident.Status.RESOLVED, by=alice)
    assert incident.resolved_at is not None
    verbs = Event.objects.filter(subject=f"incident:{incident.pk}", verb=Event.Verb.INCIDENT_STATUS)
    assert [(e.data["from"], e.data["to"]) for e in verbs] == [
        ("open", "mitigating"),
        ("mitigating", "recovering"),
        ("recovering", "resolved"),
    ]
