"""Teams: a checkpoint gets the team of the most specific routing rule when it opens (then the
priority), keeps it whatever the rules become, and moves only by an audited transfer."""

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint, make_policy, make_runbook, make_user, make_workflow
from workflows import tasks
from workflows.models import EscalationLevel, Event, RoutingRule, Team
from workflows.models.teams import transfer


def make_team(name: str, *members, lead=None, **fields) -> Team:
    team = Team.objects.create(name=name, slug=name.lower().replace(" ", "-"), lead=lead, **fields)
    team.members.add(*members, *([lead] if lead else []))
    return team


@pytest.fixture
def teams(db):
    return make_team("Billing"), make_team("Trust"), make_team("Tier 2")


def test_the_most_specific_rule_wins_then_the_priority(teams):
    billing, trust, tier2 = teams
    refunder, _ = make_agent("refunder")
    RoutingRule.objects.create(team=tier2, priority=100)  # takes everything, but is the least specific
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    assert RoutingRule.route("refund", refunder.pk) == billing
    assert RoutingRule.route("chargeback", refunder.pk) == tier2
    RoutingRule.objects.create(team=trust, agent=refunder)
    assert RoutingRule.route("refund", refunder.pk) == trust  # an agent rule beats a kind rule
    assert RoutingRule.route("refund", None) == billing
    RoutingRule.objects.create(team=billing, agent=refunder, workflow_kind="refund", priority=-5)
    assert RoutingRule.route("refund", refunder.pk) == billing  # agent and kind: the most specific
    RoutingRule.objects.create(team=tier2, agent=refunder, workflow_kind="refund", priority=1)
    assert RoutingRule.route("refund", refunder.pk) == tier2  # equally specific: the higher priority
    assert [r.team for r in RoutingRule.candidates("refund", refunder.pk)] == [tier2, billing, trust, billing, tier2]


def test_no_rule_means_no_team(teams):
    workflow = make_workflow(kind="refund")
    assert RoutingRule.route("refund", workflow.agent_id) is None
    assert make_checkpoint(make_workflow(kind="refund")).team is None


def test_a_checkpoint_keeps_the_team_it_opened_with(teams):
    billing, trust, _ = teams
    rule = RoutingRule.objects.create(team=billing, workflow_kind="refund")
    checkpoint = make_checkpoint()
    assert checkpoint.team == billing
    rule.team = trust
    rule.save()
    RoutingRule.objects.create(team=trust, workflow_kind="refund", agent=checkpoint.workflow.agent, priority=9)
    checkpoint.refresh_from_db()
    assert checkpoint.team == billing
    assert make_checkpoint().team == trust  # new checkpoints follow the new rules


def test_the_team_policy_applies_when_the_runbook_names_none(teams):
    billing, *_ = teams
    billing.policy = make_policy(name="billing terms", target=90, warning=10)
    billing.save()
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    checkpoint = make_checkpoint()
    assert checkpoint.sla["policy"] == "billing terms"
    assert checkpoint.due_at - checkpoint.opened_at == timedelta(minutes=90)
    make_runbook(workflow_kind="refund", policy=make_policy(name="runbook terms"))
    assert make_checkpoint().sla["policy"] == "runbook terms"  # the runbook's own policy wins


def test_a_transfer_moves_it_once_and_is_audited(teams, alice, bob):
    billing, trust, tier2 = teams
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    checkpoint = make_checkpoint()
    stale = type(checkpoint).objects.get(pk=checkpoint.pk)  # a second operator's page, read before the move
    assert transfer(checkpoint, to=trust, by=alice, note="looks like fraud")
    assert not transfer(stale, to=tier2, by=bob)  # it moved since bob read it: his transfer loses
    checkpoint.refresh_from_db()
    assert checkpoint.team == trust
    assert not transfer(checkpoint, to=trust, by=alice)  # already there: nothing recorded
    (event,) = Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.TEAM_TRANSFERRED)
    assert event.actor_name == "alice"
    assert event.data == {"from": "Billing", "to": "Trust", "note": "looks like fraud"}


def test_a_resolved_checkpoint_is_not_transferred(teams, alice):
    billing, trust, _ = teams
    checkpoint = make_checkpoint()
    type(checkpoint).objects.filter(pk=checkpoint.pk).update(status="resolved")
    checkpoint.refresh_from_db()
    assert not transfer(checkpoint, to=trust, by=alice)
    assert not Event.objects.filter(verb=Event.Verb.TEAM_TRANSFERRED).exists()


