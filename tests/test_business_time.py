"""Business-time arithmetic across nights, weekends, holidays, DST changes and time zones."""

import random
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from workflows.business_time import Hours, add, between

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
OFFICE = Hours(
    tz="Europe/Berlin",
    weekdays=frozenset(range(5)),
    start=9 * 60,
    end=17 * 60,
    holidays=frozenset({date(2026, 12, 24), date(2026, 12, 25)}),
)


def berlin(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=BERLIN)


def test_round_the_clock_business_time_is_wall_time():
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    assert add(start, timedelta(hours=30), None) == start + timedelta(hours=30)
    assert between(start, start + timedelta(hours=30), None) == timedelta(hours=30)


def test_within_one_working_day_the_clock_runs_like_a_wall_clock():
    assert add(berlin(2026, 12, 1, 10), timedelta(hours=2), OFFICE) == berlin(2026, 12, 1, 12)


def test_the_clock_pauses_overnight():
    # Tuesday 16:00 + 2 h: one hour today, one tomorrow from 09:00.
    assert add(berlin(2026, 12, 1, 16), timedelta(hours=2), OFFICE) == berlin(2026, 12, 2, 10)
    assert between(berlin(2026, 12, 1, 16), berlin(2026, 12, 2, 10), OFFICE) == timedelta(hours=2)


def test_the_clock_pauses_over_the_weekend():
    # Friday 16:30 + 1 h lands on Monday 09:30.
    assert add(berlin(2026, 12, 4, 16, 30), timedelta(hours=1), OFFICE) == berlin(2026, 12, 7, 9, 30)
    assert between(berlin(2026, 12, 5, 10), berlin(2026, 12, 6, 18), OFFICE) == timedelta(0)


def test_holidays_are_skipped_like_weekends():
    # Wednesday 23 Dec 16:00 + 2 h: Thu 24 and Fri 25 are holidays, then the weekend.
    assert add(berlin(2026, 12, 23, 16), timedelta(hours=2), OFFICE) == berlin(2026, 12, 28, 10)


def test_a_clock_started_outside_hours_starts_at_the_next_opening():
    assert add(berlin(2026, 12, 5, 12), timedelta(minutes=30), OFFICE) == berlin(2026, 12, 7, 9, 30)
    assert add(berlin(2026, 12, 1, 7), timedelta(0), OFFICE) == berlin(2026, 12, 1, 9)


def test_a_working_day_keeps_its_length_across_the_spring_forward_weekend():
    # Berlin moves from CET (+1) to CEST (+2) on Sunday 29 March 2026.
    friday, monday = berlin(2026, 3, 27, 16), berlin(2026, 3, 30, 10)
    assert add(friday, timedelta(hours=2), OFFICE) == monday
    assert add(friday, timedelta(hours=2), OFFICE).astimezone(UTC) == datetime(2026, 3, 30, 8, tzinfo=UTC)
    assert between(friday, monday, OFFICE) == timedelta(hours=2)


def test_a_round_the_clock_calendar_counts_the_real_length_of_dst_days():
    always = Hours(tz="Europe/Berlin", weekdays=frozenset(range(7)), start=0, end=1440)
    # The spring-forward Sunday has 23 hours, the fall-back Sunday 25.
    assert between(berlin(2026, 3, 29, 0), berlin(2026, 3, 30, 0), always) == timedelta(hours=23)
    assert between(berlin(2026, 10, 25, 0), berlin(2026, 10, 26, 0), always) == timedelta(hours=25)
    start = berlin(2026, 10, 24, 12)
    assert add(start, timedelta(hours=24), always) == start.astimezone(UTC) + timedelta(hours=24)


def test_a_window_that_spans_the_fall_back_hour_is_an_hour_longer():
    night = Hours(tz="Europe/Berlin", weekdays=frozenset(range(7)), start=0, end=4 * 60)
    assert between(berlin(2026, 10, 25, 0), berlin(2026, 10, 25, 12), night) == timedelta(hours=5)


def test_the_same_calendar_in_another_time_zone_opens_at_its_own_nine():
    new_york = Hours(tz="America/New_York", weekdays=frozenset(range(5)), start=9 * 60, end=17 * 60)
    moment = datetime(2026, 12, 1, 15, tzinfo=UTC)  # 16:00 in Berlin, 10:00 in New York
    assert add(moment, timedelta(hours=2), OFFICE) == berlin(2026, 12, 2, 10)
    assert add(moment, timedelta(hours=2), new_york) == datetime(2026, 12, 1, 12, tzinfo=NEW_YORK)


def test_the_us_and_europe_change_clocks_on_different_weekends():
    # 2026-03-08 the US springs forward, Berlin on the 29th: 15:30 UTC is 11:30 in New York (EDT, -4)
    # and still 16:30 in Berlin (CET, +1).
    new_york = Hours(tz="America/New_York", weekdays=frozenset(range(5)), start=9 * 60, end=17 * 60)
    monday = datetime(2026, 3, 9, 15, 30, tzinfo=UTC)
    assert add(monday, timedelta(hours=1), new_york) == datetime(2026, 3, 9, 12, 30, tzinfo=NEW_YORK)
    assert add(monday, timedelta(hours=1), OFFICE) == berlin(2026, 3, 10, 9, 30)


def test_add_and_between_are_inverse_on_random_moments():
    seed = 20261130
    print(f"seed={seed}")
    rng = random.Random(seed)
    for _ in range(300):
        start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 365 * 24 * 60))
        length = timedelta(minutes=rng.randrange(1, 60 * 24 * 10))
        end = add(start, length, OFFICE)
        assert between(start, end, OFFICE) == length, (start, length)
        assert OFFICE.is_open(end - timedelta(seconds=1))


def test_a_calendar_that_never_opens_is_refused():
    with pytest.raises(ValueError, match="working day"):
        Hours(tz="UTC", weekdays=frozenset())
    with pytest.raises(ValueError, match="start before they end"):
        Hours(tz="UTC", start=17 * 60, end=9 * 60)
    with pytest.raises(Exception):  # zoneinfo raises its own error type
        Hours(tz="Mars/Olympus_Mons")


def test_the_frozen_form_round_trips():
    assert Hours.from_dict(OFFICE.to_dict()) == OFFICE
    assert Hours.from_dict(None) is None
