"""Claim, release and assign from the console: one winner, a clear answer for the loser, all in the Event log."""

from __future__ import annotations

import json

from django.urls import reverse

from tests.helpers import make_checkpoint, make_user, squeezed
from workflows.models import Checkpoint, Event

HTMX = {"HX-Request": "true"}


def _claim(client, checkpoint, **kwargs):
    return client.post(reverse("claim", args=[checkpoint.pk]), **kwargs)


def claimed(*, by, seen_by, client):
    """A checkpoint ``by`` has claimed, with ``seen_by`` signed in to ``client``."""
    checkpoint = make_checkpoint()
    checkpoint.claim(by=by)
    client.force_login(seen_by)
    return checkpoint


def test_claiming_takes_the_checkpoint_and_returns_to_the_workbench(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = _claim(client, checkpoint, follow=True)

    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice and checkpoint.status == Checkpoint.Status.CLAIMED
    assert response.redirect_chain[-1][0] == reverse("workbench", args=[checkpoint.pk])
    assert "You claimed" in response.content.decode()
    assert Event.objects.filter(checkpoint=checkpoint, verb="claimed", actor_user=alice).exists()


def test_the_second_claim_is_told_who_has_it(client, alice, bob):
    checkpoint = claimed(by=alice, seen_by=bob, client=client)

    response = _claim(client, checkpoint, follow=True)

    assert "alice has already claimed this checkpoint." in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice


def test_over_htmx_the_loser_gets_the_answer_in_a_toast_and_the_fresh_row(client, alice, bob):
    checkpoint = claimed(by=alice, seen_by=bob, client=client)

    response = _claim(
        client, checkpoint, data={"next": "/?scope=all"}, follow=True, headers={**HTMX, "HX-Target": "queue-table"}
    )

    trigger = json.loads(response["HX-Trigger"])
    assert trigger["console:messages"]["items"] == [
        {"level": "error", "text": "alice has already claimed this checkpoint."}
    ]
    html = response.content.decode()
    assert html.lstrip().startswith('<tbody id="queue-table"') and "alice" in html


def test_a_claim_goes_back_to_a_safe_next_url_only(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = _claim(client, checkpoint, data={"next": "https://evil.example/"})

    assert response["Location"] == reverse("workbench", args=[checkpoint.pk])


def test_the_holder_releases_it_back_to_the_queue(client, alice):
    checkpoint = claimed(by=alice, seen_by=alice, client=client)

    client.post(reverse("release", args=[checkpoint.pk]))

    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN and checkpoint.assignee is None
    assert Event.objects.filter(checkpoint=checkpoint, verb="released").exists()


def test_only_the_holder_can_release(client, alice, bob):
    checkpoint = claimed(by=alice, seen_by=bob, client=client)

    response = client.post(reverse("release", args=[checkpoint.pk]), follow=True)

    assert "Only the operator who holds a checkpoint" in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice


def test_assigning_to_another_operator_records_the_note(client, alice, bob):
    checkpoint = claimed(by=alice, seen_by=alice, client=client)

    client.post(reverse("assign", args=[checkpoint.pk]), {"to": "bob", "note": "you know this customer"})

    checkpoint.refresh_from_db()
    assert checkpoint.assignee == bob
    event = Event.objects.get(checkpoint=checkpoint, verb="assigned")
    assert event.actor_user == alice and event.data["note"] == "you know this customer"
    html = squeezed(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())
    assert "assigned by alice: “you know this customer”" in html


def test_an_operator_cannot_take_a_checkpoint_another_operator_holds_and_decide_it(client, alice, bob):
    """Issue 22, finding 8: bob assigned alice's checkpoint to himself (or to carol), then decided it."""
    checkpoint = claimed(by=alice, seen_by=bob, client=client)

    make_user("carol")
    for to in ("bob", "carol"):
        response = client.post(reverse("assign", args=[checkpoint.pk]), {"to": to, "note": "mine now"}, follow=True)
        assert "alice holds this checkpoint" in response.content.decode()
    client.post(reverse("bulk"), {"bulk": "assign", "ids": [checkpoint.pk], "to": "bob"})
    client.post(reverse("decide", args=[checkpoint.pk]), {"action": "abort", "instructions": "taken"})

    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice and checkpoint.status == Checkpoint.Status.CLAIMED
    assert not Event.objects.filter(checkpoint=checkpoint, verb__in=["assigned", "decided"]).exists()


def test_the_holder_or_an_admin_can_give_a_held_checkpoint_away(client, alice, bob, adam):
    checkpoint = claimed(by=alice, seen_by=adam, client=client)
    client.post(reverse("assign", args=[checkpoint.pk]), {"to": "bob"})
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == bob
    client.force_login(bob)
    client.post(reverse("assign", args=[checkpoint.pk]), {"to": "alice"})
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice


def test_assigning_needs_an_operator(client, alice, tess):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = client.post(reverse("assign", args=[checkpoint.pk]), {"to": "tess"}, follow=True)

    assert "Select a valid choice" in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.assignee is None


def test_the_workbench_says_who_gets_the_workflow_back(client, alice, adam):
    from tests.helpers import make_worked_example

    checkpoint = make_checkpoint(make_worked_example(owner=adam))
    client.force_login(alice)

    html = squeezed(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())

    assert "Returns to <strong>adam</strong> when resumed" in html


def test_it_returns_to_the_owner_it_had_when_interrupted(client, alice, adam, bob):
    from tests.helpers import make_worked_example
    from workflows.models import Workflow

    checkpoint = make_checkpoint(make_worked_example(owner=adam))
    Workflow.objects.filter(pk=checkpoint.workflow_id).update(owner=bob)  # changed during the pause
    client.force_login(alice)

    html = squeezed(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())

    assert "Returns to <strong>adam</strong> when resumed" in html
