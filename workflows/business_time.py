"""Business-time arithmetic: the one place that knows how an SLA clock pauses outside working hours.

A ``Hours`` value is a calendar reduced to what the arithmetic needs: a time
zone, the working weekdays, the working window of each day (minutes after
local midnight, ``end`` may be 1440) and the holidays (local dates). ``None``
means round the clock: business time is wall time.

Every interval is built from local wall times and then converted to UTC with
``zoneinfo``, and lengths are measured in UTC, so a day on which the clocks
change is as long as it really is (a 09:00-17:00 window is 8 h either way; a
00:00-24:00 window is 23 h or 25 h). A local time that does not exist (inside
a spring-forward gap) resolves as ``zoneinfo`` resolves ``fold=0``: it counts
from the moment after the gap.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import NotRequired, TypedDict
from zoneinfo import ZoneInfo

# A calendar that never opens would make every search run forever; ten years is far beyond any target.
SEARCH_LIMIT_DAYS = 3660


class NeverOpen(ValueError):
    """The calendar has no working time within the search limit."""


class HoursDict(TypedDict):
    """Working hours as a JSON field keeps them: minutes since midnight, weekdays 0 = Monday, ISO holidays."""

    tz: str
    weekdays: list[int]
    start: int
    end: int
    holidays: NotRequired[list[str]]


@dataclass(frozen=True)
class Hours:
    tz: str = "UTC"
    weekdays: frozenset[int] = frozenset({0, 1, 2, 3, 4})  # Monday = 0
    start: int = 9 * 60  # minutes after local midnight
    end: int = 17 * 60
    holidays: frozenset[date] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end <= 1440:
            raise ValueError("Working hours must start before they end, within one day (00:00-24:00).")
        if not self.weekdays or not self.weekdays <= set(range(7)):
            raise ValueError("At least one working day (0 = Monday … 6 = Sunday) is needed.")
        ZoneInfo(self.tz)  # an unknown zone fails here, not in the middle of a sweep

    @classmethod
    def from_dict(cls, data: HoursDict | None) -> Hours | None:
        if not data:
            return None
        return cls(
            tz=data["tz"],
            weekdays=frozenset(data["weekdays"]),
            start=data["start"],
            end=data["end"],
            holidays=frozenset(date.fromisoformat(d) for d in data.get("holidays", [])),
        )

    def to_dict(self) -> HoursDict:
        return {
            "tz": self.tz,
            "weekdays": sorted(self.weekdays),
            "start": self.start,
            "end": self.end,
            "holidays": sorted(d.isoformat() for d in self.holidays),
        }

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def window(self, day: date) -> tuple[datetime, datetime] | None:
        """The working interval of a local date, in UTC; None on a day off."""
        if day.weekday() not in self.weekdays or day in self.holidays:
            return None
        return self._at(day, self.start), self._at(day, self.end)

    def _at(self, day: date, minutes: int) -> datetime:
        if minutes == 1440:
            day, minutes = day + timedelta(days=1), 0
        local = datetime.combine(day, time(minutes // 60, minutes % 60), tzinfo=self.zone)
        return local.astimezone(UTC)

    def windows_from(self, moment: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Working intervals (UTC) that end after ``moment``, in order, clipped to start at it."""
        day = moment.astimezone(self.zone).date() - timedelta(days=1)  # yesterday's window may run past midnight UTC
        for offset in range(SEARCH_LIMIT_DAYS):
            span = self.window(day + timedelta(days=offset))
            if span and span[1] > moment:
                yield max(span[0], moment), span[1]
        raise NeverOpen("The calendar has no working time in the next ten years.")

    def is_open(self, moment: datetime) -> bool:
        span = self.window(moment.astimezone(self.zone).date())
        return bool(span and span[0] <= moment < span[1])


def add(start: datetime, duration: timedelta, hours: Hours | None) -> datetime:
    """The moment ``duration`` of business time after ``start``."""
    if hours is None:
        return start + duration
    remaining = duration
    if remaining <= timedelta(0):
        # Zero business time from a moment outside hours is the next opening: a clock cannot end while paused.
        return next(hours.windows_from(start))[0] if not hours.is_open(start) else start
    for begin, end in hours.windows_from(start):
        if end - begin >= remaining:
            return begin + remaining
        remaining -= end - begin
    raise AssertionError("unreachable: windows_from raises when exhausted")  # pragma: no cover


def between(start: datetime, end: datetime, hours: Hours | None) -> timedelta:
    """Business time from ``start`` to ``end``; negative when ``end`` comes first."""
    if end < start:
        return -between(end, start, hours)
    if hours is None:
        return end - start
    total = timedelta(0)
    for begin, finish in hours.windows_from(start):
        if begin >= end:
            break
        total += min(finish, end) - begin
    return total
