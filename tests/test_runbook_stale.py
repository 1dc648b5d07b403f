"""A runbook past its review-by date is flagged stale: on the runbook list, on the workbench of the
checkpoints that use it, and to its owner, once per review date, by the periodic sweep."""

import datetime

import time_machine
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_user, run_together, squeezed
from workflows import tasks
from workflows.models import Channel, Delivery, Notification, Runbook

DEC_1 = datetime.datetime(2026, 12, 1, 9, 0, tzinfo=datetime.UTC)


def stale_notes():
    return Notification.objects.filter(kind=Notification.Kind.RUNBOOK_STALE)


def test_a_runbook_is_stale_the_day_after_its_review_date(db):
    runbook = make_runbook(review_by=datetime.date(2026, 11, 30))
    with time_machine.travel(datetime.datetime(2026, 11, 30, 23, 0, tzinfo=datetime.UTC), tick=False):
        assert not runbook.is_stale and not Runbook.objects.stale().exists()
    with time_machine.travel(DEC_1, tick=False):
        assert runbook.is_stale and list(Runbook.objects.stale()) == [runbook]


def test_the_owner_is_told_once_per_review_date_however_often_the_sweep_runs(db, adam):
    olga = make_user("olga", role="operator")
    Channel.objects.create(user=olga, kind=Channel.Kind.EMAIL, address="olga@example.com")
    runbook = make_runbook(title="Refunds <old>", owner=olga, review_by=datetime.date(2026, 11, 20))
    make_runbook(title="Fresh", owner=olga, review_by=datetime.date(2027, 1, 1))
    make_runbook(title="Nobody's", review_by=datetime.date(2026, 1, 1))
    with time_machine.travel(DEC_1, tick=False):
        first = tasks.sweep()
        tasks.sweep()
        assert Runbook.announce_stale() == 0
    assert first["stale_runbooks"] == 1
    [note] = stale_notes()
    assert note.recipient == olga and note.title.startswith("Runbook “Refunds <old>” is past its review date")
    assert note.path == reverse("runbook", args=[runbook.pk])
    assert Delivery.objects.filter(notification=note).count() == 1  # her email channel, once

    runbook.review_by = datetime.date(2026, 12, 15)  # reviewed: next review in two weeks
    runbook.save()
    with time_machine.travel(DEC_1 + datetime.timedelta(days=10), tick=False):
        assert Runbook.announce_stale() == 0
    with time_machine.travel(DEC_1 + datetime.timedelta(days=20), tick=False):
        assert Runbook.announce_stale() == 1  # a new stale period: told again, once
        assert Runbook.announce_stale() == 0
    assert stale_notes().count() == 2


def test_two_sweeps_at_once_tell_the_owner_once(transactional_db):
    olga = make_user("olga", role="operator")
    make_runbook(owner=olga, review_by=datetime.date(2026, 11, 20))
    counts = []
    with time_machine.travel(DEC_1, tick=False):
        run_together([lambda: counts.append(Runbook.announce_stale()) for _ in range(4)])
    assert sum(counts) == 1 and stale_notes().count() == 1


def test_the_owner_finds_it_in_the_bell_and_it_opens_the_runbook(client, db):
    olga = make_user("olga", role="operator")
    runbook = make_runbook(owner=olga, review_by=datetime.date(2026, 11, 20))
    with time_machine.travel(DEC_1, tick=False):
        Runbook.announce_stale()
    client.force_login(olga)
    page = client.get(reverse("notifications")).content.decode()
    assert 'data-kind="runbook_stale"' in page
    note = stale_notes().get()
    answer = client.post(reverse("mark_notification_read", args=[note.pk]))
    assert answer["Location"] == reverse("runbook", args=[runbook.pk])
    assert client.get(answer["Location"]).status_code == 200


def test_the_list_and_the_workbench_flag_a_stale_runbook(client, adam, alice):
    runbook = make_runbook(title="Refunds", workflow_kind="refund", owner=adam, review_by=datetime.date(2026, 11, 20))
    make_runbook(title="Billing", workflow_kind="billing", review_by=datetime.date(2027, 11, 20))
    checkpoint = make_checkpoint()
    with time_machine.travel(DEC_1, tick=False):
        client.force_login(adam)
        listing = squeezed(client.get(reverse("runbooks")).content.decode())
        client.force_login(alice)
        workbench = squeezed(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())
    rows = {row.split('data-slug="')[1].split('"')[0]: row for row in listing.split('data-testid="runbook-row"')[1:]}
    assert (
        'data-testid="stale"' in rows[runbook.slug]
        and 'data-testid="stale"' not in rows[next(s for s in rows if s != runbook.slug)]
    )
    assert "1 runbook past its review date" in listing
    assert 'data-testid="runbook-stale"' in workbench and "20 Nov 2026" in workbench and "adam" in workbench
    with time_machine.travel(datetime.datetime(2026, 11, 10, tzinfo=datetime.UTC), tick=False):
        client.force_login(alice)
        fresh = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'data-testid="runbook-stale"' not in fresh