def _escalating_to(target: str, **level) -> None:
    policy = make_policy(target=30, warning=10)
    EscalationLevel.objects.create(
        policy=policy, delay_minutes=0, notify=True, reassign=True, team_target=target, stop_once_claimed=False, **level
    )
    make_runbook(workflow_kind="refund", policy=policy)


def test_an_escalation_reaches_the_team_lead(db):
    lena, olga = make_user("lena"), make_user("olga")
    billing = make_team("Billing", olga, lead=lena)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    _escalating_to("lead")
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == lena
    (fired,) = Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.ESCALATED)
    assert fired.data["target"] == "the team's lead" and fired.data["reassigned_to"] == "lena"


def test_an_escalation_reaches_the_teams_least_loaded_member_working_now(db):
    from workflows.models import BusinessCalendar, OperatorProfile

    olga, pete, quinn = make_user("olga"), make_user("pete"), make_user("quinn")
    outsider = make_user("aaron")  # not a member: never picked, though he holds nothing
    billing = make_team("Billing", olga, pete, quinn)
    make_checkpoint().claim(by=olga)
    away = BusinessCalendar.objects.create(name="never now", weekdays=[0], opens="00:00", closes="00:01")
    OperatorProfile.objects.create(user=pete, calendar=away)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    _escalating_to("least_loaded")
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == quinn and outsider != quinn


def test_a_team_escalation_without_a_team_reassigns_nobody(db):
    _escalating_to("lead")
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee is None
    (fired,) = Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.ESCALATED)
    assert fired.data["not_reassigned"] == "nobody is working"


def test_the_team_watchers_hear_of_a_breach_when_the_policy_names_none(db):
    from django.contrib.auth.models import Group

    from workflows.models import Notification

    desk = Group.objects.create(name="billing-watch")
    wendy = make_user("wendy")
    wendy.groups.add(desk)
    billing = make_team("Billing", watchers=desk)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    assert Notification.objects.filter(recipient=wendy, kind="sla_breached").exists()
    assert Notification.objects.filter(group=desk, kind="sla_breached").exists()


def test_a_team_change_in_the_admin_is_audited_with_members_and_rules(client, adam, alice, bob):
    billing = make_team("Billing", alice)
    client.force_login(adam)
    url = reverse("admin:workflows_team_change", args=[billing.pk])
    prefix = client.get(url).context["inline_admin_formsets"][0].formset.prefix
    response = client.post(
        url,
        {
            "name": "Billing",
            "slug": "billing",
            "members": [alice.pk, bob.pk],
            "lead": bob.pk,
            "policy": "",
            "calendar": "",
            "watchers": "",
            f"{prefix}-TOTAL_FORMS": "1",
            f"{prefix}-INITIAL_FORMS": "0",
            f"{prefix}-0-workflow_kind": "refund",
            f"{prefix}-0-priority": "3",
            f"{prefix}-0-agent": "",
            "_save": "Save",
        },
    )
    assert response.status_code == 302, response.context["errors"] if response.context else response
    event = Event.objects.get(verb=Event.Verb.ADMIN_CHANGED, subject=f"team:{billing.pk}")
    assert event.actor_user == adam
    assert event.data["before"] == {"members": ["alice"], "lead": None}
    assert event.data["after"] == {"members": ["alice", "bob"], "lead": "bob"}
    assert event.data["inlines"] == ["added kind refund → Billing"]
    assert RoutingRule.route("refund", None) == billing


def test_a_lead_who_is_not_a_member_is_refused(client, adam, alice, bob):
    billing = make_team("Billing", alice)
    client.force_login(adam)
    url = reverse("admin:workflows_team_change", args=[billing.pk])
    prefix = client.get(url).context["inline_admin_formsets"][0].formset.prefix
    response = client.post(
        url,
        {
            "name": "Billing",
            "slug": "billing",
            "members": [alice.pk],
            "lead": bob.pk,
            f"{prefix}-TOTAL_FORMS": "0",
            f"{prefix}-INITIAL_FORMS": "0",
            "_save": "Save",
        },
    )
    assert response.status_code == 200
    assert "The lead must be one of the team&#x27;s members." in response.content.decode()
    billing.refresh_from_db()
    assert billing.lead is None
