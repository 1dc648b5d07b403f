"""Replays in the console: asked for from the workflow page or a checkpoint, shown side by side."""

from django.urls import reverse

from tests.helpers import make_checkpoint, make_worked_example
from workflows import tasks
from workflows.models import ReplayRun


def test_an_agent_that_cannot_replay_gets_no_form_and_the_page_says_why(client, alice):
    workflow = make_worked_example()
    client.force_login(alice)

    html = client.get(reverse("workflow", args=[workflow.pk])).content.decode()

    assert 'data-testid="replay-unavailable"' in html and "does not advertise" in html
    assert 'data-testid="replay-submit"' not in html


def test_an_operator_asks_for_a_replay_from_a_checkpoint_and_reads_the_first_divergence(client, alice, runtime):
    workflow = runtime.recorded_workflow()
    checkpoint = make_checkpoint(workflow, at_seq=7)
    client.force_login(alice)
    workbench = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert f'name="checkpoint" value="{checkpoint.pk}"' in workbench and 'value="3"' in workbench
    runtime.provider.changed = True

    response = client.post(
        reverse("request_replay", args=[workflow.pk]), {"from_seq": 3, "to_seq": 7, "checkpoint": checkpoint.pk}
    )
    run = ReplayRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("replay", args=[run.pk])
    assert run.checkpoint == checkpoint and run.requested_by == alice
    tasks.run_replay(run.pk)

    html = client.get(reverse("replay", args=[run.pk])).content.decode()
    assert 'data-testid="first-divergence"' in html and "step 5 `decide_refund`: output.amount" in html
    assert html.count('data-testid="replay-row"') == 5  # steps 3..7, recorded beside replayed
    assert 'data-verdict="diverged"' in html and 'class="diff-new"' in html
    page = client.get(reverse("workflow", args=[workflow.pk])).content.decode()
    assert "first divergence: step 5" in page and reverse("replay", args=[run.pk]) in page


def test_a_refused_replay_says_why_on_the_page(client, alice, runtime, settings):
    settings.REPLAY_MAX_STEPS = 2
    workflow = runtime.recorded_workflow()
    client.force_login(alice)

    response = client.post(reverse("request_replay", args=[workflow.pk]), {"from_seq": 1, "to_seq": 8}, follow=True)

    assert "Replay not started: At most 2 steps are replayed at once." in response.content.decode()
    assert not ReplayRun.objects.exists()


def test_tpms_read_replays_but_cannot_start_or_cancel_them(client, tess, alice, runtime):
    workflow = runtime.recorded_workflow()
    run = ReplayRun.request(workflow, from_seq=1, to_seq=2, by=alice)
    client.force_login(tess)

    assert "Read-only" in client.get(reverse("workflow", args=[workflow.pk])).content.decode()
    assert client.get(reverse("replay", args=[run.pk])).status_code == 200
    assert client.post(reverse("request_replay", args=[workflow.pk]), {"from_seq": 1, "to_seq": 2}).status_code == 403
    assert client.post(reverse("cancel_replay", args=[run.pk])).status_code == 403


def test_a_running_replay_polls_and_can_be_cancelled(client, alice, runtime):
    workflow = runtime.recorded_workflow()
    run = ReplayRun.request(workflow, from_seq=1, to_seq=2, by=alice)
    client.force_login(alice)

    html = client.get(reverse("replay", args=[run.pk])).content.decode()
    assert 'hx-trigger="every 2s"' in html and 'data-testid="replay-cancel"' in html
    client.post(reverse("cancel_replay", args=[run.pk]))

    run.refresh_from_db()
    assert run.status == "cancelled"
    html = client.get(
        reverse("replay", args=[run.pk]), headers={"HX-Request": "true", "HX-Target": "replay-result"}
    ).content.decode()
    assert html.lstrip().startswith('<div id="replay-result"') and "every 2s" not in html
    assert "Cancelled by alice." in html
