"""In Chromium (issue 28 item 10): every line of a runbook diff sits on the row of its line numbers, and a
stale runbook's notice says who was told only when someone was."""

from __future__ import annotations

import datetime

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_runbook
from workflows.models import Runbook

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_unchanged_added_and_removed_lines_sit_beside_their_numbers(page, adam):
    runbook = make_runbook(title="Refunds", body="Read the ticket.\nCheck the ledger.\nResume.")
    runbook.body = "Read the ticket.\nCheck the ledger twice.\nResume."
    runbook.save()
    login(page, adam)
    page.goto(f"/runbooks/{runbook.pk}/diff/")

    rows = page.get_by_test_id("diff").locator("tr[class^='diff-']:not(.diff-gap)")
    expect(rows.first).to_be_visible()
    kinds = set()
    for i in range(rows.count()):
        row = rows.nth(i)
        kinds.add(row.get_attribute("class"))
        if not row.locator("td.txt").inner_text().strip():
            continue  # a blank line draws nothing to align
        # Where the text cell's content and the line number's content are drawn (a Range over each cell).
        text, number = row.evaluate("""row => {
            const box = cell => { const r = document.createRange(); r.selectNodeContents(cell);
                                  const rects = [...r.getClientRects()].filter(b => b.height > 0);
                                  return {top: Math.min(...rects.map(b => b.top)),
                                          bottom: Math.max(...rects.map(b => b.bottom))}; };
            const numbered = [...row.querySelectorAll('td.ln')].find(td => td.textContent.trim());
            return [box(row.querySelector('td.txt')), box(numbered)];
        }""")
        line = number["bottom"] - number["top"]
        assert text["bottom"] - text["top"] < 1.5 * line, (row.inner_text(), text, number)  # one line, not two
        assert abs(text["top"] - number["top"]) < line / 2, (row.inner_text(), text, number)
    assert kinds == {"diff-same", "diff-old", "diff-new"}, kinds


def test_a_stale_runbook_without_an_owner_never_says_its_owner_was_told(page, adam):
    past = datetime.date.today() - datetime.timedelta(days=3)
    orphan = make_runbook(title="Orphan", owner=None, review_by=past)
    owned = make_runbook(title="Owned", owner=adam, review_by=past)
    login(page, adam)

    page.goto(f"/runbooks/{orphan.pk}/")
    expect(page.get_by_test_id("runbook-stale")).to_contain_text("nobody owns it, so nobody has been told")
    expect(page.get_by_test_id("runbook-stale")).not_to_contain_text("its owner, has been told")
    page.goto(f"/runbooks/{owned.pk}/")
    expect(page.get_by_test_id("runbook-stale")).to_contain_text("is told by the next clock sweep")
    page.goto("/runbooks/")
    expect(page.get_by_test_id("stale-count")).to_contain_text("2 runbooks past their review date")
    expect(page.get_by_test_id("stale-count")).to_contain_text("1 has no owner to tell")
    expect(page.get_by_test_id("stale-count")).not_to_contain_text("owners have been told")

    assert Runbook.announce_stale() == 1  # the sweep tells the one owner there is
    page.goto(f"/runbooks/{owned.pk}/")
    expect(page.get_by_test_id("runbook-stale")).to_contain_text("adam, its owner, has been told")
    page.goto("/runbooks/")
    expect(page.get_by_test_id("stale-count")).to_contain_text("1 owner has been told in the console")
