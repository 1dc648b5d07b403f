"""A drill runs by hand, once at a time, or on a weekly rule in a team's calendar (issue 26, item 1)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.apitools import api_agent
from workflows.models import BusinessCalendar, Drill, Holiday, Team

pytestmark = pytest.mark.django_db


def paris_team() -> Team:
    calendar = BusinessCalendar.objects.create(
        name="Paris office", time_zone="Europe/Paris", weekdays=[0, 1, 2, 3, 4], opens=time(9), closes=time(18)
    )
    return Team.objects.create(name="Refunds", slug="refunds", calendar=calendar)


def weekly(agent, **fields) -> Drill:
    return Drill.objects.create(
        agent=agent,
        name="Tuesday crash",
        fault=Drill.Fault.CRASH_AFTER_STEP,
        runs=2,
        repeat_weekday=1,
        repeat_at=time(10),
        **fields,
    )


def test_every_tuesday_at_ten_is_ten_in_the_teams_zone_across_a_clock_change_and_skips_its_holidays():
    team = paris_team()
    Holiday.objects.create(calendar=team.calendar, day=date(2026, 11, 10), name="Armistice (observed)")
    drill = weekly(api_agent("bot").agent, team=team)

    runs = drill.next_runs(after=datetime(2026, 10, 20, 12, tzinfo=UTC), count=4)

    # 27 Oct: Paris is back on winter time (UTC+1) after 25 Oct; 20 Oct was summer time, already past at 12:00.
    assert runs == [
        datetime(2026, 10, 27, 9, tzinfo=UTC),
        datetime(2026, 11, 3, 9, tzinfo=UTC),
        datetime(2026, 11, 17, 9, tzinfo=UTC),
        datetime(2026, 11, 24, 9, tzinfo=UTC),
    ]
    assert drill.rule_text == "every Tuesday 10:00 (Europe/Paris)"
    summer = drill.next_runs(after=datetime(2026, 10, 13, 7, tzinfo=UTC), count=1)
    assert summer == [datetime(2026, 10, 13, 8, tzinfo=UTC)]  # 10:00 CEST


def test_without_a_team_the_rule_is_in_the_consoles_zone():
    drill = weekly(api_agent("bot").agent)
    assert drill.next_runs(after=datetime(2026, 12, 1, 10, tzinfo=UTC), count=1) == [
        datetime(2026, 12, 8, 10, tzinfo=UTC)
    ]  # Tue 1 Dec 10:00 is not after itself: the next Tuesday


def test_starting_a_weekly_drill_by_hand_runs_an_occurrence_and_keeps_the_schedule():
    agent = api_agent("bot").agent
    agent.advertise(["drill"])
    drill = weekly(agent, team=paris_team())
    assert drill.schedule()
    planned = drill.next_run_at
    first = drill.start_occurrence()
    assert first is not None and first.status == Drill.Status.RUNNING and first.series == drill
    second = drill.start_occurrence()
    first.refresh_from_db()
    drill.refresh_from_db()
    assert first.status == Drill.Status.ENDED  # the new occurrence takes over
    assert second is not None and second.status == Drill.Status.RUNNING
    assert drill.status == Drill.Status.SCHEDULED and drill.next_run_at == planned
    assert list(Drill.objects.definitions()) == [drill]
    assert set(Drill.objects.of_series(second)) == {drill, first, second}


def test_a_weekly_rule_whose_agent_dropped_drill_support_goes_back_to_draft_saying_why():
    agent = api_agent("bot").agent
    agent.advertise(["drill"])
    drill = weekly(agent)
    assert drill.schedule()
    Drill.objects.filter(pk=drill.pk).update(next_run_at=timezone.now() - timedelta(seconds=1))
    agent.advertise([])
    assert Drill.start_due() == 0
    drill.refresh_from_db()
    assert drill.status == Drill.Status.DRAFT and not drill.occurrences.exists()


def form(agent, **fields):
    return {
        "name": "Weekly crash",
        "agent": agent.pk,
        "kind": "",
        "fault": "crash_after_step",
        "at_seq": 2,
        "silent_minutes": 10,
        "runs": 2,
        "share_percent": "",
        "window_minutes": 60,
        "announced": "on",
        **fields,
    }


def test_a_tpm_defines_a_weekly_drill_and_the_page_lists_its_next_runs(tess):
    agent = api_agent("support-bot").agent
    agent.advertise(["drill"])
    team = paris_team()
    client = Client()
    client.force_login(tess)

    half = client.post("/drills/", form(agent, when="weekly", repeat_weekday=1))
    assert half.status_code == 422 and "needs a day and a time" in half.content.decode()
    assert not Drill.objects.exists()  # nothing half-saved
    assert (
        client.post(
            "/drills/", form(agent, when="weekly", repeat_weekday=1, repeat_at="10:00", team=team.pk)
        ).status_code
        == 302
    )

    drill = Drill.objects.get()
    assert drill.status == Drill.Status.SCHEDULED and drill.recurs
    assert drill.next_run_at == drill.next_runs(count=1)[0]
    page = client.get("/drills/").content.decode()
    assert "every Tuesday 10:00 (Europe/Paris)" in page
    assert page.count('<time datetime="') == 3  # the next three runs
    assert client.post(f"/drills/{drill.pk}/start/").status_code == 302  # "Run now"
    [occurrence] = drill.occurrences.all()
    assert occurrence.status == Drill.Status.RUNNING
    answer = client.get(f"/drills/{drill.pk}/report/")
    assert answer.status_code == 302 and answer["Location"] == f"/drills/{occurrence.pk}/report/"


def test_a_tpm_schedules_a_drill_once_and_a_time_gone_by_is_refused(tess):
    agent = api_agent("support-bot").agent
    agent.advertise(["drill"])
    client = Client()
    client.force_login(tess)
    past = client.post("/drills/", form(agent, when="once", start_at="2020-01-01T10:00"))
    assert past.status_code == 422 and "That time has passed" in past.content.decode()
    at = (timezone.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    assert client.post("/drills/", form(agent, when="once", start_at=at.strftime("%Y-%m-%dT%H:%M"))).status_code == 302
    drill = Drill.objects.get()
    assert drill.status == Drill.Status.SCHEDULED and drill.next_run_at == at and not drill.recurs
    assert drill.next_runs() == [at]
