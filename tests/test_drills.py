"""Recovery drills (issue 26): defined, started by hand, picking runs, telling the agent, never moving money."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.apitools import AgentApi, api_agent, assert_error, expect, issue_refund
from tests.helpers import make_step, make_user, make_workflow
from workflows.models import Agent, Conflict, Drill, Event, Workflow

pytestmark = pytest.mark.django_db


def drilling_agent(*extra: str) -> AgentApi:
    bot = api_agent()
    bot.agent.advertise(["drill", *extra])
    return bot


def make_drill(agent: Agent, **kwargs) -> Drill:
    fields = {
        "name": "crash after the ticket is read",
        "fault": Drill.Fault.CRASH_AFTER_STEP,
        "at_seq": 1,
        "runs": 2,
        **kwargs,
    }
    drill = Drill(agent=agent, **fields)
    drill.full_clean()
    drill.save()
    return drill


def test_a_started_drill_picks_the_next_n_new_workflows_and_no_more():
    bot = drilling_agent()
    tess = make_user("tess", role="tpm")
    drill = make_drill(bot.agent, runs=2)
    before = bot.create_workflow("T-0")  # created before the start: never picked
    assert drill.start(by=tess)
    assert not drill.start(by=tess)  # a double click starts it once
    ids = [bot.create_workflow(f"T-{n}")["id"] for n in range(1, 5)]
    drilled = set(Workflow.objects.filter(drill=drill).values_list("pk", flat=True))
    assert drilled == {int(ids[0]), int(ids[1])}
    assert Workflow.objects.get(pk=before["id"]).drill is None
    drill.refresh_from_db()
    assert drill.picked == 2 and drill.status == Drill.Status.RUNNING
    assert Event.objects.filter(verb=Event.Verb.DRILL_STARTED, actor_user=tess).count() == 1
    assert Event.objects.filter(verb=Event.Verb.DRILL_ENLISTED).count() == 2


def test_a_drill_of_a_kind_picks_only_that_kind():
    bot = drilling_agent()
    drill = make_drill(bot.agent, kind="refund", runs=5)
    drill.start()
    other = bot.create_workflow("T-1", kind="address_change")
    refund = bot.create_workflow("T-2")
    assert Workflow.objects.get(pk=other["id"]).drill is None
    assert Workflow.objects.get(pk=refund["id"]).drill == drill


def test_a_share_of_runs_is_a_stable_draw_within_the_window():
    bot = drilling_agent()
    everyone = make_drill(bot.agent, runs=None, share_percent=100, window_minutes=5)
    everyone.start()
    assert all(Workflow.objects.get(pk=bot.create_workflow(f"T-{n}")["id"]).drill == everyone for n in range(3))
    everyone.end()
    nobody_after_the_window = make_drill(bot.agent, runs=None, share_percent=100, window_minutes=0)
    nobody_after_the_window.start()
    assert Workflow.objects.get(pk=bot.create_workflow("T-late")["id"]).drill is None


def test_an_agent_that_does_not_advertise_drills_is_never_picked_and_cannot_be_drilled():
    bot = api_agent()
    drill = Drill(agent=bot.agent, name="x", fault=Drill.Fault.GARBAGE_AT_STEP, runs=1)
    with pytest.raises(ValidationError, match="does not advertise drill support"):
        drill.full_clean()
    bot.agent.advertise(["drill"])
    drill.full_clean()
    drill.save()
    drill.start()
    bot.agent.advertise([])  # it stopped supporting drills after the start
    assert Workflow.objects.get(pk=bot.create_workflow("T-1")["id"]).drill is None
    with pytest.raises(Conflict, match="does not advertise"):
        Drill(agent=bot.agent, name="y", fault=Drill.Fault.GO_SILENT, runs=1).start()


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"runs": None}, "runs"),
        ({"runs": 1, "share_percent": 10}, "runs"),
        ({"runs": 0}, "runs"),
        ({"runs": None, "share_percent": 101}, "share_percent"),
        ({"at_seq": 0}, "at_seq"),
    ],
)
def test_which_runs_take_part_is_one_clear_choice(bad, field):
    bot = drilling_agent()
    drill = Drill(agent=bot.agent, name="x", fault=Drill.Fault.CRASH_AFTER_STEP, **{"runs": 1, **bad})
    with pytest.raises(ValidationError) as refused:
        drill.full_clean()
    assert field in refused.value.message_dict


# --- the instruction in the step report's answer -----------------------------------------------


def test_a_drilled_workflow_is_told_its_fault_in_every_step_answer_until_it_pauses():
    bot = drilling_agent()
    drill = make_drill(bot.agent, fault=Drill.Fault.GARBAGE_AT_STEP, at_seq=2)
    drill.start()
    wf = bot.create_workflow("T-1")["id"]
    answer = bot.report(wf, 1, "read_ticket", status="pending")
    assert answer["instruction"] == {
        "drill": {"id": str(drill.pk), "fault": "garbage_at_step", "at_seq": 2, "silent_minutes": 10}
    }
    assert answer["seq"] == 1 and answer["status"] == "pending"  # every field of the answer is still there
    assert "instruction" in bot.report(wf, 1, "read_ticket", status="committed", expect_status=200)
    bot.open_checkpoint(wf, reason="untrusted_output")
    # Once the fault was carried out (a checkpoint), a resumed run is not told again.
    assert "announced" not in answer["instruction"]["drill"]


def test_an_undrilled_workflow_answers_exactly_as_before(bot, workflow_id):
    body = bot.report(workflow_id, **issue_refund())
    assert "instruction" not in body
    batch = expect(
        bot.post(
            f"/workflows/{workflow_id}/steps/batch",
            {"steps": [{"seq": 4, "name": "note", "kind": "tool", "status": "committed"}]},
        ),
        201,
    )
    assert "instruction" not in batch


def test_a_batch_report_of_a_drilled_workflow_carries_the_instruction_too():
    bot = drilling_agent()
    make_drill(bot.agent).start()
    wf = bot.create_workflow("T-1")["id"]
    batch = expect(
        bot.post(
            f"/workflows/{wf}/steps/batch",
            {"steps": [{"seq": 1, "name": "read", "kind": "tool", "status": "committed"}]},
        ),
        201,
    )
    assert batch["instruction"]["drill"]["fault"] == "crash_after_step"


def test_the_instruction_stops_once_the_fault_opened_a_checkpoint():
    bot = drilling_agent()
    make_drill(bot.agent).start()
    wf = bot.create_workflow("T-1")["id"]
    bot.report(wf, 1, "read_ticket")
    checkpoint = bot.open_checkpoint(wf)
    workflow = Workflow.objects.get(pk=wf)
    assert Drill.instruction_for(workflow) == {}
    assert checkpoint["status"] == "open"


# --- money ---------------------------------------------------------------------------------------


def test_a_drill_that_would_fault_after_a_money_effect_is_refused_without_a_sandbox():
    bot = drilling_agent()
    earlier = make_workflow(bot.agent, kind="refund")
    make_step(earlier, 1, "read_ticket")
    make_step(earlier, 2, "issue_refund", "effect", input={"amount": "42.00", "currency": "EUR"})
    before_the_money = Drill(
        agent=bot.agent, name="early", kind="refund", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=1, runs=1
    )
    before_the_money.full_clean()  # step 1 comes before any money: allowed
    at_the_money = Drill(
        agent=bot.agent, name="late", kind="refund", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=2, runs=1
    )
    with pytest.raises(ValidationError, match="moves money"):
        at_the_money.full_clean()
    anywhere = Drill(agent=bot.agent, name="silent", kind="refund", fault=Drill.Fault.GO_SILENT, runs=1)
    with pytest.raises(ValidationError, match="issue_refund"):
        anywhere.full_clean()
    bot.agent.advertise(["drill", "drill_sandbox"])
    at_the_money.full_clean()
    anywhere.full_clean()


def test_the_api_refuses_a_drilled_workflows_money_effect_in_every_shape():
    bot = drilling_agent()
    make_drill(bot.agent, runs=3).start()
    wf = bot.create_workflow("T-1")["id"]
    error = assert_error(bot.post(f"/workflows/{wf}/steps", issue_refund()), 409, "drill_refuses_money", "input")
    assert "never move real money" in error["message"]
    nested = issue_refund(input={"refund": {"refundAmount": "42,00 EUR"}})
    assert_error(bot.post(f"/workflows/{wf}/steps", nested), 409, "drill_refuses_money")
    batch = {"steps": [{"seq": 1, "name": "read", "kind": "tool", "status": "committed"}, {**issue_refund(), "seq": 2}]}
    refused = assert_error(bot.post(f"/workflows/{wf}/steps/batch", batch), 409, "drill_refuses_money")
    assert refused["field"] == "steps.1.input"
    assert not Workflow.objects.get(pk=wf).steps.exists()  # the batch: all or none
    # An effect that carries no money goes through.
    bot.report(wf, 1, "write_ticket_note", "effect", input={"note": "refund pending"}, idempotency_key="T-1:note")


def test_an_effect_name_that_moved_money_before_counts_even_without_an_amount():
    bot = drilling_agent()
    earlier = make_workflow(bot.agent, kind="other")
    make_step(earlier, 1, "issue_refund", "effect", input={"amount": "5.00", "currency": "EUR"})
    make_drill(bot.agent, kind="refund").start()
    wf = bot.create_workflow("T-1")["id"]
    assert_error(bot.post(f"/workflows/{wf}/steps", issue_refund(input={"ticket": "T-1"})), 409, "drill_refuses_money")


def test_a_sandboxed_agent_runs_its_drilled_money_effects_and_undrilled_runs_are_untouched():
    bot = drilling_agent("drill_sandbox")
    make_drill(bot.agent).start()
    wf = bot.create_workflow("T-1")["id"]
    bot.report(wf, **issue_refund())
    plain = api_agent()
    plain_wf = plain.create_workflow("T-2")["id"]
    plain.report(plain_wf, **issue_refund())


def test_the_capabilities_endpoint_takes_drill_and_drill_sandbox():
    bot = api_agent()
    body = expect(bot.post("/agent/capabilities", {"capabilities": ["drill", "drill_sandbox", "replay"]}), 200)
    assert set(body["capabilities"]) == {"drill", "drill_sandbox", "replay"}
    assert Agent.objects.get(pk=bot.agent.pk).can("drill")


# --- scheduling: a timer column the periodic sweep reads ------------------------------------------


def test_the_sweep_starts_a_scheduled_drill_when_its_time_comes_and_once():
    from datetime import timedelta

    from django.utils import timezone

    from workflows.tasks import sweep

    bot = drilling_agent()
    drill = make_drill(bot.agent)
    assert drill.schedule(timezone.now() + timedelta(hours=1))
    assert sweep()["drills"] == 0
    Drill.objects.filter(pk=drill.pk).update(next_run_at=timezone.now() - timedelta(seconds=1))
    assert sweep()["drills"] == 1
    assert sweep()["drills"] == 0
    drill.refresh_from_db()
    assert drill.status == Drill.Status.RUNNING and drill.next_run_at is None


def test_a_scheduled_drill_whose_agent_stopped_supporting_drills_goes_back_to_draft_with_the_reason():
    from datetime import timedelta

    from django.utils import timezone

    bot = drilling_agent()
    drill = make_drill(bot.agent)
    drill.schedule(timezone.now() - timedelta(seconds=1))
    bot.agent.advertise([])
    assert Drill.start_due() == 0
    drill.refresh_from_db()
    assert drill.status == Drill.Status.DRAFT
    refused = Event.objects.get(verb=Event.Verb.DRILL_REFUSED)
    assert "does not advertise" in refused.data["refused"]
