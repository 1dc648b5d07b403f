"""In Chromium, at 1400 × 900 and 390 × 844: the resume dashboard names every series in its legends, says
"no data" where a share has nothing to measure, says why each miss was missed, and says a trend needs more
than one day (issue 28, item 6)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.labels import label
from tests.browser_fixtures import login
from tests.phone_walk import BROKEN_WORDS, CULPRITS
from tests.recovery_histories import build_history
from workflows import metrics
from workflows.models import Reason

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each legend entry of each chart, with where Chromium drew it, against the chart's own box (viewBox units).
LEGENDS = """() => [...document.querySelectorAll("svg.chart")].flatMap(svg => {
  const [, , width, height] = svg.getAttribute("viewBox").split(" ").map(Number);
  return [...svg.querySelectorAll("text.chart-legend")].map(t => {
    const box = t.getBBox();
    return {name: t.textContent, inside: box.x >= 0 && box.x + box.width <= width && box.y >= 0
            && box.y + box.height <= height};
  });
})"""


@pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}])
def test_the_dashboard_names_every_series_says_no_data_and_why_each_miss(
    browser, live_server, alice, bob, tess, adam, viewport
):
    build_history(operator=alice, other=bob, owner=adam)
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = context.new_page()
        login(page, tess)
        page.goto("/resumes/")

        legends = page.evaluate(LEGENDS)
        names = {entry["name"] for entry in legends}
        assert {metrics.FIGURES[slug].label for slug in metrics.HEADLINES} <= names
        assert [entry["name"] for entry in legends if not entry["inside"]] == []
        # Only rate_limit's checkpoint still waits: none of its workflows settled, so no share to draw.
        bars = (
            page.get_by_test_id("breakdown-reason")
            .locator("svg.chart a")
            .evaluate_all(
                "marks => Object.fromEntries(marks.map(m => [m.querySelector('.chart-label').textContent, "
                "m.querySelector('.chart-value').textContent]))"
            )
        )
        # The bars name reasons in words (the label filter): "rate limit", not rate_limit.
        assert bars[label(Reason.RATE_LIMIT)] == "no data", bars  # none settled
        assert bars[label(Reason.PROVIDER_CHANGE)] == "0 %", bars  # 0 of 1
        why = page.get_by_test_id("why-missed-resumed_without_data_loss")
        expect(why).to_contain_text("1 aborted by an operator")
        expect(why).to_contain_text("1 handed off to people")
        expect(why).to_contain_text("2 completed with a lost effect")
        expect(page.get_by_test_id("motion").locator("text.chart-empty").first).to_contain_text(
            "Only one day with data so far"
        )
        assert page.evaluate(BROKEN_WORDS, ".grid") == []  # "refun d", "model_tim eout" in the breakdowns
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"], page.evaluate(CULPRITS)
        page.screenshot(path=f"/tmp/shots/resumes-{viewport['width']}.png", full_page=True)
        why.get_by_role("link", name="1").first.click()
        expect(page.get_by_test_id("drill-title")).to_have_text("Not resumed without data loss: aborted by an operator")
    finally:
        context.close()
