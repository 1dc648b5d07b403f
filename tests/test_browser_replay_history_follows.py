"""In Chromium (issue 28 item 12): the replay page's history follows the run as the verdict does, and a
finished replay never offers Cancel; cancelling one that finished meanwhile says so in a sentence."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.replaytools import ReplayRuntime
from workflows import tasks
from workflows.models import ReplayRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runtime(transactional_db, tmp_path, live_server):
    runtime = ReplayRuntime(tmp_path, console_url=live_server.url, capabilities=("replay",))
    yield runtime
    runtime.close()


def test_the_history_turns_succeeded_and_cancel_goes_away(page, alice, runtime):
    workflow = runtime.recorded_workflow("T-6060")
    login(page, alice)
    page.goto(f"/workflows/{workflow.pk}/")
    page.get_by_test_id("replay-submit").click()
    mine = page.locator('[data-testid="replay-history-row"].is-selected')
    expect(mine.get_by_test_id("replay-history-status")).to_have_text("queued")
    expect(page.get_by_test_id("replay-cancel")).to_be_visible()

    assert tasks.run_replay(ReplayRun.objects.get().pk) == "recorded"  # a worker's job; the page follows

    expect(page.get_by_test_id("replay-status")).to_have_text("succeeded")
    expect(mine.get_by_test_id("replay-history-status")).to_have_text("succeeded")
    expect(page.get_by_test_id("replay-cancel")).to_have_count(0)
    page.reload()
    expect(page.get_by_test_id("replay-cancel")).to_have_count(0)
    expect(mine.get_by_test_id("replay-history-status")).to_have_text("succeeded")


def test_an_older_running_replay_in_the_history_also_follows(page, alice, runtime):
    workflow = runtime.recorded_workflow("T-6061")
    older = ReplayRun.request(workflow, from_seq=1, to_seq=2, by=alice)
    newer = ReplayRun.request(workflow, from_seq=2, to_seq=3, by=alice)
    assert tasks.run_replay(newer.pk) == "recorded"
    login(page, alice)
    page.goto(f"/replays/{newer.pk}/")
    row = page.get_by_test_id("replay-history-row").filter(has=page.locator(f'a[href="/replays/{older.pk}/"]'))
    expect(row.get_by_test_id("replay-history-status")).to_have_text("queued")
    expect(page.get_by_test_id("replay-cancel")).to_have_count(0)  # this page's replay has finished

    assert tasks.run_replay(older.pk) == "recorded"

    expect(row.get_by_test_id("replay-history-status")).to_have_text("succeeded")


def test_cancelling_a_replay_that_finished_meanwhile_says_so_in_words(client, alice, runtime):
    workflow = runtime.recorded_workflow("T-6062")
    run = ReplayRun.request(workflow, from_seq=1, to_seq=2, by=alice)
    assert tasks.run_replay(run.pk) == "recorded"
    client.force_login(alice)

    html = client.post(reverse("cancel_replay", args=[run.pk]), follow=True).content.decode()

    assert "Nothing to cancel: this replay has already finished (succeeded)." in html
    assert "is already succeeded" not in html
    assert ReplayRun.objects.get(pk=run.pk).status == ReplayRun.Status.SUCCEEDED
