"""POST /workflows/{id}/steps/batch: many steps of one workflow, all or none, idempotent like single reports."""

import pytest

from tests.apitools import api_agent, expect
from workflows.models import Event, Step

pytestmark = pytest.mark.django_db


def step(seq, name="read_ticket", kind="tool", status="committed", **fields):
    return {"seq": seq, "name": name, "kind": kind, "status": status, **fields}


def batch(bot, workflow_id, steps):
    return bot.post(f"/workflows/{workflow_id}/steps/batch", {"steps": steps})


@pytest.fixture
def bot():
    return api_agent()


@pytest.fixture
def workflow_id(bot):
    return bot.create_workflow("T-1042")["id"]


def recorded(workflow_id):
    return list(Step.objects.filter(workflow_id=workflow_id).order_by("seq").values_list("seq", "status"))


def test_a_batch_records_every_step_with_its_event(bot, workflow_id):
    steps = [
        step(1),
        step(2, "decide", "model"),
        step(3, "issue_refund", "effect", "pending", idempotency_key="T-1042:refund", input={"amount": "42.00"}),
    ]
    body = expect(batch(bot, workflow_id, steps), 201)
    assert body["created"] == [1, 2, 3]
    assert [s["seq"] for s in body["steps"]] == [1, 2, 3]
    assert body["steps"][2]["input"] == {"amount": "42.00"} and body["steps"][2]["status"] == "pending"
    assert recorded(workflow_id) == [(1, "committed"), (2, "committed"), (3, "pending")]
    assert Event.objects.filter(workflow_id=workflow_id, verb__startswith="step_").count() == 3
    assert bot.workflow(workflow_id)["steps"] == body["steps"]  # the same bodies a GET shows


def test_the_same_batch_again_is_200_and_changes_nothing(bot, workflow_id):
    steps = [step(1), step(2, "issue_refund", "effect", "pending", idempotency_key="k")]
    expect(batch(bot, workflow_id, steps), 201)
    events = Event.objects.count()
    body = expect(batch(bot, workflow_id, steps), 200)
    assert body["created"] == [] and len(body["steps"]) == 2
    assert Event.objects.count() == events


def test_a_batch_mixes_new_steps_resends_and_commits(bot, workflow_id):
    expect(batch(bot, workflow_id, [step(1), step(2, "issue_refund", "effect", "pending", idempotency_key="k")]), 201)
    body = expect(
        batch(
            bot,
            workflow_id,
            [
                step(1),
                step(2, "issue_refund", "effect", "committed", idempotency_key="k", external_ref="R-1"),
                step(3, "write_note", "effect", "committed", idempotency_key="n"),
            ],
        ),
        201,
    )
    assert body["created"] == [3]
    assert recorded(workflow_id) == [(1, "committed"), (2, "committed"), (3, "committed")]
    assert Step.objects.get(workflow_id=workflow_id, seq=2).external_ref == "R-1"


