"""A rollout's wave decided together (``workflows/models/wave_decisions.py``) leaves what deciding each member
on its own leaves: the same decisions, checkpoints, workflows, audit events, Slack messages behind and hand-over
to the broker; and a member that moved meanwhile is passed over as the single path's Conflict passes it over.

Two incidents made alike, one decided member by member (``Rollout._decide``, the single path), the other
together (``decide_members``); their rows compared member by member, ids and instants left out."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from tests.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM
from workflows.models import Checkpoint, Decider, Decision, Event, Incident, Rollout, SlackMessage, SlackWorkspace
from workflows.models.base import moves_at_once
from workflows.models.rollouts import WaveContext
from workflows.models.wave_decisions import decide_members

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]  # the wave is decided together on PostgreSQL

SIZE = 6


@pytest.fixture
def slack(db):
    """A connected workspace: each member's opening posts its message, which a decision puts behind."""
    workspace = SlackWorkspace(team_id=TEAM, name="Acme", default_channel=CHANNEL)
    workspace.bot_token, workspace.signing_secret = BOT_TOKEN, SIGNING_SECRET
    workspace.save()
    return workspace


def incident_of(*, resume_url: str, alice: Any, bob: Any) -> Incident:
    """SIZE members of one agent: the first claimed by alice (who starts the rollouts), the second by bob (it
    waits: he holds it), the third with a refund whose outcome is unknown (it waits for its confirmation)."""
    agent, _ = make_agent(resume_url=resume_url, allow_plain_http=True)
    agent.incident_threshold = SIZE
    agent.save()
    members = [
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending" if i == 2 else "committed"),
            reason="tool_error",
            detail=f"provider answered 502 for T-{i}",
        )
        for i in range(SIZE)
    ]
    members[0].claim(by=alice)
    members[1].claim(by=bob)
    return Incident.objects.get(members=members[0])


def open_members(incident: Incident) -> list[Checkpoint]:
    """The members as a wave reads them (``Rollout._send_wave``)."""
    return list(incident.members.open().select_related("workflow__agent", "runbook_version").order_by("due_at", "pk"))


def decided(rollout: Rollout, *, together: bool, capture: Any) -> tuple[list[int], list[int]]:
    """The incident's open members decided as a wave decides them, one by one or together: the members decided,
    and the decisions the commit hands to the broker."""
    context = WaveContext()
    members = context.read(open_members(rollout.incident))
    with moves_at_once(), capture() as callbacks:
        if together:
            ids = decide_members(rollout, members, context, SIZE)
        else:
            ids = [c.pk for c in members if rollout._decide(c, context)]
    handed = [pk for callback in callbacks for pk in _decision_ids(callback)]
    return ids, handed


def _decision_ids(callback: Any) -> list[int]:
    """The decision ids a commit hook hands over: ``hand_to_broker(pk)``, ``hand_many_to_broker([pk, …])``;
    a Slack message's hand-over is counted by the messages' versions instead."""
    name = callback.func.__qualname__
    if name == "hand_to_broker" and callback.func.__module__.endswith("relay"):
        return list(callback.args)
    if name == "hand_many_to_broker":
        return list(callback.args[0])
    return []


def places(rollout: Rollout, ids: list[int]) -> list[int]:
    """Where the members ``ids`` stand in their incident (by id), for comparing two incidents made alike."""
    members = list(Checkpoint.objects.filter(incident=rollout.incident).order_by("pk").values_list("pk", flat=True))
    return sorted(members.index(pk) for pk in ids)


def snapshot(incident: Incident, handed: list[int]) -> list[dict[str, Any]]:
    """Each member (by its place in the incident) as the decision left it, ids and instants left out."""
    rows = []
    members = Checkpoint.objects.filter(incident=incident).select_related("workflow", "assignee").order_by("pk")
    for checkpoint in members:
        decisions = list(Decision.objects.filter(checkpoint=checkpoint).select_related("decided_by"))
        decision = decisions[0] if decisions else None
        events = Event.objects.filter(checkpoint=checkpoint) | Event.objects.filter(
            workflow=checkpoint.workflow, checkpoint__isnull=True, verb=Event.Verb.RESUMING
        )
        rows.append(
            {
                "checkpoint": (
                    checkpoint.status,
                    checkpoint.assignee.username if checkpoint.assignee else None,
                    checkpoint.first_claimed_at is not None,
                    checkpoint.first_claim_channel,
                    checkpoint.first_decision_at == (decision.decided_at if decision else None),
                    checkpoint.clock_stopped_at is not None,
                    checkpoint.remind_at,
                    checkpoint.release_at,
                ),
                "workflow": checkpoint.workflow.status,
                "decisions": [
                    (
                        d.action,
                        d.status,
                        d.instructions,
                        d.handoff_to,
                        d.decided_by.username,
                        d.next_attempt_at is not None,
                        d.confirmations,
                        d.pk in handed,
                    )
                    for d in decisions
                ],
                "events": [
                    (e.verb, e.actor_type, e.actor_name, e.subject.split(":")[0], e.data)
                    for e in events.order_by("pk")
                    if e.verb in (Event.Verb.DECIDED, Event.Verb.RESUMING)
                ],
                "slack": list(SlackMessage.objects.filter(checkpoint=checkpoint).values_list("version", flat=True)),
            }
        )
    return rows


