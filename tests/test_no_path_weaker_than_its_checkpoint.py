"""No path is weaker than the checkpoint it comes from (issue 22, finding 1 and its class).

A fork's checkpoint opens with reason ``manual`` and matches whatever runbook takes that reason: it used to
deliver at once, past the four eyes and the allowed decisions of the checkpoint it came from. Here every
decision-making URL of the console and every route of the agent API is walked (from the URLconf, like
tests/test_access_rules.py, so a new route cannot escape) by one operator alone against a four-eyes money
checkpoint, and no resume, retry, failover or fork may go out without a second operator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from console.roles import url_rules
from tests.helpers import make_agent, make_checkpoint, make_runbook, make_step, make_user, make_workflow
from tests.test_access_rules import example_path
from workflows.models import (
    RESUMING_ACTIONS,
    Action,
    Agent,
    Checkpoint,
    Decider,
    Decision,
    Workflow,
    fork_workflow,
)

pytestmark = pytest.mark.django_db

MONEY_PLAN = [
    {"name": "issue_refund", "kind": "effect", "amount": "420.00", "currency": "EUR", "moves_money": True},
    {"name": "notify_customer", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
]


def refund_run(agent: Agent, *, refund: str = "committed", amount: str = "247.92") -> Workflow:
    """read_ticket, decide_refund, issue_refund (``refund``), notify_customer; forkable by its agent."""
    workflow = make_workflow(agent)
    make_step(workflow, 1, "read_ticket", "tool", input={"ticket": workflow.external_id}, output={"amount": amount})
    make_step(
        workflow,
        2,
        "decide_refund",
        "model",
        input={"prompt": "what now?"},
        output={"decision": "refund", "amount": amount, "currency": "EUR"},
    )
    make_step(
        workflow,
        3,
        "issue_refund",
        "effect",
        status=refund,
        input={"amount": amount, "currency": "EUR"},
        external_ref="R-0A1B2C3D" if refund == "committed" else None,
    )
    if refund == "committed":
        make_step(workflow, 4, "notify_customer", "effect", input={"text": "refunded"}, external_ref="M-1")
    return workflow


def able(name: str, **fields: object) -> Agent:
    agent, _token = make_agent(name)
    Agent.objects.filter(pk=agent.pk).update(**fields)
    agent.refresh_from_db()
    return agent


@pytest.fixture
def forkable():
    return able("forker", capabilities=["fork", "failover"], fork_edits=["effect"])


def test_a_fork_of_a_pending_refund_edited_to_99999_waits_for_a_second_operator(forkable, alice, bob):
    """The finding: one operator forked a refund at its pending step with the amount edited to 99,999.00,
    and the runtime received it (the fork's manual checkpoint matched a runbook without four eyes)."""
    make_runbook(workflow_kind="refund", reason="tool_error", requires_four_eyes=True)
    make_runbook(reason="manual", title="Manual pauses")  # lax: every decision, no four eyes
    original = refund_run(forkable, refund="failed")
    origin = make_checkpoint(original, reason="tool_error", at_seq=3, plan=MONEY_PLAN)
    assert origin.runbook_version.requires_four_eyes

    decision = fork_workflow(
        original,
        from_seq=3,
        by=alice,
        reason="pay it",
        edited_input={"amount": "99999.00", "currency": "EUR"},
        money_confirmed=True,
    )

    assert decision.status == Decision.Status.PROPOSED, "a fork went out past four eyes"
    fork_checkpoint = decision.checkpoint
    assert fork_checkpoint.origin == origin and fork_checkpoint.runbook_version.title == "Manual pauses"
    assert "99999.00 EUR" in fork_checkpoint.money_at_stake
    assert decision.checkpoint.workflow.status == Workflow.Status.PAUSED  # nothing reached the runtime
    assert not decision.approve(by=alice)  # not by the one who forked it
    page = Client()
    page.force_login(bob)
    html = page.get(reverse("workbench", args=[fork_checkpoint.pk])).content.decode()
    assert 'data-testid="bound-by"' in html and "money needs a second operator" in html
    assert 'data-testid="approve"' in html and "moves money: 99999.00" in html
    approvals = page.get(reverse("queue") + "?scope=approval").content.decode()
    assert fork_checkpoint.workflow.title in approvals and "99999.00 EUR" in approvals  # the approval row's amount
    assert decision.approve(by=bob)


def test_a_fork_may_not_take_a_decision_the_runbook_of_its_origin_does_not_allow(forkable, alice):
    make_runbook(workflow_kind="refund", reason="tool_error", allowed_actions=["handoff", "abort"])
    make_runbook(reason="manual", title="Manual pauses")
    original = refund_run(forkable, refund="failed")
    make_checkpoint(original, reason="tool_error", at_seq=3, plan=MONEY_PLAN)

    with pytest.raises(ValueError, match="does not allow resume .*binds the checkpoint this fork comes from"):
        fork_workflow(original, from_seq=3, by=alice, reason="resume it anyway", money_confirmed=True)

    assert not original.forks.exists()  # refused: nothing half-created


def test_a_forks_later_pauses_stay_bound_by_the_checkpoint_it_was_forked_from(forkable, alice):
    """The fork's agent pauses it again (say, before the refund) with a reason a lax runbook takes: the rules
    of the checkpoint the fork came from still hold."""
    make_runbook(workflow_kind="refund", reason="tool_error", requires_four_eyes=True)
    make_runbook(reason="rate_limit", title="Rate limits")  # lax
    original = refund_run(forkable, refund="failed")
    origin = make_checkpoint(original, reason="tool_error", at_seq=3, plan=MONEY_PLAN)
    decision = fork_workflow(original, from_seq=3, by=alice, reason="pay it", money_confirmed=True)
    assert decision.approve(by=make_user("carol"))
    assert decision.mark_succeeded()
    fork = decision.checkpoint.workflow
    fork.refresh_from_db()
    assert fork.status == Workflow.Status.RUNNING

    again = make_checkpoint(fork, reason="rate_limit", at_seq=3, plan=MONEY_PLAN)

    assert again.runbook_version.title == "Rate limits" and again.origin == decision.checkpoint
    assert origin.runbook_version in again.runbook_versions()
    assert Decider(again).decide(by=alice, action="resume", money_confirmed=True).status == Decision.Status.PROPOSED


def test_the_fork_checkpoint_offers_only_what_both_runbooks_allow(forkable, alice, client, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    make_runbook(workflow_kind="refund", reason="model_timeout", allowed_actions=["resume", "handoff", "abort"])
    make_runbook(reason="manual", title="Manual pauses", allowed_actions=["resume", "retry_step", "abort"])
    original = refund_run(forkable)
    make_checkpoint(original, at_seq=4, plan=[])
    decision = fork_workflow(original, from_seq=4, by=alice, reason="tell the customer again")
    assert decision.start_attempt() and decision.mark_attempt_failed("unreachable")  # back on the queue
    checkpoint = Checkpoint.objects.get(pk=decision.checkpoint_id)

    assert {a for a in Action if Decider(checkpoint).refusing_runbook(a) is None} == {Action.RESUME, Action.ABORT}
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert 'value="abort"' in html and 'value="handoff"' not in html and 'value="retry_step"' not in html
    refused = client.post(reverse("decide", args=[checkpoint.pk]), {"action": "handoff", "handoff_to": "billing"})
    assert refused.status_code == 422 and "does not allow hand off" in refused.content.decode()


def test_an_edited_input_the_agent_would_ignore_is_refused_up_front(forkable, alice):
    """The demo agent applies an edited input to the effect a fork restarts at, never to a model step: such an
    edit used to be accepted and silently ignored."""
    original = refund_run(forkable)
    with pytest.raises(ValueError, match="forker does not apply an edited input to a model step"):
        fork_workflow(original, from_seq=2, by=alice, reason="decide again", edited_input={"prompt": "be generous"})
    Agent.objects.filter(pk=forkable.pk).update(fork_edits=[])
    forkable.refresh_from_db()
    with pytest.raises(ValueError, match="says it edits: none"):
        fork_workflow(original, from_seq=3, by=alice, reason="pay less", edited_input={"amount": "1.00"})
    assert not original.forks.exists()


def test_an_agent_advertises_the_step_kinds_it_edits_in_a_fork():
    _agent, token = make_agent("editor")
    headers: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    client = Client()
    answer = client.post(
        "/api/v1/agent/capabilities", json.dumps({"capabilities": ["fork"]}), content_type="application/json", **headers
    )
    assert answer.status_code == 200 and answer.json()["fork_edits"] == []
    answer = client.post(
        "/api/v1/agent/capabilities",
        json.dumps({"capabilities": ["fork"], "fork_edits": ["effect", "tool"]}),
        content_type="application/json",
        **headers,
    )
    assert answer.status_code == 200 and answer.json()["fork_edits"] == ["effect", "tool"]
    refused = client.post(
        "/api/v1/agent/capabilities",
        json.dumps({"capabilities": ["fork"], "fork_edits": ["prompt"]}),
        content_type="application/json",
        **headers,
    )
    assert refused.status_code == 422
    assert client.get("/api/v1/agent", **headers).json()["fork_edits"] == ["effect", "tool"]  # kept


def test_the_fork_form_answers_a_form_error_not_a_500_on_deeply_nested_json(forkable, alice, client):
    """Finding 14: the form parsed the edited input with json.loads and died of RecursionError; it now holds
    it to the agent API's limits (workflows.api.json_body) and says what is wrong."""
    original = refund_run(forkable)
    client.force_login(alice)
    for text, said in (
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ('{"a": ' * 70 + "1" + "}" * 70, "nested deeper than 64 levels"),
        ('{"amount": "1\\u0000"}', "NUL"),
        ('{"amount": 1' + "0" * 80 + "}", "too large to store"),
        ('{"amount": "' + "9" * (1024 * 1024) + '"}', "larger than"),
    ):
        response = client.post(
            reverse("fork", args=[original.pk]),
            {"from_seq": "3", "reason": "x", "edited_input": text, "money_confirmed": "1"},
            follow=True,
        )
        assert response.status_code == 200
        assert said in response.content.decode(), said
    assert not original.forks.exists()


# --- every decision-making route, walked -------------------------------------------------------------------


@pytest.fixture
def four_eyes_money(forkable, alice, bob, settings):
    """Checkpoints under a four-eyes money runbook that does not allow hand-offs (a runbook for manual pauses,
    which a fork's checkpoint matches, allows everything without four eyes), claimed by alice; a proposal of
    alice's waiting for approval; a completed refund run that can be forked; a standby."""
    make_runbook(
        workflow_kind="refund",
        reason="tool_error",
        requires_four_eyes=True,
        allowed_actions=["resume", "retry_step", "failover", "abort"],
    )
    make_runbook(reason="manual", title="Manual pauses")
    able("standby", capabilities=["failover"], kinds=["refund"])
    paused = refund_run(forkable, refund="failed")
    checkpoint = make_checkpoint(paused, reason="tool_error", at_seq=3, plan=MONEY_PLAN)
    checkpoint.claim(by=alice)
    waiting = make_checkpoint(refund_run(forkable, refund="failed"), reason="tool_error", at_seq=3, plan=MONEY_PLAN)
    proposal = Decider(waiting).decide(by=alice, action="resume", money_confirmed=True)
    assert proposal.status == Decision.Status.PROPOSED
    done = refund_run(forkable)
    make_checkpoint(done, reason="tool_error", at_seq=4, plan=MONEY_PLAN)
    Workflow.objects.filter(pk=done.pk).update(status=Workflow.Status.COMPLETED)
    return {
        "checkpoint": [checkpoint.pk, waiting.pk],
        "decision": [proposal.pk],
        "workflow": [paused.pk, waiting.workflow_id, done.pk],
    }


def _paths(route: str, ids: dict[str, list[int]]) -> list[str]:
    """The route with each id of the objects its first segment names; the example path otherwise."""
    path = example_path(route)
    head = route.split("/")[2] if route.startswith("api/") else route.split("/")[0]
    found = {"checkpoints": ids["checkpoint"], "decisions": ids["decision"], "workflows": ids["workflow"]}.get(head)
    if not found or "1" not in path.split("/"):
        return [path]
    return ["/".join(str(i) if part == "1" else part for part in path.split("/")) for i in found]


def _everything(action: str, ids: dict[str, list[int]], path: str) -> dict[str, object]:
    """A form that says yes to every question a decision can ask: each confirmation, money, and (on a workflow's
    URL) every effect of that workflow run again."""
    from django.urls import resolve

    from workflows.models import Step

    workflow = resolve(path).kwargs.get("pk") if path.startswith("/workflows/") else None
    return {
        "action": action,
        "instructions": "one operator alone",
        "money_confirmed": "1",
        "new_owner": "alice",
        "handoff_to": "billing team",
        "standby": "standby",
        "confirm_0": "did_not_happen",
        "ref_0": "R-1",
        "from_seq": "3",
        "reason": "fork it alone",
        "edited_input": '{"amount": "99999.00", "currency": "EUR"}',
        "repeat": [
            str(pk)
            for pk in Step.objects.filter(workflow=workflow, kind="effect", status="committed").values_list(
                "pk", flat=True
            )
        ],
        "ids": [str(i) for i in ids["checkpoint"]],
        "bulk": "claim",
        "to": "alice",
        "note": "mine",
        "summary": "done",
    }


def _delivered_alone() -> list[str]:
    """Decisions that went out (or would, on delivery) without a second operator where one was due, and any
    decision the runbook forbids."""
    bad = []
    for decision in Decision.objects.select_related("checkpoint", "approved_by", "decided_by"):
        checkpoint = decision.checkpoint
        if (
            decision.is_in_delivery
            and decision.action in RESUMING_ACTIONS
            and checkpoint.touches_money()
            and (decision.approved_by is None or decision.approved_by == decision.decided_by)
        ):
            bad.append(f"{decision.action} on checkpoint {checkpoint.pk} went out without a second operator")
        if Decider(checkpoint).refusing_runbook(decision.action) is not None:
            bad.append(f"{decision.action} on checkpoint {checkpoint.pk} although its runbook forbids it")
    return bad


def test_no_decision_making_url_or_api_route_delivers_a_money_decision_without_a_second_operator(
    four_eyes_money, alice
):
    ids = four_eyes_money
    _agent, token = make_agent("walker")
    operator, agent = Client(), Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    operator.force_login(alice)
    walked, failures = 0, []
    for route, name, _view, _rule in url_rules():
        if name.startswith("admin:"):
            continue  # the admin holds no decision-making view (Decision is read-only there: test_ui_admin.py)
        for path in _paths(route, ids):
            for action in Action.values:
                if name.startswith("api:"):
                    response = agent.post(
                        path, json.dumps({"action": action, "status": "completed"}), content_type="application/json"
                    )
                else:
                    operator.force_login(alice)  # again: the walk POSTs to /logout/ too
                    response = operator.post(path, _everything(action, ids, path))
                walked += 1
                if response.status_code >= 500:
                    failures.append(f"POST {path} ({name}, {action}): {response.status_code}")
                failures += [f"POST {path} ({name}, {action}): {why}" for why in _delivered_alone()]
    assert walked > 100
    assert Decision.objects.filter(checkpoint__workflow__forked_from__isnull=False).exists(), "no fork was tried"
    assert Decision.objects.filter(status=Decision.Status.PROPOSED).count() >= 2
    assert not failures, "\n".join(dict.fromkeys(failures))


def test_the_walk_sees_a_route_that_decides_alone(four_eyes_money, alice):
    """The walk's own check: a decision queued by one operator on the four-eyes money checkpoint is caught."""
    checkpoint = Checkpoint.objects.get(pk=four_eyes_money["checkpoint"][0])
    assert not _delivered_alone()
    Decision.objects.create(checkpoint=checkpoint, action="resume", decided_by=alice, status="queued")
    assert _delivered_alone() == [f"resume on checkpoint {checkpoint.pk} went out without a second operator"]


def test_a_failover_and_a_retry_keep_the_four_eyes_of_their_checkpoint(four_eyes_money, alice):
    checkpoint = Checkpoint.objects.get(pk=four_eyes_money["checkpoint"][0])
    standby = Agent.objects.get(name="standby")
    extras: tuple[tuple[str, dict[str, Any]], ...] = (("failover", {"standby": standby}), ("retry_step", {}))
    for action, extra in extras:
        decision = Decider(checkpoint).draft(action=action, money_confirmed=True, **extra)
        assert decision.status == Decision.Status.PROPOSED, action
    with pytest.raises(ValueError, match="does not allow hand off"):
        Decider(checkpoint).draft(action="handoff", new_owner=make_user("carol"))
