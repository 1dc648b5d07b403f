"""The queue and the workbench show business time left and the wall-clock due time in the calendar's zone."""

from datetime import datetime
from zoneinfo import ZoneInfo

import time_machine
from django.urls import reverse

from tests.helpers import make_checkpoint, make_policy, make_runbook
from workflows.models import BusinessCalendar

BERLIN = ZoneInfo("Europe/Berlin")


def friday_afternoon_checkpoint():
    calendar = BusinessCalendar.objects.create(name="Berlin office", time_zone="Europe/Berlin")
    make_runbook(workflow_kind="refund", policy=make_policy(target=120, warning=30, calendar=calendar))
    with time_machine.travel(datetime(2026, 12, 4, 16, 0, tzinfo=BERLIN), tick=False):
        return make_checkpoint()


def test_over_the_weekend_the_clock_says_paused_with_the_business_time_left(client, alice):
    checkpoint = friday_afternoon_checkpoint()
    with time_machine.travel(datetime(2026, 12, 5, 12, 0, tzinfo=BERLIN), tick=False):
        client.force_login(alice)  # sessions end after 8 idle hours: sign in at the travelled-to time
        workbench = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
        queue = client.get(reverse("queue")).content.decode()
    expected = "1h 00m business time left · due Mon 07 Dec 10:00 Europe/Berlin · paused outside business hours"
    assert expected in workbench and expected in queue


def test_after_the_due_time_it_counts_the_business_overrun(client, alice):
    checkpoint = friday_afternoon_checkpoint()
    with time_machine.travel(datetime(2026, 12, 7, 11, 30, tzinfo=BERLIN), tick=False):
        client.force_login(alice)
        page = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert "1h 30m business time over" in page


def test_a_round_the_clock_policy_adds_no_business_line(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    assert 'data-testid="business-clock"' not in client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
