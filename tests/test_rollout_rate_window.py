"""A rollout's rate window, as the sweep runs it on the real clock: the next wave may go no sooner than a
window after the last decision of the previous one (deciding a wave takes time, and any window of the
rate's length must hold one wave at most); an unsettled wave is looked at again after the recheck delay."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers import REMAINING_PLAN, make_agent, make_workflow
from workflows.models import Checkpoint, Decision, Incident, Rollout

pytestmark = pytest.mark.django_db


def _incident(n: int) -> Incident:
    agent, _ = make_agent()
    agent.incident_threshold = n
    agent.save()
    for i in range(n):
        Checkpoint.open_for(
            make_workflow(agent),
            reason="tool_error",
            at_seq=4,
            plan=REMAINING_PLAN,
            detail=f"payments provider answered 502 for T-{i}",
        )
    return Incident.objects.get()


def test_the_next_wave_waits_a_window_after_the_last_decision_of_this_one(alice, settings):
    settings.ROLLOUT_RATE_WINDOW_SECONDS = 7
    rollout = Rollout.start(_incident(6), action="resume", by=alice, canary_percent=50)
    assert Rollout.advance_due() == 1  # the sweep: no ``now`` given, the real clock
    rollout.refresh_from_db()
    last_decided = Decision.objects.order_by("-decided_at").values_list("decided_at", flat=True)[0]
    assert len(rollout.waves[0]["checkpoints"]) == 3
    assert rollout.next_at >= last_decided + timedelta(seconds=7)
    assert rollout.next_at <= last_decided + timedelta(seconds=8)


def test_an_unsettled_wave_is_looked_at_again_after_the_recheck_delay(alice, settings):
    settings.ROLLOUT_RATE_WINDOW_SECONDS = 0
    settings.ROLLOUT_RECHECK_SECONDS = 3
    rollout = Rollout.start(_incident(4), action="resume", by=alice, canary_percent=25, watch_seconds=600)
    Rollout.advance_due()
    rollout.refresh_from_db()
    judged_at = rollout.next_at + timedelta(seconds=1)
    assert Rollout.advance_due(judged_at) == 0, "the canary has not settled and its watch window runs"
    rollout.refresh_from_db()
    assert rollout.next_at == judged_at + timedelta(seconds=3)
    assert len(rollout.waves) == 1
