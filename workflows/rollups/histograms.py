"""The histograms the rollups keep their durations in: log-spaced buckets 2 % wide, read at each bucket's
geometric middle, so a median or 90th percentile summed over any days is within 1 % of the exact value."""

from __future__ import annotations

import math
from dataclasses import dataclass

BUCKET_FLOOR = 0.001  # seconds: anything at or under it is read as 0
BUCKET_BASE = 1.02
TIMINGS = ("time_to_claim", "time_to_decision", "interruption_to_completion")
TIMING_LABELS = {
    "time_to_claim": "Time to claim",
    "time_to_decision": "Time to decision",
    "interruption_to_completion": "Interruption to completion",
}


def bucket_of(seconds: float) -> int:
    """The log-spaced bucket of a duration: [FLOOR·BASE^k, FLOOR·BASE^(k+1)); -1 for none at all."""
    if seconds <= BUCKET_FLOOR:
        return -1
    return math.floor(math.log(seconds / BUCKET_FLOOR) / math.log(BUCKET_BASE))


def bucket_value(bucket: int) -> float:
    return 0.0 if bucket < 0 else BUCKET_FLOOR * BUCKET_BASE ** (bucket + 0.5)


@dataclass(frozen=True)
class ApproxTiming:
    """``timings.Timing`` read from a histogram: the count exact, median and p90 within 1 %."""

    label: str
    histogram: dict[int, int]

    @property
    def count(self) -> int:
        return sum(self.histogram.values())

    def _at_rank(self, rank: int) -> float:  # rank 1..count, ascending
        seen = 0
        for bucket in sorted(self.histogram):
            seen += self.histogram[bucket]
            if seen >= rank:
                return bucket_value(bucket)
        raise IndexError(rank)

    @property
    def median(self) -> float | None:
        n = self.count
        if not n:
            return None
        if n % 2:
            return self._at_rank(n // 2 + 1)
        return (self._at_rank(n // 2) + self._at_rank(n // 2 + 1)) / 2  # as statistics.median

    @property
    def p90(self) -> float | None:
        n = self.count
        return self._at_rank(max(1, math.ceil(0.9 * n))) if n else None  # nearest rank, as timings.percentile
