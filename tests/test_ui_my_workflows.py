"""My workflows: what I own, what was handed off to me (with its packet), what was resumed lately."""

from __future__ import annotations

from django.urls import reverse

from tests.helpers import make_checkpoint, make_worked_example
from workflows.models import Decider, Event, Workflow


def _handed_off_to(bob, by):
    checkpoint = make_checkpoint()
    decision = Decider(checkpoint).decide(
        by=by, action="handoff", new_owner=bob, instructions="refund went out; call her"
    )
    decision.start_attempt()
    decision.mark_succeeded()
    return checkpoint.workflow


def test_handed_off_work_shows_its_packet_to_the_new_owner(client, alice, bob):
    workflow = _handed_off_to(bob, by=alice)
    client.force_login(bob)

    html = client.get(reverse("mine")).content.decode()

    assert workflow.title in html
    assert 'data-testid="handed-off-by">alice<' in html
    assert "refund went out; call her" in html


def test_the_new_owner_marks_handed_off_work_completed(client, alice, bob):
    workflow = _handed_off_to(bob, by=alice)
    client.force_login(bob)

    response = client.post(
        reverse("complete_handoff", args=[workflow.pk]), {"summary": "called, all good"}, follow=True
    )

    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.COMPLETED and workflow.summary == "called, all good"
    assert Event.objects.filter(workflow=workflow, verb="finished_completed", actor_user=bob).exists()
    assert "is completed" in response.content.decode()


def test_nobody_else_can_complete_it(client, alice, bob):
    workflow = _handed_off_to(bob, by=alice)
    client.force_login(alice)

    assert client.post(reverse("complete_handoff", args=[workflow.pk])).status_code == 404


def test_my_workflows_lists_owned_held_and_recently_resumed(client, alice):
    owned = make_checkpoint(make_worked_example(owner=alice))
    held = make_checkpoint()
    held.claim(by=alice)
    resumed = make_checkpoint()
    decision = Decider(resumed).decide(by=alice, action="resume", instructions="go on")
    decision.start_attempt()
    decision.mark_succeeded()
    client.force_login(alice)

    response = client.get(reverse("mine"))

    html = response.content.decode()
    assert owned.workflow.title in html and held.workflow.title in html and resumed.workflow.title in html
    assert [c.pk for c in response.context["holding"]] == [held.pk]
    assert [d.pk for d in response.context["resumed"]] == [decision.pk]
