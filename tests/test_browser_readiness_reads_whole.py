"""In Chromium, at 1400 × 900 and 390 × 844: readiness keeps its words whole and says each finding once
(issue 28, item 7: "notify_custome r", "12/1 2", every finding listed twice)."""

from __future__ import annotations

import pytest

from tests.browser_fixtures import login
from tests.phone_walk import BROKEN_WORDS
from tests.recovery_histories import build_history
from workflows import metrics, readiness

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}])
def test_readiness_breaks_no_word_and_lists_each_finding_once(browser, live_server, alice, bob, tess, adam, viewport):
    build_history(operator=alice, other=bob, owner=adam)
    kinds = readiness.review(metrics.Filters.last())
    findings = [f.text for kind in kinds for f in kind.findings]
    assert any("notify_customer" in text for kind in kinds for text in [e.name for e in kind.effects])
    assert findings, "the history has gaps to find"
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = context.new_page()
        login(page, tess)
        page.goto("/readiness/")

        assert page.evaluate(BROKEN_WORDS, ".readiness") == []
        text = page.locator("main").inner_text()
        assert {finding: text.count(finding) for finding in findings} == dict.fromkeys(findings, 1)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        page.screenshot(path=f"/tmp/shots/readiness-{viewport['width']}.png", full_page=True)
    finally:
        context.close()
