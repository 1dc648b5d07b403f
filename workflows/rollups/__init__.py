"""Daily rollups: the resume dashboard and readiness in bounded time over any history.

The figures are defined once, in ``workflows.metrics`` (and readiness's in
``workflows.readiness_figures``); this module computes them **per UTC day** with those
very definitions and keeps the result in ``DailyRollup`` rows, so a page sums
a few thousand small rows instead of judging every workflow of the period.

Which day a thing counts on (the day the live definitions place it on):

- a degraded workflow: the day of its first interruption (its first
  checkpoint, or its failure without one), with every set and share it
  belongs to, and its interruption-to-completion time;
- a launch, and the steps behind readiness's "what state survived": the day
  the workflow was created;
- a checkpoint's opening, its clocks (time to claim, to decision), its SLA
  breach and the decisions taken on it: the day it opened;
- a resume: the day the decision reached the agent.

A workflow's figures change after its day (a resume completes, the sweep
records a breach, a late effect commits), so every change that matters writes
an ``Event``, and a day is **touched** when a workflow with an event since the
last roll counts on it. ``roll_recent`` (Celery beat, every
``ROLLUP_INTERVAL_SECONDS``) re-rolls the touched days and today;
``manage.py rebuild_rollups`` rebuilds any range. Rolling a day deletes and
inserts its rows in one transaction, under a lock on the ``RollupState`` row:
rolling twice gives the same rows.

A page reads the rows of the rolled days and computes live, with the same
code, only the days not rolled yet or touched since the last roll (today,
typically: bounded by one day's rows, read through the day indexes).

Counts are exact: a figure read from the rollups equals the live definition
for the same period and filters. Medians and 90th percentiles come from a
histogram of log-spaced buckets 2 % wide, read at each bucket's geometric
middle: within 1 % of the exact value (the count is exact).
"""

from .histograms import BUCKET_FLOOR, ApproxTiming, bucket_of, bucket_value
from .reading import Figures, choices, kinds, live_days
from .rolling import IN_FLIGHT, ROLL_LOCK, days_in, one_roll_at_a_time, rebuild, roll_day, roll_recent

# What the pages, the beat, manage.py rebuild_rollups and the tests use, by the package's name.
__all__ = [
    "BUCKET_FLOOR",
    "IN_FLIGHT",
    "ROLL_LOCK",
    "ApproxTiming",
    "Figures",
    "bucket_of",
    "bucket_value",
    "choices",
    "days_in",
    "kinds",
    "live_days",
    "one_roll_at_a_time",
    "rebuild",
    "roll_day",
    "roll_recent",
]
