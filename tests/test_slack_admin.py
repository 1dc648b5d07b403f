"""An admin connects a Slack workspace (bot token and signing secret sealed, never in the trail) and picks
a channel per runbook or SLA policy; the checkpoint's message goes to the channel its route names."""

from __future__ import annotations

from django.test import Client

from tests.helpers import make_checkpoint, make_policy, make_runbook, make_worked_example, make_workflow
from tests.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, TEAM
from workflows.models import Event, SlackMessage, SlackRoute, SlackWorkspace


def test_an_admin_connects_a_workspace_with_its_secrets_sealed_and_kept_out_of_the_trail(adam):
    client = Client()
    client.force_login(adam)
    form = {
        "team_id": TEAM,
        "name": "Acme",
        "default_channel": CHANNEL,
        "is_active": "on",
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "routes-TOTAL_FORMS": "0",
        "routes-INITIAL_FORMS": "0",
        "routes-MIN_NUM_FORMS": "0",
        "routes-MAX_NUM_FORMS": "1000",
    }

    missing = client.post("/admin/workflows/slackworkspace/add/", {**form, "signing_secret": ""})
    assert missing.status_code == 200 and "Required to connect the workspace." in missing.content.decode()
    response = client.post("/admin/workflows/slackworkspace/add/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    workspace = SlackWorkspace.objects.get()
    assert workspace.bot_token == BOT_TOKEN and workspace.signing_secret == SIGNING_SECRET
    assert workspace.sealed_bot_token.startswith("fernet:") and BOT_TOKEN not in workspace.sealed_bot_token
    trail = str(Event.objects.get(verb=Event.Verb.ADMIN_CREATED, subject=f"slackworkspace:{workspace.pk}").data)
    assert BOT_TOKEN not in trail and SIGNING_SECRET not in trail

    kept = client.post(
        f"/admin/workflows/slackworkspace/{workspace.pk}/change/",
        {**form, "bot_token": "", "signing_secret": "", "name": "Acme Corp"},
    )
    assert kept.status_code == 302
    workspace.refresh_from_db()
    assert workspace.name == "Acme Corp" and workspace.bot_token == BOT_TOKEN  # blank keeps the stored one
    assert BOT_TOKEN not in client.get(f"/admin/workflows/slackworkspace/{workspace.pk}/change/").content.decode()


def test_a_checkpoint_goes_to_its_runbooks_channel_else_its_policys_else_the_default(db):
    workspace = SlackWorkspace(team_id=TEAM, name="Acme", default_channel=CHANNEL)
    workspace.bot_token, workspace.signing_secret = BOT_TOKEN, SIGNING_SECRET
    workspace.save()
    policy = make_policy()
    routed = make_runbook(workflow_kind="refund", policy=policy)
    SlackRoute.objects.create(workspace=workspace, runbook=routed, channel_id="CREFUNDS")
    SlackRoute.objects.create(workspace=workspace, policy=policy, channel_id="CPOLICY")

    make_runbook(workflow_kind="dispute", policy=policy)  # no route of its own: its policy's

    by_runbook = make_checkpoint(make_worked_example())
    by_policy = make_checkpoint(make_workflow(kind="dispute"))
    by_default = make_checkpoint(make_workflow(kind="shipping"))

    channels = dict(SlackMessage.objects.values_list("checkpoint_id", "channel_id"))
    assert channels == {by_runbook.pk: "CREFUNDS", by_policy.pk: "CPOLICY", by_default.pk: CHANNEL}


def test_without_a_connected_workspace_nothing_is_posted(db):
    make_checkpoint()
    assert not SlackMessage.objects.exists()
