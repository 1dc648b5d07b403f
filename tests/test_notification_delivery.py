"""Notifications reach people: email through the configured backend and webhooks (a loopback receiver),
delivered from the outbox with retries and backoff, every attempt recorded, a failing channel never
blocking another."""

import json
from datetime import timedelta

from django.core import mail
from django.db import transaction

from tests.helpers import make_checkpoint, make_user
from workflows import notify, tasks
from workflows.clock import database_now
from workflows.models import Attempt, Channel, Delivery, Notification


def send_one(user, key="n1", **kwargs):
    checkpoint = make_checkpoint()
    with transaction.atomic():
        [note] = Notification.send(
            kind="sla_breached",
            title="Decision target breached: <b>Refund</b> & more",
            body="It was due 10:00 UTC.",
            checkpoint=checkpoint,
            users=[user],
            key=key,
            **kwargs,
        )
    return note


def deliver_all(now=None) -> list[str]:
    """The relay's pick at ``now`` (default: the database's now), each delivered by a worker."""
    return [tasks.deliver_notification(pk) for pk in Delivery.objects.dispatchable(now).values_list("pk", flat=True)]


def test_an_email_is_sent_through_the_configured_backend(db, alice, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Channel.objects.create(kind="email", user=alice, address="alice@example.invalid")
    note = send_one(alice)
    assert deliver_all() == ["sent"]
    [email] = mail.outbox
    assert email.to == ["alice@example.invalid"]
    assert note.title in email.subject and note.url in email.body
    [attempt] = Attempt.objects.all()
    assert attempt.ok and attempt.number == 1


def test_the_file_backend_writes_the_email_under_var(db, alice, settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    Channel.objects.create(kind="email", user=alice, address="alice@example.invalid")
    send_one(alice)
    assert deliver_all() == ["sent"]
    [written] = list((tmp_path / "mail").iterdir())
    assert "Decision target breached" in written.read_text()


def test_a_failing_webhook_is_retried_with_backoff_and_every_attempt_is_recorded(db, alice, receiver, settings):
    settings.NOTIFY_BACKOFF_SECONDS = 10
    settings.NOTIFY_MAX_ATTEMPTS = 3
    Channel.objects.create(kind="webhook", user=alice, url=receiver.url)
    answers = iter([500, 503, 200])
    receiver.respond = lambda record: next(answers)
    send_one(alice)
    delivery = Delivery.objects.get()
    # The backoff runs on the database's clock (workflows.clock), which time_machine cannot move: the
    # relay is asked what is due at a later instant instead, and each backoff is measured from its attempt.
    start = database_now()
    assert tasks.deliver_notification(delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert delivery.next_attempt_at - start >= timedelta(seconds=10)
    assert deliver_all() == []  # not due yet: the backoff holds it
    second = database_now()
    assert deliver_all(now=start + timedelta(seconds=11)) == ["retry"]
    delivery.refresh_from_db()
    assert delivery.next_attempt_at - second >= timedelta(seconds=20)  # doubled
    assert deliver_all(now=start + timedelta(seconds=40)) == ["sent"]
    delivery.refresh_from_db()
    assert delivery.status == "sent" and delivery.attempts == 3
    assert list(Attempt.objects.values_list("number", "ok", "status_code")) == [
        (1, False, 500),
        (2, False, 503),
        (3, True, 200),
    ]
    assert len(receiver.deliveries) == 3
    body = receiver.deliveries[-1]["body"]
    assert body["event"] == "sla_breached" and body["checkpoint_id"]


def test_a_webhook_that_never_answers_gives_up_after_the_last_attempt(db, alice, settings):
    settings.NOTIFY_MAX_ATTEMPTS = 2
    settings.NOTIFY_BACKOFF_SECONDS = 0
    Channel.objects.create(kind="webhook", user=alice, url="http://127.0.0.1:9/unreachable")
    send_one(alice)
    assert deliver_all() == ["retry"]
    assert deliver_all() == ["failed"]
    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and "could not be reached" in delivery.last_error
    assert Attempt.objects.filter(ok=False).count() == 2
    assert deliver_all() == []


def test_a_failing_channel_does_not_hold_up_another(db, alice, receiver, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    receiver.respond = lambda record: 500
    Channel.objects.create(kind="webhook", user=alice, url=receiver.url)
    Channel.objects.create(kind="email", user=alice, address="alice@example.invalid")
    send_one(alice)
    assert sorted(deliver_all()) == ["retry", "sent"]
    assert len(mail.outbox) == 1


def test_a_slack_webhook_gets_slacks_shape_with_agent_text_escaped(db, alice, receiver):
    Channel.objects.create(kind="webhook", user=alice, url=receiver.url, slack=True)
    send_one(alice)
    assert deliver_all() == ["sent"]
    body = receiver.deliveries[0]["body"]
    assert set(body) == {"text", "unfurl_links"}
    assert "&lt;b&gt;Refund&lt;/b&gt; &amp; more" in body["text"] and "|Open in the console>" in body["text"]


def test_a_group_webhook_gets_one_message_and_members_get_their_bell(db, receiver):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="night-desk")
    Channel.objects.create(kind="webhook", group=group, url=receiver.url)
    members = [make_user("olga"), make_user("pete")]
    checkpoint = make_checkpoint()
    with transaction.atomic():
        Notification.send(
            kind="escalated", title="Escalation level 1", checkpoint=checkpoint, users=members, group=group, key="esc"
        )
    assert deliver_all() == ["sent"]
    assert Notification.objects.filter(recipient__in=members).count() == 2
    assert json.loads(receiver.deliveries[0]["raw"])["title"] == "Escalation level 1"


def test_the_same_event_cannot_notify_twice(db, alice):
    send_one(alice, key="same")
    checkpoint = make_checkpoint()
    with transaction.atomic():
        again = Notification.send(kind="sla_breached", title="again", checkpoint=checkpoint, users=[alice], key="same")
    assert again == [] and Notification.objects.count() == 1


def test_a_delivery_held_by_another_worker_is_not_sent_twice(db, alice, receiver):
    Channel.objects.create(kind="webhook", user=alice, url=receiver.url)
    send_one(alice)
    delivery = Delivery.objects.get()
    assert delivery.start_attempt()
    assert tasks.deliver_notification(delivery.pk) == "lost"
    assert receiver.deliveries == []


def test_the_payload_names_the_checkpoint_and_links_to_the_console(db, alice, settings):
    settings.CONSOLE_URL = "https://console.example"
    note = send_one(alice)
    body = notify.payload(note, slack=False)
    assert body["url"] == f"https://console.example/checkpoints/{note.checkpoint_id}/"
    assert body["checkpoint_id"] == str(note.checkpoint_id)


TITLE_WITH_BREAKS = "Refund for T-1\r\nBcc: mallory@example.invalid\nX\u2028Y\x07\x1b[31m " + "long " * 44


def test_a_line_break_in_an_agents_workflow_title_still_sends_every_email_about_it(db, alice, bob, settings):
    """Issue 22, finding 7: Django's BadHeaderError failed every mention, SLA warning and breach email."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Channel.objects.create(kind="email", user=alice, address="alice@example.invalid")
    checkpoint = make_checkpoint()
    checkpoint.workflow.title = TITLE_WITH_BREAKS
    checkpoint.workflow.save(update_fields=["title"])
    from workflows.models import Comment
    from workflows.models.clocks import SlaClock

    Comment.post(checkpoint=checkpoint, author=bob, body="@alice can you look?")
    assert checkpoint.claim(by=alice)
    checkpoint.refresh_from_db()
    assert SlaClock(checkpoint).record_warning(checkpoint.warn_at)
    with transaction.atomic():
        Notification.send(
            kind="sla_breached",
            title=f"Decision target breached: {TITLE_WITH_BREAKS}",
            checkpoint=checkpoint,
            users=[alice],
            key="breach",
        )

    assert deliver_all(checkpoint.due_at) == ["sent", "sent", "sent"]  # the warning's email is due at its time
    assert len(mail.outbox) == 3
    for email in mail.outbox:
        header = email.message()["Subject"]
        assert "\n" not in header.replace("\n ", "") and "\r" not in email.subject and "\x07" not in email.subject
        assert "\u2028" not in email.subject and "\x1b" not in email.subject and len(email.subject) <= 200
        assert email.subject.startswith("[Recovery Console] ") and "Refund for T-1 Bcc: mallory" in email.subject
        assert email.recipients() == ["alice@example.invalid"]


def test_an_email_that_can_never_be_sent_ends_failed_at_once_instead_of_retrying(db, alice, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Channel.objects.create(kind="email", user=alice, address="alice@example.invalid\nBcc: mallory@example.invalid")
    send_one(alice)
    assert deliver_all() == ["failed"]
    delivery = Delivery.objects.get()
    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 1
    assert "can never be sent" in delivery.last_error
    assert deliver_all(database_now() + timedelta(days=1)) == [] and mail.outbox == []
