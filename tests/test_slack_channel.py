"""Slack as a channel: a checkpoint's message is a live view, and its buttons act through the domain.

Against a loopback fake of Slack's Web API (tests/slack_fake.py), with interaction payloads
signed the way Slack signs them.
"""

from __future__ import annotations

import hmac
import json
import re
import time
from datetime import timedelta

import pytest
from django.db.models import F
from django.test import Client
from django.utils import timezone

from console.event_text import event_text
from tests.helpers import make_checkpoint, make_runbook, make_step, make_worked_example, make_workflow
from tests.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM, button, profile, signed, submission
from workflows import tasks
from workflows.clock import database_now
from workflows.models import (
    Agent,
    Checkpoint,
    Decider,
    Decision,
    Event,
    SlackLink,
    SlackMessage,
    SlackWorkspace,
)
from workflows.slack import outbox
from workflows.via import Via

URL = "/slack/interactivity/"


@pytest.fixture
def workspace(db):
    workspace = SlackWorkspace(team_id=TEAM, name="Acme", default_channel=CHANNEL)
    workspace.bot_token, workspace.signing_secret = BOT_TOKEN, SIGNING_SECRET
    workspace.save()
    return workspace


def link(workspace, user, slack_id):
    return SlackLink.objects.create(workspace=workspace, user=user, slack_user_id=slack_id, nonce=f"n-{slack_id}")


def catch_up() -> list[str]:
    """What a worker does: send every message that is behind its checkpoint (waiting for nothing)."""
    return [
        outbox.send(pk)
        for pk in SlackMessage.objects.filter(version__gt=F("sent_version"))
        .order_by("decision_id", "pk")
        .values_list("pk", flat=True)
    ]


def press(action_id, value, *, user, **kwargs):
    return Client().post(URL, **signed(button(action_id, value, user=user), **kwargs))


def value_of(message_blocks, action_id):
    return next(
        e["value"]
        for b in message_blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == action_id
    )


def action_ids(message_blocks):
    return [e["action_id"] for b in message_blocks if b["type"] == "actions" for e in b["elements"]]


def ephemeral(slack) -> str:
    return slack.called("chat.postEphemeral")[-1]["text"]


def test_an_opened_checkpoint_posts_one_message_with_its_state_due_time_money_and_buttons(slack, workspace):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))

    assert catch_up() == ["sent"]

    [posted] = slack.called("chat.postMessage")
    assert posted["channel"] == CHANNEL and slack.tokens == [f"Bearer {BOT_TOKEN}"]
    text = json.dumps(posted["blocks"])
    assert checkpoint.workflow.external_id in text and checkpoint.workflow.agent.name in text
    assert "42.00 EUR" in text and "Due" in text and "unknown (issue_refund)" in text and "model timed out" in text
    assert action_ids(posted["blocks"]) == ["claim", "resume", "retry_step", "handoff", "abort", "open"]
    assert catch_up() == []  # caught up: nothing is sent twice


def test_every_change_from_the_console_edits_the_message_in_place_and_a_resolved_one_has_no_buttons(
    slack, workspace, alice
):
    checkpoint = make_checkpoint()
    catch_up()
    ts = SlackMessage.objects.get().ts

    checkpoint.claim(by=alice)
    catch_up()
    update = slack.called("chat.update")[-1]
    assert update["ts"] == ts and "Claimed by alice" in update["text"]

    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="duplicate ticket")
    assert decision.mark_fetched()  # the agent polls: its fetch is the delivery, and resolves the checkpoint
    catch_up()
    update = slack.called("chat.update")[-1]
    assert update["ts"] == ts and "Resolved" in update["text"] and "Abort decided by alice" in update["text"]
    assert action_ids(update["blocks"]) == []
    assert len(slack.called("chat.postMessage")) == 1


