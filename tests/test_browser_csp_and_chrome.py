"""In Chromium (issue 28 item 15): claims and decisions on the workbench raise no CSP violation, the
browser's /favicon.ico is served, the bell is drawn without an emoji font, and the claim toast never
covers the decision buttons."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_worked_example
from workflows.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
    [e.violatedDirective, e.blockedURI, e.sourceFile, e.lineNumber, e.sample].join(' | ')));
"""


def _watch(page) -> list[str]:
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(RECORD_VIOLATIONS)
    return console


def _violations(page, console) -> list[str]:
    return [*page.evaluate("window.__csp || []"), *console]


def test_claiming_and_deciding_raise_no_csp_violation(page, alice):
    console = _watch(page)
    first = make_checkpoint(make_worked_example(refund_status="pending"))
    second = make_checkpoint()
    login(page, alice)

    page.goto(f"/checkpoints/{first.pk}/")
    # Dragging a textarea's resize handle gives it a style attribute (through the CSSOM, which the CSP
    # allows); htmx then copied that attribute onto the swapped-in copy with setAttribute: a violation.
    page.get_by_test_id("comment-body").evaluate("el => { el.style.height = '80px'; }")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("claim-panel").get_by_test_id("assignee")).to_contain_text("you")
    refund = page.get_by_test_id("unknown-effect").filter(has_text="issue_refund")
    refund.get_by_test_id("confirm-happened").check()
    refund.get_by_test_id("confirm-ref").fill("R-88")
    page.get_by_test_id("instructions").fill("Write the note.")
    page.get_by_test_id("money-confirmed").check()
    page.get_by_test_id("decide-resume").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
    decision = Decision.objects.get(checkpoint=first)
    decision.start_attempt()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "running")
    decision.mark_succeeded()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "succeeded")
    first_page = _violations(page, console)

    page.goto(f"/checkpoints/{second.pk}/")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("claim-panel").get_by_test_id("assignee")).to_contain_text("you")
    page.get_by_test_id("handoff-to").fill("Finance desk")
    page.get_by_test_id("decide-handoff").click()
    expect(page.get_by_test_id("decision-status")).to_have_attribute("data-status", "queued")
    page.goto("/")  # and the queue's own swaps
    expect(page.get_by_test_id("whoami")).to_be_visible()

    assert first_page == [] and _violations(page, console) == []


def _overlap(a, b) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize(
    "viewport", [{"width": 1400, "height": 900}, {"width": 1280, "height": 640}, {"width": 390, "height": 844}]
)
def test_the_claim_toast_never_covers_a_decision_button(page, alice, viewport):
    page.set_viewport_size(viewport)
    checkpoint = make_checkpoint()
    login(page, alice)
    page.goto(f"/checkpoints/{checkpoint.pk}/")
    page.get_by_test_id("claim").click()
    toast = page.get_by_test_id("flash").locator(".toast").first
    expect(toast).to_be_visible()
    page.screenshot(path=f"/tmp/na-toast-{viewport['width']}.png")

    buttons = page.locator("[data-testid^='decide-'], [data-testid='claim-panel'] button")
    expect(buttons.first).to_be_visible()
    for where in ("end", "center", "start"):  # wherever the operator has scrolled the button to
        for i in range(buttons.count()):
            button = buttons.nth(i)
            if not button.is_visible():
                continue
            button.evaluate(f"b => b.scrollIntoView({{block: '{where}'}})")
            a, b = toast.bounding_box(), button.bounding_box()
            assert a and b and not _overlap(a, b), (where, button.get_attribute("data-testid"), a, b)


def test_the_browser_gets_an_icon_and_the_bell_needs_no_emoji_font(page, alice, adam):
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    login(page, alice)

    bell = page.get_by_test_id("bell-icon")
    box = bell.bounding_box()
    assert box and box["width"] >= 12 and box["height"] >= 12  # drawn from a path, not a glyph of some font
    assert "🔔" not in page.content()
    icon = page.goto("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
    page.goto("/")
    assert page.locator("link[rel=icon]").get_attribute("href").endswith(".svg")
    page.context.clear_cookies()
    login(page, adam)
    page.goto("/admin/")  # a page without the console's <link rel=icon>: Chromium asks for /favicon.ico
    expect(page.locator("#site-name")).to_be_visible()
    assert missing == []
