"""The in-console notification list: a bell with the unread count, each notification links to its
checkpoint, and reading one or all of them clears the count. Only one's own notifications are shown."""

from datetime import timedelta

from django.db import transaction
from django.urls import reverse

from tests.helpers import make_checkpoint, make_policy, make_runbook
from workflows import tasks
from workflows.models import EscalationLevel, Notification


def breached_for(user):
    policy = make_policy(target=30, warning=10)
    EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, reassign=True, user=user)
    make_runbook(workflow_kind="refund", policy=policy)
    checkpoint = make_checkpoint()
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    return checkpoint


def test_the_bell_counts_unread_notifications_and_the_list_links_to_the_checkpoint(client, alice):
    checkpoint = breached_for(alice)
    client.force_login(alice)
    page = client.get(reverse("queue")).content.decode()
    assert 'data-testid="bell-count">2<' in page  # escalated + assigned to you
    listing = client.get(reverse("notifications")).content.decode()
    assert "Escalation level 1" in listing and checkpoint.workflow.title in listing
    note = Notification.objects.filter(recipient=alice, kind="assigned").get()
    opened = client.post(reverse("mark_notification_read", args=[note.pk]))
    assert opened.status_code == 302 and opened["Location"] == reverse("workbench", args=[checkpoint.pk])
    assert 'data-testid="bell-count">1<' in client.get(reverse("queue")).content.decode()
    client.post(reverse("mark_notification_read", args=[0]))
    assert 'data-testid="bell-count"' not in client.get(reverse("queue")).content.decode()


def test_nobody_reads_or_marks_another_persons_notifications(client, alice, bob):
    breached_for(alice)
    client.force_login(bob)
    assert "Escalation level 1" not in client.get(reverse("notifications")).content.decode()
    note = Notification.objects.filter(recipient=alice).first()
    assert client.post(reverse("mark_notification_read", args=[note.pk])).status_code == 404
    note.refresh_from_db()
    assert note.read_at is None


def test_agent_text_in_a_notification_is_shown_escaped(client, alice):
    checkpoint = breached_for(alice)
    checkpoint.workflow.__class__.objects.filter(pk=checkpoint.workflow_id).update(title="<script>alert(1)</script>")
    Notification.objects.all().delete()
    checkpoint.refresh_from_db()
    with transaction.atomic():
        Notification.send(
            kind="sla_warning",
            title=f"Decision due soon: {checkpoint.workflow.title}",
            checkpoint=checkpoint,
            users=[alice],
            key="x",
        )
    client.force_login(alice)
    page = client.get(reverse("notifications")).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