def test_a_forged_request_and_one_older_than_five_minutes_are_refused(slack, workspace, alice):
    checkpoint = make_checkpoint()
    catch_up()
    link(workspace, alice, "UALICE")
    claim = value_of(slack.called("chat.postMessage")[0]["blocks"], "claim")
    events = Event.objects.count()

    forged = press("claim", claim, user="UALICE", secret="not-the-secret")
    replayed = press("claim", claim, user="UALICE", at=time.time() - 301)
    unsigned = Client().post(URL, {"payload": json.dumps(button("claim", claim, user="UALICE"))})

    assert forged.status_code == replayed.status_code == unsigned.status_code == 403
    assert Event.objects.count() == events
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN
    request = signed(button("claim", claim, user="UALICE"), at=time.time() - 200)
    assert Client().post(URL, **request).status_code == 200  # inside five minutes
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice
    assert checkpoint.release(by=alice)
    # The same signed request again, inside its five minutes: a replay, refused before it is read.
    assert Client().post(URL, **request).status_code == 403
    checkpoint.refresh_from_db()
    assert checkpoint.assignee is None


def test_an_unlinked_user_gets_a_one_time_link_and_acts_once_they_confirm_it_signed_in(slack, workspace, alice):
    checkpoint = make_checkpoint()
    catch_up()
    claim = value_of(slack.called("chat.postMessage")[0]["blocks"], "claim")

    assert press("claim", claim, user="UNEW").status_code == 200
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN
    path = re.search(r"<https?://[^/]+(/slack/link/[^|>]+/)\|", ephemeral(slack)).group(1)

    browser = Client()
    assert browser.get(path).status_code == 302  # signed in first
    browser.force_login(alice)
    page = browser.get(path).content.decode()
    assert "Yes, that Slack account is mine" in page
    assert "(Slack did not\n    say whose)" in page  # UNEW is unknown to this Slack: the page does not guess
    slack.users["UNEW"] = profile("UNEW", "mallory@example.org")
    page = browser.get(path).content.decode()  # the account is named, so a link someone else sent is seen as theirs
    assert 'data-testid="slack-link-who">mallory<' in page and "mallory@example.org</span>" in page
    assert not SlackLink.objects.exists()  # a GET links nobody
    assert browser.post(path).status_code == 200
    assert SlackLink.objects.get().user == alice
    assert browser.post(path).status_code == 409  # one use
    assert Client().get("/slack/link/forged/").status_code == 302
    assert browser.get("/slack/link/forged/").status_code == 400

    press("claim", claim, user="UNEW")
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == alice
    claimed = Event.objects.get(checkpoint=checkpoint, verb=Event.Verb.CLAIMED)
    assert claimed.data["via"] == "slack" and event_text(claimed).endswith("(via Slack)")


def test_a_linked_user_whose_role_is_read_only_cannot_act(slack, workspace, tess):
    checkpoint = make_checkpoint()
    catch_up()
    link(workspace, tess, "UTESS")

    press("claim", value_of(slack.called("chat.postMessage")[0]["blocks"], "claim"), user="UTESS")

    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN and "read-only" in ephemeral(slack)


def open_modal(slack, action_id, *, user):
    press(action_id, value_of(slack.called("chat.postMessage")[0]["blocks"], action_id), user=user)
    return slack.called("views.open")[-1]["view"]


def submit(view, values, *, user):
    response = Client().post(URL, **signed(submission(view, values, user=user)))
    assert response.status_code == 200
    return response.json()


