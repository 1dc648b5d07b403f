"""Issue 28 item 4: the operator a workflow is handed to is told, in the bell and on their channels."""

from __future__ import annotations

from django.urls import reverse

from tests.helpers import make_checkpoint
from workflows.models import Channel, Decider, Delivery, Notification


def _hand_off(checkpoint, *, by, to, note="refund went out; call her"):
    decision = Decider(checkpoint).decide(by=by, action="handoff", new_owner=to, instructions=note)
    decision.start_attempt()
    decision.mark_succeeded()
    return decision


def test_the_new_owner_is_notified_with_the_note_and_an_email_is_queued(client, alice, bob):
    bob.email = "bob@example.com"
    bob.save()
    Channel.objects.create(user=bob, kind=Channel.Kind.EMAIL)
    checkpoint = make_checkpoint()

    _hand_off(checkpoint, by=alice, to=bob)

    note = Notification.objects.get(recipient=bob)
    assert note.kind == Notification.Kind.HANDED_OFF
    assert "alice handed" in note.title and checkpoint.workflow.title in note.title
    assert note.body == "refund went out; call her"
    assert Delivery.objects.filter(notification=note, status=Delivery.Status.PENDING).count() == 1
    client.force_login(bob)
    html = client.get(reverse("notifications")).content.decode()
    assert "Handed off to you" in html and "refund went out; call her" in html
    opened = client.post(reverse("mark_notification_read", args=[note.pk]))
    assert opened["Location"] == reverse("workflow", args=[checkpoint.workflow_id])


def test_a_repeated_delivery_tells_them_once_and_a_self_handoff_not_at_all(alice, bob):
    checkpoint = make_checkpoint()
    decision = _hand_off(checkpoint, by=alice, to=bob)
    decision.mark_succeeded()  # a late second answer of the agent changes nothing
    assert Notification.objects.filter(recipient=bob).count() == 1

    mine = make_checkpoint()
    _hand_off(mine, by=alice, to=alice)
    assert not Notification.objects.filter(recipient=alice).exists()


def test_a_handoff_to_a_human_process_tells_nobody(alice):
    checkpoint = make_checkpoint()
    decision = Decider(checkpoint).decide(by=alice, action="handoff", handoff_to="Finance desk", instructions="call")
    decision.start_attempt()
    decision.mark_succeeded()
    assert not Notification.objects.exists()
