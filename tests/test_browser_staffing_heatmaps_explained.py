"""In Chromium, at 1400 × 900 and 390 × 844: each staffing heatmap has a title above it and a colour legend
under it that says what the shades mean, with the values (issue 28, item 8)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.recovery_histories import build_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEATMAPS = {
    "staffing-heatmap": ("Operators needed per hour of the week", "operators needed"),
    "arrivals-heatmap": ("Checkpoints opened per hour of the week", "checkpoints opened"),
    "worked-heatmap": ("Operators who worked per hour of the week", "operators"),
}
# The legend's texts as Chromium drew them, each against the picture's own box.
LEGEND = """svg => { const [, , w, h] = svg.getAttribute("viewBox").split(" ").map(Number);
  return [...svg.querySelectorAll(".chart-scale text, text.chart-legend")].map(t => { const b = t.getBBox();
    return {text: t.textContent, inside: b.x >= 0 && b.x + b.width <= w && b.y >= 0 && b.y + b.height <= h}; }); }"""


@pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}])
def test_every_staffing_heatmap_is_titled_and_says_what_its_colours_mean(
    browser, live_server, alice, bob, tess, adam, viewport
):
    build_history(operator=alice, other=bob, owner=adam)
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = context.new_page()
        login(page, tess)
        page.goto("/staffing/")

        for testid, (title, unit) in HEATMAPS.items():
            figure = page.get_by_test_id(testid)
            expect(figure.locator("figcaption")).to_be_visible()
            expect(figure.locator("figcaption")).to_contain_text(title)
            legend = figure.locator("svg").evaluate(LEGEND)
            texts = [entry["text"] for entry in legend]
            assert [entry["text"] for entry in legend if not entry["inside"]] == [], testid
            *scale, sentence = texts[: texts.index(next(t for t in texts if t.startswith("Colour"))) + 1]
            values = [float(v) for v in scale]  # up to five values, from 0 to the peak, each once
            assert values[0] == 0 and values == sorted(set(values)) and len(values) >= 2, texts
            assert sentence == f"Colour: darker is more {unit}, from {scale[0]} to {scale[-1]}", texts
        assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        page.screenshot(path=f"/tmp/shots/staffing-{viewport['width']}.png", full_page=True)
    finally:
        context.close()
