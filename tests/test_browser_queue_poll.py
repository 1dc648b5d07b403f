"""In a real browser the queue's poll carries its version (hx-vals) and is answered 204 while nothing changed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _is_poll(response) -> bool:
    return "v=" in response.url and response.request.headers.get("hx-trigger") == "queue-table"


def test_the_poll_is_answered_204_until_a_checkpoint_changes(page, alice):
    first = make_checkpoint()
    login(page, alice)
    expect(page.locator(f"#checkpoint-{first.pk}")).to_be_visible()

    polls: list[int] = []
    page.on("response", lambda r: polls.append(r.status) if _is_poll(r) else None)
    # The version carries the minute (ages and the undo window move with time alone), so a poll that
    # crosses a minute renders once; every other poll while nothing changed is a 204.
    with page.expect_response(lambda r: _is_poll(r) and r.status == 204, timeout=15_000):
        pass
    assert polls.count(200) <= 1, f"more than the minute's one re-render while nothing changed: {polls}"
    expect(page.locator(f"#checkpoint-{first.pk}")).to_be_visible()  # a 204 swaps nothing away

    second = make_checkpoint()
    with page.expect_response(lambda r: _is_poll(r) and r.status == 200, timeout=15_000):
        pass
    expect(page.locator(f"#checkpoint-{second.pk}")).to_be_visible()
