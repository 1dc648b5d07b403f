"""In Chromium (issue 28 item 5): the workflow page's trajectory pager has a link per page, and a page
reached through it is in the address bar, so a reload or a shared link shows the same page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_workflow
from workflows.models import Step

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_page_three_has_a_link_and_a_reload_keeps_it(page, alice):
    workflow = make_workflow()
    Step.objects.bulk_create(
        Step(workflow=workflow, seq=i, name=f"step_{i}", kind="tool", status="committed") for i in range(1, 231)
    )  # five pages of 50
    login(page, alice)
    page.goto(f"/workflows/{workflow.pk}/")

    page.get_by_test_id("trajectory-page").filter(has_text=re.compile(r"^3$")).click()

    expect(page).to_have_url(re.compile(rf"/workflows/{workflow.pk}/\?page=3$"))
    expect(page.get_by_test_id("trajectory-page-current")).to_have_text("3")
    expect(page.locator('[data-seq="101"]')).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("trajectory-page-current")).to_have_text("3")
    expect(page.locator('[data-seq="101"]')).to_be_visible()

    page.get_by_test_id("trajectory-next").click()
    expect(page).to_have_url(re.compile(r"\?page=4$"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?page=3$"))
    expect(page.locator('[data-seq="101"]')).to_be_visible()
