"""In Chromium: the workbench's actions go one at a time. Each action's answer replaces the whole live region, so
a Resume clicked while the claim is still on its way used to race it: the claim's later answer replaced the
Resume's error. Now the second click is not sent while the first is in flight, the operator is told so, and
what they typed stays; once the claim has landed the same click goes through."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint
from workflows.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_resume_clicked_while_the_claim_is_in_flight_waits_for_it(page, alice):
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    held, sent = [], []
    # The claim is held in the browser until the test lets it go: "in flight" without any timing.
    page.route("**/claim/", lambda route: held.append(route))
    page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)

    page.get_by_test_id("claim").click()
    page.wait_for_function("() => document.querySelector('form.htmx-request') !== null")
    assert len(held) == 1
    page.get_by_test_id("instructions").fill("Refund issued at step 3: do not send it again.")
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("action-in-flight")).to_contain_text("still on its way: this one was not sent")
    page.screenshot(path="/tmp/shots/workbench-action-in-flight.png", full_page=True)
    assert [url for url in sent if "/decide" in url] == []
    assert not Decision.objects.filter(checkpoint=checkpoint).exists()

    held[0].continue_()
    expect(page.get_by_test_id("checkpoint-status")).to_have_text("checkpoint claimed")
    expect(page.get_by_test_id("instructions")).to_have_value("Refund issued at step 3: do not send it again.")
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("action-in-flight")).to_have_count(0)
    expect(page.get_by_test_id("decision-status")).to_be_visible()
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.instructions == "Refund issued at step 3: do not send it again."
