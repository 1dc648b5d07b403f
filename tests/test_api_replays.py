"""The API's additions for replays: an agent advertises what it can do, and posts a long replay's results."""

from tests.apitools import AgentApi, assert_error, expect
from tests.helpers import make_agent
from workflows.models import Agent, ReplayRun


def api_for(runtime):
    record = runtime.record
    token = record.set_new_token()
    record.save()
    return AgentApi(record, token)


def test_an_agent_advertises_its_capabilities_and_reads_them_back(db):
    agent, token = make_agent("bot")
    api = AgentApi(agent, token)

    body = expect(
        api.post(
            "/agent/capabilities",
            {"capabilities": ["replay", "fork", "replay"], "runtime_version": "bot/2.3", "kinds": ["refund"]},
        ),
        200,
    )

    assert body == {
        "name": "bot",
        "capabilities": ["fork", "replay"],
        "runtime_version": "bot/2.3",
        "kinds": ["refund"],
        "replay_endpoint": False,
        "fork_edits": [],
    }
    assert expect(api.get("/agent"), 200) == body
    agent.refresh_from_db()
    assert agent.capabilities == ["fork", "replay"]
    assert "no replay endpoint configured" in agent.cannot(Agent.Capability.REPLAY)
    assert_error(api.post("/agent/capabilities", {"capabilities": ["time_travel"]}), 422, "invalid_choice")


def test_results_posted_later_are_compared_like_inline_ones(runtime, olga):
    api = api_for(runtime)
    workflow = runtime.recorded_workflow()
    run = ReplayRun.request(workflow, from_seq=3, to_seq=4, by=olga)
    run.start()  # the runtime answered 202
    ticket = workflow.steps.get(seq=3).output

    body = expect(
        api.post(
            f"/replays/{run.replay_id}/results",
            {
                "results": [
                    {"seq": 3, "output": ticket},
                    {"seq": 4, "output": {"category": "changed", "priority": "normal"}},
                ],
                "runtime_version": "later/1",
            },
        ),
        200,
    )

    assert body["status"] == "succeeded" and body["first_divergent_seq"] == 4
    assert body["explanation"].startswith("step 4 `classify_ticket`: output.category")
    assert expect(api.get(f"/replays/{run.replay_id}"), 200)["status"] == "succeeded"
    assert_error(api.post(f"/replays/{run.replay_id}/results", {"results": []}), 409, "replay_finished")


def test_a_runtime_that_cannot_replay_says_why_and_the_replay_fails_with_it(runtime, olga):
    api = api_for(runtime)
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    run.start()

    body = expect(api.post(f"/replays/{run.replay_id}/results", {"error": "model v3 is retired"}), 200)

    assert body["status"] == "failed" and body["reason"] == "The runtime could not replay: model v3 is retired"


def test_another_agents_replay_is_not_found(runtime, olga):
    run = ReplayRun.request(runtime.recorded_workflow(), from_seq=3, to_seq=4, by=olga)
    other, token = make_agent("other")

    assert_error(AgentApi(other, token).get(f"/replays/{run.replay_id}"), 404, "not_found")
    assert_error(AgentApi(other, token).get("/replays/not-a-uuid"), 404, "not_found")