@pytest.mark.parametrize(
    ("action", "resume_url", "terms"),
    [
        ("resume", "http://127.0.0.1:9/resume", {"instructions": "Write the note.", "money_total": {"EUR": "42.00"}}),
        ("retry_step", "http://127.0.0.1:9/resume", {"money_total": {"EUR": "42.00"}}),
        ("abort", "http://127.0.0.1:9/resume", {"instructions": "Refund stands; close it."}),
        ("handoff", "http://127.0.0.1:9/resume", {"handoff_to": "Billing desk"}),
        (
            "resume",
            "",
            {"money_total": {"EUR": "42.00"}},
        ),  # an agent that polls for its decision: nothing handed to the broker
    ],
)
def test_a_wave_decided_together_leaves_what_one_by_one_leaves(
    action, resume_url, terms, slack, django_capture_on_commit_callbacks
):
    alice, bob = make_user("alice"), make_user("bob")
    one_by_one = Rollout.start(
        incident_of(resume_url=resume_url, alice=alice, bob=bob), action=action, by=alice, **terms
    )
    together = Rollout.start(incident_of(resume_url=resume_url, alice=alice, bob=bob), action=action, by=alice, **terms)

    ids_one, handed_one = decided(one_by_one, together=False, capture=django_capture_on_commit_callbacks)
    ids_together, handed_together = decided(together, together=True, capture=django_capture_on_commit_callbacks)

    waits = {1, 2} if action in ("resume", "retry_step") else {1}  # bob holds one; a resume waits for a confirmation
    expected = sorted(set(range(SIZE)) - waits)
    assert places(one_by_one, ids_one) == places(together, ids_together) == expected
    assert len(handed_one) == len(handed_together) == (len(expected) if resume_url else 0)

    before, after = snapshot(one_by_one.incident, handed_one), snapshot(together.incident, handed_together)
    for n, (one, both) in enumerate(zip(before, after, strict=True)):
        assert one == both, f"member {n}"
    decided_row = after[3]
    assert decided_row["checkpoint"][0] == Checkpoint.Status.DECIDED and decided_row["slack"] == [2]
    assert [e[0] for e in decided_row["events"]] == (
        [Event.Verb.DECIDED, Event.Verb.RESUMING] if action in ("resume", "retry_step") else [Event.Verb.DECIDED]
    )


def test_a_wave_of_many_is_a_few_statements_not_seven_a_member(alice, django_capture_on_commit_callbacks):
    agent, _ = make_agent(resume_url="http://127.0.0.1:9/resume", allow_plain_http=True)
    agent.incident_threshold = 40
    agent.save()
    for i in range(40):
        make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail=f"502 for T-{i}")
    rollout = Rollout.start(Incident.objects.get(), action="resume", by=alice)
    context = WaveContext()
    members = context.read(open_members(rollout.incident))

    with moves_at_once(), CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks() as hooks:
        ids = decide_members(rollout, members, context, 40)

    statements = [q["sql"] for q in queries.captured_queries]
    print(f"{len(statements)} statements for 40 members", *(sql[:90] for sql in statements), sep="\n  ")
    assert len(ids) == 40 and Decision.objects.filter(status=Decision.Status.QUEUED).count() == 40
    assert len(statements) <= 12, "one INSERT, UPDATE … RETURNING and INSERT of events a model, not one a member"
    assert [_decision_ids(hook) for hook in hooks if _decision_ids(hook)] == [
        list(Decision.objects.order_by("pk").values_list("pk", flat=True))
    ], "handed to the broker in one go after the commit"


def test_a_member_claimed_meanwhile_is_passed_over_and_keeps_no_decision(alice, django_capture_on_commit_callbacks):
    bob = make_user("bob")
    incident = incident_of(resume_url="", alice=alice, bob=make_user("carol"))
    rollout = Rollout.start(incident, action="resume", by=alice, money_total={"EUR": "42.00"})
    context = WaveContext()
    members = context.read(open_members(rollout.incident))
    taken = members[-1]
    Checkpoint.objects.get(pk=taken.pk).claim(by=bob)  # after the wave read it

    with moves_at_once(), django_capture_on_commit_callbacks():
        ids = decide_members(rollout, members, context, SIZE)

    assert taken.pk not in ids and len(ids) == 3
    taken.refresh_from_db()
    assert taken.status == Checkpoint.Status.CLAIMED and taken.assignee == bob
    assert not Decision.objects.filter(checkpoint=taken).exists(), "its decision row went back, as a rollback"
    assert not Event.objects.filter(checkpoint=taken, verb=Event.Verb.DECIDED).exists()
    assert Decision.objects.filter(checkpoint_id__in=ids).count() == 3


def test_a_member_decided_on_its_workbench_meanwhile_sends_the_wave_one_by_one(
    alice, django_capture_on_commit_callbacks
):
    carol = make_user("carol")
    rollout = Rollout.start(incident_of(resume_url="", alice=alice, bob=make_user("bob")), action="abort", by=alice)
    context = WaveContext()
    members = context.read(open_members(rollout.incident))
    taken = members[-1]
    Decider(Checkpoint.objects.get(pk=taken.pk)).decide(by=carol, action="abort", instructions="Mine.")

    with moves_at_once(), django_capture_on_commit_callbacks():
        ids = decide_members(rollout, members, context, SIZE)

    # Bob holds one; an abort does not wait for the unknown effect: the four others, one by one once refused.
    assert taken.pk not in ids and len(ids) == 4, "the others decided one by one after the INSERT was refused"
    [only] = Decision.objects.filter(checkpoint=taken)
    assert only.decided_by == carol and only.instructions == "Mine."
    assert Decision.objects.filter(checkpoint_id__in=ids, decided_by=alice).count() == 4
