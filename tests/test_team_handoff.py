"""A handoff can target a team: it goes to the team's least-loaded member working now, named on the
decision ("team <name>" as the process), and is refused with the reason when nobody in it is working."""

from __future__ import annotations

from django.urls import reverse

from tests.helpers import make_checkpoint, make_user
from tests.test_team_routing import make_team
from workflows.models import BusinessCalendar, Decision, OperatorProfile


def _decide(client, checkpoint, **data):
    return client.post(reverse("decide", args=[checkpoint.pk]), data)


def test_a_handoff_to_a_team_goes_to_its_least_loaded_member_working_now(client, alice):
    olga, pete = make_user("olga"), make_user("pete")
    make_team("Billing", olga, pete)
    make_checkpoint().claim(by=olga)  # olga holds one already
    checkpoint = make_checkpoint()
    client.force_login(alice)
    page = client.get(reverse("workbench", args=[checkpoint.pk]))
    assert b'data-testid="new-team"' in page.content
    response = _decide(client, checkpoint, action="handoff", new_team="billing", instructions="call them")
    assert response.status_code == 302
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.new_owner == pete and decision.handoff_to == "team Billing"
    assert decision.handoff_packet() == {"to": "pete", "note": "call them"}


def test_a_handoff_to_a_team_where_nobody_works_now_is_refused(client, alice):
    away = BusinessCalendar.objects.create(name="never now", weekdays=[0], opens="00:00", closes="00:01")
    olga = make_user("olga")
    OperatorProfile.objects.create(user=olga, calendar=away)
    make_team("Night", olga)
    checkpoint = make_checkpoint()
    client.force_login(alice)
    response = _decide(client, checkpoint, action="handoff", new_team="night")
    assert response.status_code == 422
    assert "Nobody in Night is working now" in response.content.decode()
    assert not Decision.objects.exists()


def test_an_operator_and_a_team_at_once_or_an_unknown_team_are_refused(client, alice, bob):
    make_team("Billing", bob)
    checkpoint = make_checkpoint()
    client.force_login(alice)
    both = _decide(client, checkpoint, action="handoff", new_owner="bob", new_team="billing")
    assert both.status_code == 422 and "not both" in both.content.decode()
    unknown = _decide(client, checkpoint, action="handoff", new_team="<script>")
    assert unknown.status_code == 422 and "does not exist" in unknown.content.decode()
    assert not Decision.objects.exists()
