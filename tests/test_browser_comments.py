"""In Chromium: alice comments with a mention on the workbench; bob sees it in his notifications and in
the event log (issue 8, item 8)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_comment_with_a_mention_reaches_bob_in_the_console(new_page, alice, bob):
    checkpoint = make_checkpoint()
    alices = new_page()
    login(alices, alice)
    alices.goto(f"/checkpoints/{checkpoint.pk}/")
    alices.get_by_test_id("comment-body").fill("**Ledger shows R-88.** @bob please write the note")
    alices.get_by_test_id("comment-submit").click()

    expect(alices.get_by_test_id("flash")).to_contain_text("@bob will see it in their notifications")
    comment = alices.get_by_test_id("comment")
    expect(comment.locator("strong")).to_have_text("Ledger shows R-88.")
    expect(comment.locator(".mention")).to_have_text("@bob")
    expect(alices.get_by_test_id("comment-body")).to_have_value("")

    bobs = new_page()
    login(bobs, bob)
    bobs.goto("/notifications/")
    expect(bobs.locator("body")).to_contain_text("alice mentioned you")
    bobs.goto(f"/checkpoints/{checkpoint.pk}/")
    expect(bobs.get_by_test_id("comment")).to_contain_text("please write the note")