@pytest.mark.parametrize(
    ("bad", "status", "code", "field"),
    [
        (step(1, "other_name"), 409, "step_conflict", "steps.2"),  # a committed step cannot change at all
        (
            step(9, "refund_again", "effect", "pending", idempotency_key="k"),
            409,
            "idempotency_key_taken",
            "steps.2.idempotency_key",
        ),
        (step(4), 422, "duplicate_seq", "steps.2.seq"),
    ],
)
def test_one_refused_step_records_none_of_the_batch(bot, workflow_id, bad, status, code, field):
    expect(batch(bot, workflow_id, [step(1), step(2, "issue_refund", "effect", "pending", idempotency_key="k")]), 201)
    before = (recorded(workflow_id), Event.objects.count())
    response = batch(bot, workflow_id, [step(3), step(4), bad, step(5)])
    error = expect(response, status)["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert "Nothing in this batch was recorded" in error["message"]
    steps_before, events_before = before
    assert recorded(workflow_id) == steps_before
    # Nothing of the batch is recorded; a reused effect key is itself audited, as for a single report
    # (issue 10 counts duplicate-effect attempts), and nothing else is.
    new_verbs = list(Event.objects.order_by("pk").values_list("verb", flat=True)[events_before:])
    assert new_verbs == (["effect_duplicate_refused"] if code == "idempotency_key_taken" else [])


def test_limits_and_validation_name_the_step(bot, workflow_id):
    error = expect(batch(bot, workflow_id, [step(1), step(2, "pay", "effect")]), 422)["error"]
    assert error["field"] == "steps.1.idempotency_key"
    error = expect(batch(bot, workflow_id, []), 422)["error"]
    assert (error["code"], error["field"]) == ("too_short", "steps")
    error = expect(batch(bot, workflow_id, [step(i) for i in range(1, 502)]), 422)["error"]
    assert (error["code"], error["field"]) == ("too_long", "steps")
    assert recorded(workflow_id) == []


def test_a_finished_workflow_takes_no_batch_and_another_agents_is_404(bot, workflow_id):
    bot.finish(workflow_id)
    assert expect(batch(bot, workflow_id, [step(1)]), 409)["error"]["code"] == "workflow_finished"
    other = api_agent()
    assert batch(other, workflow_id, [step(1)]).status_code == 404


AWKWARD = ['he said "hi"', "back\\slash", "a,b", "{braces}", "NULL", "null", "", " padded ", "émoji 😀", '\\"', "\t"]


def test_awkward_text_and_json_are_stored_exactly_as_sent(bot, workflow_id):
    """The batch's columns travel as array literals: quotes, backslashes, commas, braces, the word NULL, an empty
    string and JSON whose text needs escaping come back exactly as sent, and each step's event names it."""
    steps = [
        step(
            i + 1,
            name=text or "x",
            promise=text,
            external_ref=text,
            input={"text": text, text: [text, None, 1.5, 10**30]},
            output=text,
            verified=bool(i % 2),
        )
        for i, text in enumerate(AWKWARD)
    ]
    steps.append(step(len(steps) + 1, "nothing", input=None, output=None, promise=None, external_ref=None))
    body = expect(batch(bot, workflow_id, steps), 201)
    sent = [{"verified": False, **s, "idempotency_key": None} for s in steps]
    assert body["steps"] == sent
    assert bot.workflow(workflow_id)["steps"] == sent
    nothing = Step.objects.get(workflow_id=workflow_id, seq=len(steps))
    assert nothing.input is None and nothing.output is None  # SQL NULL, not JSON null
    assert Step.objects.filter(workflow_id=workflow_id, input__isnull=True).count() == 1
    events = Event.objects.filter(workflow_id=workflow_id, verb="step_committed").order_by("id")
    assert [e.data["name"] for e in events] == [s["name"] for s in steps]  # in the order sent
    assert expect(batch(bot, workflow_id, steps), 200)["created"] == []  # and a resend is identical


def test_events_follow_the_order_sent_and_resends_in_a_batch_are_judged_as_usual(bot, workflow_id):
    expect(batch(bot, workflow_id, [step(5, "e", "effect", "pending", idempotency_key="k5")]), 201)
    body = expect(
        batch(
            bot,
            workflow_id,
            [step(9, "nine"), step(5, "e", "effect", "committed", idempotency_key="k5"), step(2, "two")],
        ),
        201,
    )
    assert body["created"] == [9, 2]
    assert [s["seq"] for s in body["steps"]] == [9, 5, 2]
    verbs = list(
        Event.objects.filter(workflow_id=workflow_id, verb__startswith="step_")
        .order_by("id")
        .values_list("verb", "data")
    )
    assert [(verb, data["seq"]) for verb, data in verbs] == [
        ("step_pending", 5),
        ("step_committed", 9),
        ("step_committed", 2),
        ("step_committed", 5),
    ]


DEFAULTS = {
    "input": None,
    "output": None,
    "verified": False,
    "promise": None,
    "idempotency_key": None,
    "external_ref": None,
}


def test_the_answer_is_the_same_json_whichever_way_it_is_rendered(bot, workflow_id):
    """Plain bodies are rendered by orjson, a body with an integer past 64 bits by the API's renderer: the same
    JSON, with the API's content type."""
    plain = [step(1, "naïve ✓", input={"q": "é", "n": [1, 2.5, None, True]}, output={"ok": "ü"})]
    big = [step(2, "big", input={"n": 10**30})]
    for steps in (plain, big):
        response = batch(bot, workflow_id, steps)
        assert response["Content-Type"] == "application/json; charset=utf-8"
        body = expect(response, 201)
        assert body == {
            "created": [steps[0]["seq"]],
            "steps": [{**DEFAULTS, **s} for s in steps],
        }
