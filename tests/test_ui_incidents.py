"""The incident pages and actions as operators use them: the blast radius (money by currency and stage,
unknown effects, promises with due dates, SLA exposure), the timeline, the queue's incident row, opening
from a selection, merge, take out, status, commander, notes, hold and lift — each audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_worked_example, squeezed
from workflows import blast_radius
from workflows.models import Checkpoint, Event, Hold, Incident

pytestmark = pytest.mark.django_db

PLAN_WITH_MONEY = [
    {"name": "refund_shipping", "kind": "effect", "amount": "5.00", "currency": "EUR", "moves_money": True}
]


def _incident(n=5, *, agent=None, refund_status="committed", detail="provider answered 502 for {i}", plan=None):
    if agent is None:
        agent = make_agent()[0]
        agent.incident_threshold = n
        agent.save()
    for i in range(n):
        kwargs = {"plan": plan} if plan is not None else {}
        make_checkpoint(
            make_worked_example(agent=agent, refund_status=refund_status),
            reason="tool_error",
            detail=detail.format(i=f"T-{i}"),
            **kwargs,
        )
    return Incident.objects.get()


def test_the_blast_radius_keeps_committed_pending_and_planned_money_apart():
    committed = _incident(3, plan=PLAN_WITH_MONEY)
    radius = blast_radius.for_incident(committed)
    assert radius.money.rows() == [{"currency": "EUR", "committed": 126, "pending": None, "planned": 15}]
    assert radius.money.at_stake == ["15.00 EUR"]
    assert radius.workflows == radius.tickets == 3 and radius.unknown_effects == 0


def test_unknown_effects_count_as_pending_money_and_are_counted():
    incident = _incident(3, refund_status="pending", plan=[])
    radius = blast_radius.for_incident(incident)
    assert radius.unknown_effects == 3 and radius.members_with_unknown_effects == 3
    assert radius.money.rows() == [{"currency": "EUR", "committed": None, "pending": 126, "planned": None}]


def test_promises_carry_their_due_date_and_sla_exposure_splits_by_horizon():
    incident = _incident(4)
    now = timezone.now()
    members = list(incident.members.order_by("pk"))
    for checkpoint, due in zip(members, (-5, 10, 45, 120), strict=True):
        Checkpoint.objects.filter(pk=checkpoint.pk).update(due_at=now + timedelta(minutes=due))
    radius = blast_radius.for_incident(incident, now=now)
    assert (radius.breached, radius.breaching_15, radius.breaching_60) == (1, 1, 2)
    [promise] = radius.promises
    assert promise["text"] == "refund within 5 days" and promise["count"] == 4
    assert promise["due"] == min(c.opened_at for c in members) + timedelta(days=5)


def test_arrivals_are_bucketed_per_minute_from_first_to_last():
    incident = _incident(3)
    start = timezone.now().replace(second=0, microsecond=0)
    for member, opened_at in zip(
        incident.members.order_by("pk"), [start, start + timedelta(seconds=20), start + timedelta(minutes=3)]
    ):
        Checkpoint.objects.filter(pk=member.pk).update(opened_at=opened_at)
    labels, counts = blast_radius.arrivals(incident.members.all())
    assert counts == [2, 0, 0, 1] and len(labels) == 4


def test_the_incident_page_shows_the_radius_chart_and_timeline_with_agent_text_escaped(client, alice):
    incident = _incident(detail="<script>alert(1)</script> provider answered 502 for {i}")
    client.force_login(alice)
    html = client.get(reverse("incident", args=[incident.pk])).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(" in html
    page = squeezed(html)
    assert 'data-testid="radius-workflows">5 (5 waiting for a decision)' in page
    assert "<svg" in html and "Arrivals per minute" in html
    assert "“refund within 5 days” × 5" in page
    assert "first member arrived" in page and "last member arrived" in page
    assert page.count('data-testid="member-row"') == 5


def test_the_queue_shows_an_incident_as_one_row_and_marks_its_members(client, alice):
    incident = _incident()
    client.force_login(alice)
    page = client.get(reverse("queue")).content.decode()
    assert page.count('data-testid="incident-queue-row"') == 1
    assert f"Incident #{incident.pk}:" in page and page.count('data-testid="badge-incident"') == 5
    assert "5\n            checkpoints" in page or "5 checkpoints" in squeezed(page)
    assert "126.00 EUR" not in page  # committed money is done, not at stake
    polled = client.get(reverse("incident_rows"), headers={"HX-Request": "true"}).content.decode()
    assert polled.count('data-testid="incident-queue-row"') == 1 and "<html" not in polled
    members = client.get(reverse("queue"), {"incident": incident.pk}).content.decode()
    assert members.count('data-testid="queue-row"') == 5 and 'data-testid="incident-queue-row"' not in members


def test_the_incident_rows_timer_is_its_soonest_due_member_read_with_the_row(django_assert_num_queries):
    incident = _incident()
    soonest = incident.members.order_by("pk")[2]
    Checkpoint.objects.filter(pk=soonest.pk).update(due_at=timezone.now() + timedelta(minutes=3))
    [row] = blast_radius.queue_rows()
    assert row["oldest"].pk == soonest.pk
    with django_assert_num_queries(0):  # the timer reads only what the row read: no deferred field fetched
        timer = render_to_string("console/_sla_timer.html", {"checkpoint": row["oldest"]})
    assert 'data-due="' in timer and "data-warn=" in timer


def test_an_operator_opens_an_incident_from_the_queue_selection(client, alice):
    picked = [make_checkpoint(), make_checkpoint()]
    client.force_login(alice)
    response = client.post(reverse("open_incident"), {"ids": [c.pk for c in picked], "title": "Look at these"})
    incident = Incident.objects.get()
    assert response.status_code == 302 and response.url == reverse("incident", args=[incident.pk])
    assert incident.members.count() == 2 and incident.opened_by == alice
    htmx = client.post(reverse("open_incident"), {"ids": [picked[0].pk]}, headers={"HX-Request": "true"})
    assert htmx.status_code == 204 and htmx["HX-Redirect"].startswith("/incidents/")
    empty = client.post(reverse("open_incident"), {"ids": ["x", "99999999999"]})
    assert empty.status_code == 302 and Incident.objects.count() == 2


def test_hold_and_lift_from_the_incident_page_are_on_its_timeline(client, alice):
    incident = _incident()
    client.force_login(alice)
    client.post(reverse("hold", args=[incident.pk]), {"kind": "", "new_workflows": "refuse", "note": "outage"})
    hold = Hold.objects.get()
    assert hold.is_active and hold.agent == incident.agent and hold.incident == incident and hold.placed_by == alice
    again = client.post(reverse("hold", args=[incident.pk]), {"kind": "", "new_workflows": "refuse"}, follow=True)
    assert "already on hold" in again.content.decode() and Hold.objects.count() == 1
    bad = client.post(reverse("hold", args=[incident.pk]), {"new_workflows": "explode"})
    assert bad.status_code == 302 and Hold.objects.count() == 1
    client.post(reverse("lift_hold", args=[hold.pk]))
    hold.refresh_from_db()
    assert not hold.is_active and hold.lifted_by == alice
    verbs = list(incident.events().values_list("verb", flat=True))
    assert Event.Verb.HOLD_PLACED in verbs and Event.Verb.HOLD_LIFTED in verbs
    page = squeezed(client.get(reverse("incident", args=[incident.pk])).content.decode())
    assert f"put {incident.agent.name} on hold" in page and f"lifted the hold on {incident.agent.name}" in page


def test_status_commander_and_notes_are_audited_and_a_tpm_may_only_read(client, alice, tess):
    incident = _incident()
    client.force_login(tess)
    assert client.get(reverse("incident", args=[incident.pk])).status_code == 200
    assert client.post(reverse("incident_status", args=[incident.pk]), {"status": "mitigating"}).status_code == 403
    client.force_login(alice)
    client.post(reverse("incident_status", args=[incident.pk]), {"status": "mitigating"})
    client.post(reverse("incident_status", args=[incident.pk]), {"status": "nonsense"})
    client.post(reverse("incident_commander", args=[incident.pk]), {"commander": "alice"})
    client.post(reverse("incident_note", args=[incident.pk]), {"note": "provider confirms the outage"})
    incident.refresh_from_db()
    assert incident.status == "mitigating" and incident.commander == alice
    assert set(incident.events().values_list("verb", flat=True)) >= {
        Event.Verb.INCIDENT_STATUS,
        Event.Verb.INCIDENT_COMMANDER,
        Event.Verb.INCIDENT_NOTE,
    }


def test_merge_and_take_out_from_the_page(client, alice):
    one = _incident()
    two = Incident.open_from([make_checkpoint()], by=alice)
    client.force_login(alice)
    assert client.post(reverse("merge_incident", args=[one.pk]), {"other": "abc"}).status_code == 302
    assert client.post(reverse("merge_incident", args=[one.pk]), {"other": "99999"}).status_code == 302
    client.post(reverse("merge_incident", args=[one.pk]), {"other": two.pk})
    assert one.members.count() == 6
    member = one.members.first()
    client.post(reverse("remove_from_incident", args=[one.pk, member.pk]))
    assert one.members.count() == 5


def test_search_finds_an_incident_and_incident_n_opens_it(client, alice):
    incident = _incident()
    client.force_login(alice)
    assert client.get(reverse("search"), {"q": f"incident {incident.pk}"}).url == reverse(
        "incident", args=[incident.pk]
    )
    listed = client.get(reverse("search"), {"q": incident.agent.name}).content.decode()
    assert 'data-testid="search-incident"' in listed


def test_an_admin_may_leave_the_grouping_settings_empty_for_their_defaults(client, adam):
    client.force_login(adam)
    client.post(
        reverse("admin:workflows_agent_add"),
        {
            "name": "grouped-bot",
            "description": "",
            "resume_url": "",
            "owner": "",
            "is_active": "on",
            "incident_window_minutes": "",
            "incident_threshold": "3",
        },
    )
    from workflows.models import Agent

    agent = Agent.objects.get(name="grouped-bot")
    assert (agent.incident_window_minutes, agent.incident_threshold) == (15, 3)


def test_a_rollout_is_started_steered_and_shown_on_the_incident_page(client, alice, tess):
    from workflows.models import Rollout

    incident = _incident()
    client.force_login(tess)
    assert client.post(reverse("start_rollout", args=[incident.pk]), {"action": "resume"}).status_code == 403
    client.force_login(alice)
    client.post(
        reverse("start_rollout", args=[incident.pk]), {"action": "handoff", "canary_percent": 5, "per_minute": 30}
    )
    client.post(reverse("start_rollout", args=[incident.pk]), {"action": "resume", "canary_percent": "lots"})
    assert not Rollout.objects.exists()
    client.post(
        reverse("start_rollout", args=[incident.pk]),
        {"action": "resume", "canary_percent": 20, "per_minute": 30, "instructions": "provider is back"},
    )
    rollout = Rollout.objects.get()
    assert (rollout.action, rollout.canary_percent, rollout.started_by) == ("resume", 20, alice)
    Rollout.advance_due(timezone.now() + timedelta(seconds=1))
    page = squeezed(client.get(reverse("incident", args=[incident.pk])).content.decode())
    assert "wave 1: 1 decisions" in page and "rollout wave 1 sent: 1 decisions" in page
    assert client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "continue"}).status_code == 302
    rollout.refresh_from_db()
    assert rollout.status == "running"  # only a halted rollout continues
    client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "cancel"})
    rollout.refresh_from_db()
    assert rollout.status == "cancelled"
    assert Event.objects.filter(
        subject=f"rollout:{rollout.pk}", verb=Event.Verb.ROLLOUT_CANCELLED, actor_user=alice
    ).exists()


def test_the_rollout_form_hands_off_to_an_operator_and_fails_over_to_a_standby(client, alice, bob, tess):
    from workflows.models import Agent, Decision, Rollout

    incident = _incident(2)
    standby = make_agent("standby-bot")[0]
    Agent.objects.filter(pk=standby.pk).update(capabilities=["failover"], kinds=["refund"])
    make_agent("no-failover-bot")
    client.force_login(alice)
    page = squeezed(client.get(reverse("incident", args=[incident.pk])).content.decode())
    assert '<option value="bob">bob</option>' in page  # operators to hand off to
    assert '<option value="tess">' not in page  # a TPM takes nothing over
    assert '<option value="standby-bot">standby-bot</option>' in page
    assert "no-failover-bot" not in page  # only agents advertising failover are offered

    start = reverse("start_rollout", args=[incident.pk])
    answer = client.post(start, {"action": "failover", "canary_percent": 100, "per_minute": 30}, follow=True)
    assert "Choose the standby agent" in answer.content.decode() and not Rollout.objects.exists()
    answer = client.post(start, {"action": "handoff", "canary_percent": 100, "per_minute": 30}, follow=True)
    assert "needs a new owner or the process" in answer.content.decode() and not Rollout.objects.exists()

    client.post(start, {"action": "handoff", "new_owner": "bob", "canary_percent": 100, "per_minute": 30})
    rollout = Rollout.objects.get()
    assert (rollout.action, rollout.new_owner) == ("handoff", bob)
    Rollout.advance_due(timezone.now() + timedelta(seconds=1))
    assert set(Decision.objects.values_list("action", "new_owner")) == {("handoff", bob.pk)}
    assert "<strong>Hand off to bob</strong>" in squeezed(
        client.get(reverse("incident", args=[incident.pk])).content.decode()
    )
    client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "cancel"})

    Incident.objects.filter(pk=incident.pk).delete()
    second = make_agent()[0]
    second.incident_threshold = 2
    second.save()
    other = _incident(2, agent=second, detail="model answered 503 for {i}")
    client.post(
        reverse("start_rollout", args=[other.pk]),
        {"action": "failover", "standby": "standby-bot", "canary_percent": 100, "per_minute": 30},
    )
    assert Rollout.objects.get(incident=other).standby == standby


def test_the_rollout_form_sets_the_halt_share_and_the_watch_window_which_the_waves_then_follow(client, alice):
    from workflows.models import Decision, Rollout, Workflow

    incident = _incident(8)
    client.force_login(alice)
    start = reverse("start_rollout", args=[incident.pk])
    for bad in ({"halt_percent": 0}, {"halt_percent": 101}, {"watch_minutes": 0}, {"halt_percent": "half"}):
        answer = client.post(start, {"action": "resume", "canary_percent": 25, "per_minute": 30, **bad}, follow=True)
        assert "rollout-form" in answer.content.decode() and not Rollout.objects.exists(), bad
    client.post(
        start, {"action": "resume", "canary_percent": 25, "per_minute": 30, "halt_percent": 60, "watch_minutes": 2}
    )
    rollout = Rollout.objects.get()
    assert (rollout.halt_share, rollout.watch_seconds) == (0.6, 120)
    page = squeezed(client.get(reverse("incident", args=[incident.pk])).content.decode())
    assert "each wave watched up to 2 min, halts when more than 60 % of a wave fails" in page

    now = timezone.now()
    Rollout.advance_due(now)
    rollout.refresh_from_db()
    canary = rollout.waves[-1]["checkpoints"]
    assert len(canary) == 2
    # Half the canary fails: under the default 20 % it would halt; under 60 % the next wave goes.
    Decision.objects.filter(checkpoint__in=canary).update(status=Decision.Status.SUCCEEDED)
    Workflow.objects.filter(checkpoints__pk=canary[0]).update(status=Workflow.Status.FAILED)
    Workflow.objects.filter(checkpoints__pk=canary[1]).update(status=Workflow.Status.COMPLETED)
    Rollout.advance_due(now + timedelta(minutes=1))
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.RUNNING, rollout.halt_reason
    assert len(rollout.waves) == 2

    # Left empty, the fields keep the model's defaults.
    client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "cancel"})
    client.post(
        start, {"action": "resume", "canary_percent": 25, "per_minute": 30, "halt_percent": "", "watch_minutes": ""}
    )
    newest = Rollout.objects.latest("pk")
    assert (newest.halt_share, newest.watch_seconds) == (0.2, 600)