def test_unknown_effects_and_money_are_confirmed_in_the_modal_before_a_resume(slack, workspace, alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    catch_up()
    link(workspace, alice, "UALICE")

    view = open_modal(slack, "resume", user="UALICE")
    blocks = {b.get("block_id") for b in view["blocks"]}
    assert {"instructions", "confirm:0", "ref:0", "money"} <= blocks

    unconfirmed = submit(view, {"money": "42.00 EUR"}, user="UALICE")
    assert (
        unconfirmed["response_action"] == "errors" and "Confirm what happened" in unconfirmed["errors"]["instructions"]
    )
    no_reference = submit(view, {"confirm:0": "happened", "money": "42.00 EUR"}, user="UALICE")
    assert "external reference" in no_reference["errors"]["instructions"]
    wrong_amount = submit(view, {"confirm:0": "did_not_happen", "money": "4200 EUR"}, user="UALICE")
    assert "42.00 EUR" in wrong_amount["errors"]["money"]
    assert not Decision.objects.exists()

    done = submit(
        view, {"confirm:0": "did_not_happen", "money": " 42.00  eur ", "instructions": "issue it once"}, user="UALICE"
    )

    assert done == {"response_action": "clear"}
    decision = Decision.objects.get()
    assert (decision.action, decision.channel, decision.decided_by) == ("resume", Via.SLACK, alice)
    assert decision.confirmations == {checkpoint.unknown_effects[0]["idempotency_key"]: "did_not_happen"}
    assert Event.objects.get(checkpoint=checkpoint, verb=Event.Verb.DECIDED).data["via"] == "slack"


def test_under_four_eyes_the_proposal_posts_in_the_thread_and_only_another_operator_approves(
    slack, workspace, alice, bob
):
    make_runbook(workflow_kind="refund", requires_four_eyes=True)
    make_checkpoint(make_worked_example(refund_status="pending"))
    catch_up()
    link(workspace, alice, "UALICE")
    link(workspace, bob, "UBOB")
    view = open_modal(slack, "resume", user="UALICE")
    submit(view, {"confirm:0": "did_not_happen", "money": "42.00 EUR"}, user="UALICE")
    decision = Decision.objects.get()
    assert decision.status == Decision.Status.PROPOSED

    catch_up()
    main_ts = SlackMessage.objects.get(decision__isnull=True).ts
    reply = slack.called("chat.postMessage")[-1]
    assert reply["thread_ts"] == main_ts and action_ids(reply["blocks"]) == ["approve", "reject"]
    assert "waiting for a second operator" in slack.called("chat.update")[-1]["text"]

    press("approve", str(decision.pk), user="UALICE")
    decision.refresh_from_db()
    assert decision.status == Decision.Status.PROPOSED
    assert "The second approval must come from another operator." in ephemeral(slack)

    press("approve", str(decision.pk), user="UBOB")
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED and decision.approved_by == bob
    assert Event.objects.get(decision=decision, verb=Event.Verb.APPROVED).data["via"] == "slack"
    catch_up()
    thread_update = [u for u in slack.called("chat.update") if u["ts"] != main_ts][-1]
    assert "Approved by bob" in thread_update["text"] and action_ids(thread_update["blocks"]) == []


def test_a_button_on_a_stale_message_fails_closed_and_says_who_decided_what_and_when(slack, workspace, alice, bob):
    checkpoint = make_checkpoint()
    catch_up()
    link(workspace, bob, "UBOB")
    stale = slack.called("chat.postMessage")[0]["blocks"]
    Decider(checkpoint).decide(by=alice, action="abort")  # in the console, before Slack shows it

    press("claim", value_of(stale, "claim"), user="UBOB")
    press("resume", value_of(stale, "resume"), user="UBOB")

    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.DECIDED and checkpoint.assignee == alice
    assert not slack.called("views.open")
    told = ephemeral(slack)
    assert "out of date" in told and re.search(r"Already decided: abort by alice at \d{4}-\d\d-\d\d \d\d:\d\d", told)
    catch_up()
    assert action_ids(slack.called("chat.update")[-1]["blocks"]) == []  # the message caught up


def test_a_slack_outage_holds_up_nothing_and_the_message_catches_up(slack, workspace, alice):
    slack.down = True
    checkpoint = make_checkpoint()

    assert catch_up() == ["retry"]
    message = SlackMessage.objects.get()
    assert message.failures == 1 and "503" in message.last_error and message.next_attempt_at > timezone.now()
    assert checkpoint.claim(by=alice)  # the console works on
    decision = Decider(checkpoint).decide(by=alice, action="abort")
    assert decision.status == Decision.Status.QUEUED

    slack.down = False
    assert catch_up() == ["sent"]
    refused, posted = slack.called("chat.postMessage")  # the attempt during the outage, then the one that landed
    assert "Abort decided by alice" in posted["text"] and action_ids(posted["blocks"]) == []


def test_a_rate_limit_is_honoured_with_its_retry_after(slack, workspace):
    slack.rate_limit(retry_after=120)
    make_checkpoint()

    assert catch_up() == ["retry"]
    message = SlackMessage.objects.get()
    # On the clock the outbox stamps it with (the database's: on SQLite rounded up to the millisecond, so
    # this process's clock read right after can still be behind it).
    wait = (message.next_attempt_at - database_now()).total_seconds()
    assert 100 < wait <= 120 and "429" in message.last_error
    assert SlackMessage.objects.dispatchable().count() == 0  # the relay leaves it alone until then
    assert tasks.relay_slack_messages() == 0
    assert SlackMessage.objects.dispatchable(timezone.now() + timedelta(seconds=121)).count() == 1
    assert catch_up() == ["sent"]


def test_the_bot_token_and_signing_secret_are_sealed_at_rest(workspace):
    stored = SlackWorkspace.objects.values("sealed_bot_token", "sealed_signing_secret").get()
    assert all(isinstance(v, str) and v.startswith("fernet:") for v in stored.values())
    assert BOT_TOKEN not in str(stored) and SIGNING_SECRET not in str(stored)
    assert SlackWorkspace.objects.get().signing_secret == SIGNING_SECRET


def test_a_decision_made_in_the_console_records_the_console_as_its_channel(alice):
    decision = Decider(make_checkpoint()).decide(by=alice, action="abort")
    assert decision.channel == Via.CONSOLE
    assert "via" not in Event.objects.get(verb=Event.Verb.DECIDED).data


def test_a_hand_off_from_the_modal_names_the_new_owner_through_the_domain(slack, workspace, alice, bob):
    checkpoint = make_checkpoint()
    catch_up()
    link(workspace, alice, "UALICE")

    view = open_modal(slack, "handoff", user="UALICE")
    empty = submit(view, {}, user="UALICE")
    assert "needs a new owner" in empty["errors"]["instructions"]
    assert submit(view, {"new_owner": "bob", "instructions": "VIP customer"}, user="UALICE") == {
        "response_action": "clear"
    }

    decision = Decision.objects.get(checkpoint=checkpoint)
    assert (decision.action, decision.new_owner, decision.channel) == ("handoff", bob, Via.SLACK)


def test_a_breach_recorded_by_the_sweep_edits_the_message(slack, workspace):
    checkpoint = make_checkpoint()
    catch_up()

    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=1))
    catch_up()

    assert "(breached)" in json.dumps(slack.called("chat.update")[-1]["blocks"])


