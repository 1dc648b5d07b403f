"""Every record of the SLA clock honours the ``now`` it is given (issue 21).

What happened is stamped at its deadline; what the console did about it (the notification
written, its delivery's first attempt) is stamped at the given ``now``, never this process's
clock; and nothing is recorded before its deadline at that ``now``.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import make_checkpoint, make_user
from workflows import tasks
from workflows.models import Channel, Checkpoint, Delivery, Notification
from workflows.models.clocks import SlaClock


@pytest.fixture
def held(db):
    """A claimed checkpoint whose warning and due time passed an hour ago; its holder has an email channel."""
    alice = make_user("alice")
    Channel.objects.create(kind=Channel.Kind.EMAIL, user=alice, address="alice@example.com")
    checkpoint = make_checkpoint()
    assert checkpoint.claim(by=alice)
    past = timezone.now() - timedelta(hours=1)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(warn_at=past - timedelta(minutes=5), due_at=past)
    checkpoint.refresh_from_db()
    return checkpoint


def _told(kind):
    note = Notification.objects.get(kind=kind)
    return note, list(Delivery.objects.filter(notification=note).values_list("next_attempt_at", flat=True))


@pytest.mark.parametrize(
    ("record", "kind", "stamp"),
    [
        (SlaClock.record_warning, Notification.Kind.SLA_WARNING, "warn_at"),
        (SlaClock.record_breach, Notification.Kind.SLA_BREACHED, "due_at"),
    ],
)
def test_a_record_is_stamped_at_its_deadline_and_told_at_the_given_now(held, record, kind, stamp):
    now = held.due_at + timedelta(minutes=17)  # not this process's clock: an hour and more from it

    assert record(SlaClock(held), now)

    held.refresh_from_db()
    deadline = getattr(held, stamp)
    assert (held.warned_at if stamp == "warn_at" else held.breached_at) == deadline
    note, deliveries = _told(kind)
    assert note.at == deadline
    assert note.created_at == now
    assert deliveries == [now]


@pytest.mark.parametrize("record", [SlaClock.record_warning, SlaClock.record_breach])
def test_nothing_is_recorded_before_its_deadline_at_the_given_now(held, record):
    now = held.warn_at - timedelta(seconds=1)  # this process's clock is past both deadlines; the given now is not

    assert not record(SlaClock(held), now)

    held.refresh_from_db()
    assert held.warned_at is None and held.breached_at is None
    assert not Notification.objects.exists()


def test_the_sweep_passes_its_now_to_every_record(held):
    now = held.due_at + timedelta(minutes=3)

    counts = tasks.sweep_clocks(now)

    assert (counts["warnings"], counts["breaches"]) == (1, 1)
    assert set(Notification.objects.values_list("created_at", flat=True)) == {now}
    assert set(Delivery.objects.values_list("next_attempt_at", flat=True)) == {now}
