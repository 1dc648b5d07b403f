"""The queue per team: "My team" is an operator's default, with Mine / Unassigned / Awaiting approval
inside it; leads, TPMs and admins get every team and "All teams"; each tab counts its team; a
checkpoint moves to another team from its workbench or in bulk, and only an operator may move it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_user, make_workflow
from tests.test_team_routing import make_team
from workflows.models import Checkpoint, Event, RoutingRule


def _ids(response) -> set[int]:
    return {c.pk for c in response.context["checkpoints"]}


def _tabs(response) -> dict[str, tuple[str, int, bool]]:
    return {t["key"]: (t["label"], t["count"], t["active"]) for t in response.context["team_tabs"]}


@pytest.fixture
def world(db, alice, bob):
    lena = make_user("lena")
    billing = make_team("Billing", alice, lead=lena)
    trust = make_team("Trust", bob)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    RoutingRule.objects.create(team=trust, workflow_kind="abuse")
    refunds = [make_checkpoint(make_workflow(kind="refund")) for _ in range(3)]
    abuse = [make_checkpoint(make_workflow(kind="abuse")) for _ in range(2)]
    orphan = make_checkpoint(make_workflow(kind="other"))
    return {"billing": billing, "trust": trust, "refunds": refunds, "abuse": abuse, "orphan": orphan, "lena": lena}


def test_my_team_is_an_operators_default_and_only_tab(client, world, alice):
    client.force_login(alice)
    response = client.get(reverse("queue"))
    assert _ids(response) == {c.pk for c in world["refunds"]}
    assert _tabs(response) == {"billing": ("My team: Billing", 3, True)}
    assert b'data-testid="team-tab-billing"' in response.content


def test_an_operator_cannot_open_another_teams_queue_or_all_teams(client, world, alice):
    client.force_login(alice)
    for asked in ("trust", "all", "no-such-team"):
        response = client.get(reverse("queue") + f"?team={asked}")
        assert _ids(response) == {c.pk for c in world["refunds"]}, asked


def test_mine_unassigned_and_approval_work_inside_the_team(client, world, alice):
    world["refunds"][0].claim(by=alice)
    world["abuse"][0].assign(to=alice, by=alice)  # hers, but another team's
    client.force_login(alice)
    mine = client.get(reverse("queue") + "?scope=mine")
    assert _ids(mine) == {world["refunds"][0].pk}
    counts = {t["key"]: t["count"] for t in mine.context["tabs"]}
    assert counts["mine"] == 1 and counts["unassigned"] == 2 and counts["all"] == 3
    assert _ids(client.get(reverse("queue") + "?scope=unassigned")) == {c.pk for c in world["refunds"][1:]}


def test_leads_tpms_and_admins_get_every_team_and_all_teams(client, world, tess, adam):
    for user in (world["lena"], tess, adam):
        client.force_login(user)
        response = client.get(reverse("queue") + "?team=all")
        tabs = _tabs(response)
        assert tabs["billing"][1] == 3 and tabs["trust"][1] == 2, user
        assert tabs["all"] == ("All teams", 6, True)  # the unrouted one is under "All teams" only
        assert len(_ids(response)) == 6
        assert _ids(client.get(reverse("queue") + "?team=trust")) == {c.pk for c in world["abuse"]}
    client.force_login(world["lena"])
    assert _tabs(client.get(reverse("queue")))["billing"] == ("My team: Billing", 3, True)  # her default


def test_someone_in_no_team_sees_the_whole_queue(client, world):
    carl = make_user("carl")
    client.force_login(carl)
    response = client.get(reverse("queue"))
    assert len(_ids(response)) == 6 and _tabs(response)["all"][2]


def test_a_checkpoint_is_transferred_from_its_workbench(client, world, alice):
    checkpoint = world["refunds"][0]
    client.force_login(alice)
    page = client.get(reverse("workbench", args=[checkpoint.pk]))
    assert b'data-testid="transfer-team"' in page.content
    response = client.post(reverse("transfer", args=[checkpoint.pk]), {"team": "trust", "note": "abuse really"})
    assert response.status_code == 302
    checkpoint.refresh_from_db()
    assert checkpoint.team == world["trust"]
    assert Event.objects.filter(checkpoint=checkpoint, verb=Event.Verb.TEAM_TRANSFERRED, actor_name="alice").exists()
    assert checkpoint.pk not in _ids(client.get(reverse("queue")))  # gone from her team's queue


def test_a_transfer_to_no_or_an_unknown_team_is_a_clear_error(client, world, alice):
    checkpoint = world["refunds"][0]
    client.force_login(alice)
    for data in ({}, {"team": "nope"}, {"team": "<script>"}):
        response = client.post(reverse("transfer", args=[checkpoint.pk]), data, follow=True)
        assert response.status_code == 200
        text = " ".join(str(m) for m in response.context["messages"])
        assert "team" in text.lower(), data
    checkpoint.refresh_from_db()
    assert checkpoint.team == world["billing"]


def test_a_tpm_may_not_transfer(client, world, tess):
    client.force_login(tess)
    checkpoint = world["refunds"][0]
    response = client.post(reverse("transfer", args=[checkpoint.pk]), {"team": "trust"})
    assert response.status_code == 403
    checkpoint.refresh_from_db()
    assert checkpoint.team == world["billing"]


def test_bulk_moves_the_selected_rows_to_a_team(client, world, alice):
    client.force_login(alice)
    picked = [c.pk for c in world["refunds"][:2]]
    response = client.post(reverse("bulk_transfer"), {"ids": picked, "team": "trust"}, follow=True)
    assert "Transferred 2 to Trust." in [str(m) for m in response.context["messages"]]
    assert set(Checkpoint.objects.filter(team=world["trust"]).values_list("pk", flat=True)) >= set(picked)
