"""In Chromium: one long unbroken agent title or JSON never widens a page past the window; the text is
wrapped or clipped with the full text reachable (issue 8, defect 5)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_step, make_workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "A" * 5000  # no space, no hyphen: nothing for the browser to break on
# A title is at most 300 characters (the API answers 422 above): the longest one, unbroken. The 5,000
# characters go to every field without a limit: the detail, the JSON of steps and state, the promise.
TITLE = "Refund" + "A" * 294


def _long_checkpoint(owner):
    workflow = make_workflow(title=TITLE, external_id="T-" + "9" * 150, owner=owner, kind="refund_" + "k" * 90)
    make_step(workflow, 1, "read_" + "t" * 190, "tool", output={"blob": LONG, LONG[:300]: [LONG] * 3}, verified=True)
    make_step(
        workflow,
        2,
        "issue_refund",
        "effect",
        status="pending",
        input={"amount": "1" * 60, "note": LONG},
        promise="P" * 3000,
    )
    return make_checkpoint(workflow, detail="D" * 5000, at_seq=3, state={"memo": LONG})


def _fits(page, width):
    overflow = page.evaluate("() => document.documentElement.scrollWidth")
    assert overflow <= width, f"{page.url} is {overflow} px wide in a {width} px window"


@pytest.mark.parametrize("width", [1440, 390])
def test_every_page_fits_the_window_with_unbroken_5000_character_agent_text(browser, live_server, alice, width):
    checkpoint = _long_checkpoint(alice)
    context = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        login(page, alice)
        for path in (
            "/",
            "/?scope=mine",
            "/mine/",
            f"/checkpoints/{checkpoint.pk}/",
            f"/workflows/{checkpoint.workflow_id}/",
            "/search/?q=Refund",
        ):
            page.goto(path)
            _fits(page, width)
        page.goto("/")
        row = page.get_by_test_id("queue-row")
        claim = row.get_by_test_id("claim")
        expect(claim).to_be_visible()
        assert claim.bounding_box()["x"] + claim.bounding_box()["width"] <= width
        title = row.locator(".rowlink")
        assert title.get_attribute("title") == TITLE  # the full text on hover
        sla = row.locator(".countdown")
        assert sla.bounding_box()["x"] + sla.bounding_box()["width"] <= width
        page.screenshot(path=f"/tmp/shots/long-queue-{width}.png")

        page.goto(f"/checkpoints/{checkpoint.pk}/")
        clock = page.get_by_test_id("sla-clock")
        box = clock.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        expect(page.get_by_test_id("decide-resume")).to_be_visible()
        page.screenshot(path=f"/tmp/shots/long-workbench-{width}.png")
    finally:
        context.close()
