"""Daily rollups of the recovery figures: what the resume dashboard and readiness read instead of every row.

``workflows.rollups`` computes and reads them; the figures themselves stay defined once, in
``workflows.metrics``. One row per UTC day × agent × workflow kind × reason × runbook × team holds counts and
histograms; ``ANY`` in the reason, runbook or team column is the row that counts every workflow once,
whatever its checkpoints' reasons, runbooks and teams (a workflow paused for two reasons counts once under
each reason and once under ``ANY``). Launches and steps belong to no team: only their ``ANY`` row holds them.
"""

from __future__ import annotations

from django.db import models

ANY = "*"


class DailyRollup(models.Model):
    day = models.DateField()
    agent = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)
    reason = models.CharField(max_length=40, default=ANY)
    runbook = models.CharField(max_length=100, default=ANY)
    team = models.CharField(max_length=60, default=ANY)  # the checkpoints' team (slug)
    # {"degraded": 12, "resumed_without_data_loss:met": 9, "launches": 40, "opened": 14, ...}
    counts = models.JSONField(default=dict)
    # {"time_to_claim": {"<bucket>": n, ...}, ...}: see workflows.rollups.bucket_of
    timings = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "agent", "kind", "reason", "runbook", "team"], name="one_rollup_per_day_and_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.agent} {self.kind} {self.reason} {self.runbook} {self.team}"


class RollupState(models.Model):
    """One row: which days the rollups cover, and since when activity has not been rolled yet."""

    first_day = models.DateField(help_text="Days before this one held no data when the rollups were rebuilt.")
    last_day = models.DateField(help_text="The last day rolled.")
    rolled_since = models.DateTimeField(help_text="Activity (events) from this moment on is not rolled yet.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"rolled {self.first_day}..{self.last_day}, activity up to {self.rolled_since:%Y-%m-%d %H:%M:%S}"
