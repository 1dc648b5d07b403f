"""The queue in a real browser: it updates by itself, claims race fairly, and the keyboard works."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_worked_example

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_checkpoint_appears_without_reloading_and_is_claimed(page, alice):
    login(page, alice)
    expect(page.locator("#queue-table")).to_contain_text("Nothing waiting here")
    page.evaluate("window.__sameDocument = true")

    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))

    row = page.locator(f"#checkpoint-{checkpoint.pk}")
    expect(row).to_contain_text(checkpoint.workflow.title)
    expect(page.get_by_test_id("count-all")).to_have_text("1")
    assert page.evaluate("window.__sameDocument") is True  # polled in, not reloaded
    row.get_by_test_id("claim").click()
    expect(row.get_by_test_id("assignee")).to_contain_text("you")
    expect(page.get_by_test_id("flash")).to_contain_text("You claimed")
    assert page.evaluate("window.__sameDocument") is True


def test_two_operators_claim_at_once_and_the_loser_sees_who_has_it(new_page, alice, bob):
    checkpoint = make_checkpoint()
    alices, bobs = new_page(), new_page()
    for page, user in ((alices, alice), (bobs, bob)):
        login(page, user)
        page.goto(f"/checkpoints/{checkpoint.pk}/")
        expect(page.get_by_test_id("claim")).to_be_visible()

    alices.get_by_test_id("claim").click()
    expect(alices.get_by_test_id("claim-panel").get_by_test_id("assignee")).to_contain_text("you")
    bobs.get_by_test_id("claim").click()

    expect(bobs.get_by_test_id("flash")).to_contain_text("alice has already claimed this checkpoint.")
    expect(bobs.get_by_test_id("claim-panel").get_by_test_id("assignee")).to_contain_text("alice")
    expect(bobs.get_by_test_id("claim")).to_have_count(0)


def test_keyboard_triage_moves_claims_and_shows_help(page, alice):
    first, second = make_checkpoint(), make_checkpoint()
    login(page, alice)
    rows = page.get_by_test_id("queue-row")
    expect(rows).to_have_count(2)

    page.keyboard.press("j")
    expect(page.locator(f"#checkpoint-{first.pk}")).to_have_class(has_class("is-selected"))
    page.keyboard.press("j")
    expect(page.locator(f"#checkpoint-{second.pk}")).to_have_class(has_class("is-selected"))
    page.keyboard.press("k")
    expect(page.locator(f"#checkpoint-{first.pk}")).to_have_class(has_class("is-selected"))

    page.keyboard.press("c")
    expect(page.locator(f"#checkpoint-{first.pk}").get_by_test_id("assignee")).to_contain_text("you")
    expect(page.locator(f"#checkpoint-{first.pk}")).to_have_class(has_class("is-selected"))  # kept after swap

    page.keyboard.press("?")
    expect(page.get_by_test_id("kbd-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("kbd-help")).to_be_hidden()

    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/checkpoints/{first.pk}/$"))


def test_the_countdown_ticks_turns_amber_at_the_warning_point_and_red_once_due(page, alice):
    from datetime import timedelta

    from django.utils import timezone

    from workflows.models import Checkpoint

    now = timezone.now()
    calm, warned, overdue = make_checkpoint(), make_checkpoint(), make_checkpoint()
    for checkpoint, warn, due in ((calm, 20, 30), (warned, -1, 10), (overdue, -20, -1)):
        Checkpoint.objects.filter(pk=checkpoint.pk).update(
            warn_at=now + timedelta(minutes=warn), due_at=now + timedelta(minutes=due)
        )
    login(page, alice)

    def countdown(checkpoint):
        return page.locator(f"#checkpoint-{checkpoint.pk} .countdown")

    expect(countdown(calm)).to_have_attribute("data-sla", "ok")
    expect(countdown(warned)).to_have_attribute("data-sla", "warn")
    expect(countdown(overdue)).to_have_attribute("data-sla", "breached")  # before the sweep records it
    expect(countdown(overdue)).to_contain_text("over")
    expect(page.locator(f"#checkpoint-{overdue.pk}")).to_have_class(has_class("sla-breached"))
    shown = countdown(calm).inner_text()
    expect(countdown(calm)).not_to_have_text(shown)  # it ticks


def has_class(css_class: str) -> re.Pattern:
    return re.compile(rf"(^|\s){re.escape(css_class)}(\s|$)")