def test_agent_text_cannot_ping_a_channel_or_forge_a_link(slack, workspace):
    """In the blocks and in the message's ``text`` (what Slack's notifications show, mrkdwn too): the detail,
    the ticket id and the workflow kind are the agent's words."""
    workflow = make_workflow(external_id="<!here> <https://evil.example|T-1>", kind="<!channel> refund")
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1"}, verified=True)
    make_checkpoint(workflow, detail="<!channel> refund now <https://evil.example|click> & more")
    catch_up()

    [posted] = slack.called("chat.postMessage")
    # What Slack reads as mrkdwn: the message's text and every mrkdwn object (plain_text shows "<" as it is).
    mrkdwn = [posted["text"], *_mrkdwn_texts(posted["blocks"])]
    for part in mrkdwn:
        assert "<!channel>" not in part and "<!here>" not in part and "<https://evil.example" not in part, part
    assert "&lt;!channel&gt;" in posted["text"] and "&lt;!here&gt;" in posted["text"]
    assert any("&lt;!channel&gt;" in part and "&amp; more" in part for part in mrkdwn)


def _mrkdwn_texts(node):
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn":
            yield node["text"]
        for value in node.values():
            yield from _mrkdwn_texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _mrkdwn_texts(value)


ODD_VALUES: tuple[object, ...] = (
    None,
    1,
    -1,
    "",
    "x",
    "1:",
    ":",
    "99999999999999999999:open.0",
    [],
    {},
    ["a"],
    {"id": 1},
    True,
    1.5,
    "\x00",
    "<!channel>",
)


