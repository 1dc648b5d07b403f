"""The demo's "provider outage" switch, end to end against the real API: while on, every new workflow's model
step fails and the console groups them into an incident; the demo agent honours a hold (it stops at the
``held`` checkpoint the console opened) and is refused new work under a refusing hold; with the outage off, a
rollout recovers every member in waves, each refund executed exactly once."""

import urllib.parse
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone
from recovery_client import ApiError

from demo.journal import WAITING, Journal
from demo.server import ResumeServer
from demo.systems import Ledgers
from workflows import tasks
from workflows.models import Decider, Decision, Hold, Incident, Rollout, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_the_ledgers_page_switches_the_outage_on_and_off(tmp_path):
    server = ResumeServer(
        {}, journal=Journal(tmp_path / "runtime.sqlite3"), ledgers=Ledgers(tmp_path / "l.sqlite3"), port=0
    )
    server.start()
    try:

        def page():
            with urllib.request.urlopen(server.url("/ledgers"), timeout=5) as response:
                return response.read().decode()

        def switch(value, **more):
            body = urllib.parse.urlencode({"outage": value, **more}).encode()
            opener = urllib.request.build_opener(NoRedirect)
            with pytest.raises(urllib.error.HTTPError) as answer:
                opener.open(urllib.request.Request(server.url("/faults/outage"), data=body), timeout=5)
            assert answer.value.code == 303 and answer.value.headers["Location"] == "/ledgers"

        assert "Start a provider outage" in page() and not server.provider.outage
        switch("1")
        assert server.provider.outage and "End the provider outage" in page() and "Provider outage" in page()
        assert server.provider.out_for("support-bot") and server.provider.out_for("billing-bot")  # every agent
        switch("0")
        assert not server.provider.outage and "Start a provider outage" in page()
        # One agent's outage (the chaos run's incident scenario posts its name): the others' calls go through.
        switch("1", agent="billing-bot")
        assert "Provider outage</strong> for billing-bot" in page()
        assert server.provider.out_for("billing-bot") and not server.provider.out_for("support-bot")
        switch("0")
        assert not server.provider.out_for("billing-bot") and server.provider.outage_agent == ""
    finally:
        server.stop()


def _deliver_all(fleet, decisions):
    for decision in decisions:
        assert tasks.deliver_decision(decision.pk) == "delivered"
    fleet.server.release()
    assert fleet.server.join(timeout=60), "the agent did not finish carrying the decisions out"


def test_an_outage_forms_an_incident_the_agent_honours_the_hold_and_waves_recover_it(fleet, olivia, operator):
    agent = fleet.agent(owner=olivia)
    fleet.server.provider.outage = True
    runs = [agent.start() for _ in range(5)]
    assert [outcome for _run, outcome in runs] == ["paused"] * 5
    incident = Incident.objects.get()
    assert (
        incident.members.count() == 5 and incident.reason == "model_timeout" and incident.step_name == "decide_refund"
    )
    assert "model provider unavailable" in incident.detail_pattern
    assert all(fleet.executed(run.external_id) == {"refund": 0, "note": 0, "message": 0} for run, _ in runs)

    # Held, refusing new work: the agent is told so and starts nothing.
    refusing = incident.hold(by=operator, new_workflows=Hold.NewWorkflows.REFUSE)
    with pytest.raises(ApiError) as refused:
        agent.create_run()
    assert refused.value.status == 409 and refused.value.code == "agent_on_hold"
    assert refusing.lift(by=operator)

    # Held, pausing: a workflow that starts stops at its first report, at the console's own checkpoint.
    fleet.server.provider.outage = False
    pausing = incident.hold(by=operator, new_workflows=Hold.NewWorkflows.PAUSE)
    held_run, outcome = agent.start()
    assert outcome == "paused"
    held = Workflow.objects.get(external_id=held_run.external_id).checkpoints.get()
    assert held.reason == "held" and held.incident_id == incident.pk
    assert fleet.journal.run(held_run.external_id)["status"] == WAITING
    assert fleet.journal.run(held_run.external_id)["checkpoint_id"] == str(held.pk)
    assert fleet.executed(held_run.external_id) == {"refund": 0, "note": 0, "message": 0}

    # The outage is over: the hold is lifted (a held run resumed would be held again), and one decision for the
    # incident goes out in waves (a canary of 2 of 6, then 4).
    assert pausing.lift(by=operator)
    rollout = Rollout.start(
        incident,
        action="resume",
        by=operator,
        canary_percent=20,
        money_total={c: str(a) for c, a in Rollout.stake_of(incident, "resume").totals.items()},
    )  # as typed
    now = timezone.now()
    by_hand = []
    for minute in range(1, 10):
        rollout.advance(now + timedelta(minutes=minute))
        rollout.refresh_from_db()
        if rollout.status != Rollout.Status.RUNNING:
            break
        queued = Decision.objects.filter(checkpoint__incident=incident, status=Decision.Status.QUEUED)
        if not queued.exists():
            # The held run stopped before its refund: its amount is not in its resume state, so the rollout's
            # confirmed total cannot cover it and it waits for its own decision, taken on its workbench.
            for checkpoint, why in rollout.waiting():
                assert "does not cover" in why, why
                Decider(checkpoint).decide(by=operator, action="resume", money_confirmed=True)
                by_hand.append(checkpoint.pk)
        _deliver_all(fleet, Decision.objects.filter(checkpoint__incident=incident, status=Decision.Status.QUEUED))
    assert rollout.status == Rollout.Status.COMPLETED, (rollout.halt_reason, rollout.waves, rollout.waiting())
    assert [len(w["checkpoints"]) for w in rollout.waves] == [2, 3] and by_hand == [held.pk]
    members = Workflow.objects.filter(checkpoints__incident=incident).distinct()
    assert members.count() == 6 and set(members.values_list("status", flat=True)) == {Workflow.Status.COMPLETED}
    for workflow in members:
        assert fleet.executed(workflow.external_id) == {"refund": 1, "note": 1, "message": 1}