def test_odd_shapes_of_a_signed_payload_get_an_answer_never_a_server_error(slack, workspace, alice, rng):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    catch_up()
    link(workspace, alice, "UALICE")
    resume = value_of(slack.called("chat.postMessage")[0]["blocks"], "resume")
    good_view = open_modal(slack, "resume", user="UALICE")
    shapes = [
        button("resume", resume, user="UALICE"),
        submission(good_view, {"confirm:0": "happened"}, user="UALICE"),
        {"type": "view_submission", "team": {"id": TEAM}, "user": {"id": "UALICE"}, "view": {"callback_id": "decide"}},
    ]
    sent: set[tuple[str, str]] = set()
    for _ in range(150):
        payload = json.loads(json.dumps(rng.choice(shapes)))
        target = payload
        path = rng.choice(
            [
                ["actions"],
                ["actions", 0],
                ["actions", 0, "value"],
                ["actions", 0, "action_id"],
                ["user"],
                ["view"],
                ["view", "private_metadata"],
                ["view", "state"],
                ["view", "state", "values"],
                ["trigger_id"],
                ["channel"],
                ["type"],
            ]
        )
        for key in path[:-1]:
            target = (
                target[key]
                if isinstance(target, dict | list)
                and (key in target if isinstance(target, dict) else key < len(target))
                else None
            )
            if target is None:
                break
        if isinstance(target, dict):
            target[path[-1]] = rng.choice(ODD_VALUES)
        elif isinstance(target, list) and target:
            target[0] = rng.choice(ODD_VALUES)
        request = signed(payload)
        response = Client().post(URL, **request)
        replayed = (request["HTTP_X_SLACK_REQUEST_TIMESTAMP"], request["HTTP_X_SLACK_SIGNATURE"]) in sent
        sent.add((request["HTTP_X_SLACK_REQUEST_TIMESTAMP"], request["HTTP_X_SLACK_SIGNATURE"]))
        # The same signed request twice (the same shape drawn again within a second) is a replay: refused.
        assert response.status_code in ((403,) if replayed else (200, 400)), (payload, response.status_code)
    for body in ("payload=not-json", "payload=[1,2]", "payload=%7B%7D", "nothing=1", ""):
        timestamp = str(int(time.time()))
        digest = hmac.new(SIGNING_SECRET.encode(), f"v0:{timestamp}:{body}".encode(), "sha256").hexdigest()
        response = Client().post(
            URL,
            data=body,
            content_type="application/x-www-form-urlencoded",
            HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp,
            HTTP_X_SLACK_SIGNATURE=f"v0={digest}",
        )
        assert response.status_code == 400, body
    checkpoint.refresh_from_db()
    assert checkpoint.status in Checkpoint.OPEN_STATUSES and not Decision.objects.exists()


def test_a_delivery_edits_the_message_once_it_arrived_not_when_a_worker_takes_it_or_retries(slack, workspace, alice):
    from workflows.slack.blocks import stamp, status_line

    checkpoint = make_checkpoint()
    catch_up()
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="duplicate ticket")
    catch_up()
    message = SlackMessage.objects.get()
    shown = (status_line(Checkpoint.objects.get(pk=checkpoint.pk)), stamp(Checkpoint.objects.get(pk=checkpoint.pk)))
    assert decision.start_attempt()  # a worker takes its lease: QUEUED -> RUNNING
    decision.mark_attempt_failed("the agent answered 503")  # and gives it back for a retry
    assert Event.objects.filter(decision=decision, verb=Event.Verb.DELIVERY_RETRY).exists()
    refreshed = Checkpoint.objects.get(pk=checkpoint.pk)
    assert (status_line(refreshed), stamp(refreshed)) == shown, "the message would show the same"
    assert SlackMessage.objects.get().version == message.version, "so it is not edited for nothing"
    assert catch_up() == []

    assert Decision.objects.get(pk=decision.pk).start_attempt()
    assert Decision.objects.get(pk=decision.pk).mark_succeeded()
    assert catch_up() == ["sent"]
    assert "Resolved" in slack.called("chat.update")[-1]["text"]


@pytest.mark.postgres  # the success record in one statement is PostgreSQL's (workflows/models/leases.py)
def test_a_resume_a_worker_delivers_puts_the_message_behind_in_the_success_records_statement(
    slack, workspace, alice, receiver, django_capture_on_commit_callbacks
):
    agent, _ = Agent.register("refund-bot", resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    catch_up()
    decision = Decider(checkpoint).decide(by=alice, action="resume", instructions="go on", money_confirmed=True)
    catch_up()
    behind = SlackMessage.objects.get().version

    with django_capture_on_commit_callbacks() as hooks:
        assert tasks.deliver_decision(decision.pk) == "delivered"

    message = SlackMessage.objects.get()
    assert message.version == behind + 1, "one bump for the delivery and the resolution, in the statement"
    assert [(hook.func.__module__, hook.args) for hook in hooks] == [("workflows.slack.outbox", (message.pk,))]
    assert catch_up() == ["sent"]
    assert "Resolved" in slack.called("chat.update")[-1]["text"]
