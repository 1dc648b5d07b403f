"""In Chromium: an admin creates a runbook in the console, edits it, sees version 2 and the diff."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_policy
from workflows.models import Runbook

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/shots")


def test_an_admin_creates_a_runbook_edits_it_and_reads_the_diff(page, adam):
    make_policy(name="Refunds: 20 minutes", target=20, warning=5)
    login(page, adam)
    page.get_by_test_id("nav-runbooks").click()
    page.get_by_test_id("new-runbook").click()

    page.fill("#id_title", "Refund: the model timed out")
    page.fill(
        "#id_body",
        "1. Check the **ledger** for the refund's key.\n2. Resume when it is committed.\n"
        "3. <script>alert('x')</script> is text here.",
    )
    page.fill("#id_workflow_kind", "refund")
    page.select_option("#id_reason", "model_timeout")
    page.select_option("#id_policy", label="Refunds: 20 minutes")
    page.select_option("#id_owner", label="adam")
    page.fill("#id_review_by", "2027-03-01")
    for box in page.locator("input[name=allowed_actions]").all():
        box.uncheck()
    page.check("input[name=allowed_actions][value=resume]")
    page.check("input[name=allowed_actions][value=handoff]")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "runbook-form.png"), full_page=True)
    page.get_by_test_id("save-runbook").click()

    expect(page.get_by_test_id("flash")).to_contain_text("created: version 1")
    expect(page.get_by_test_id("version-row")).to_have_count(1)
    expect(page.get_by_test_id("runbook-body").locator("strong")).to_have_text("ledger")
    opened_before = make_checkpoint()  # a refund whose model timed out: it opens under version 1

    page.get_by_test_id("edit-runbook").click()
    page.fill(
        "#id_body",
        "1. Check the **ledger** for the refund's key.\n2. Resume only when it is committed "
        "and has its R- reference.\n3. <script>alert('x')</script> is text here.",
    )
    page.check("input[name=allowed_actions][value=abort]")
    page.get_by_test_id("save-runbook").click()

    expect(page.get_by_test_id("flash")).to_contain_text("as version 2")
    expect(page.get_by_test_id("version-row")).to_have_count(2)
    page.screenshot(path=str(SHOTS / "runbook-history.png"), full_page=True)
    page.goto(f"/checkpoints/{opened_before.pk}/")
    expect(page.get_by_test_id("runbook-version")).to_have_text("version 1")
    expect(page.get_by_test_id("runbook-newer")).to_contain_text("Version 2 is newer")
    expect(page.get_by_test_id("runbook-body").locator("li").nth(1)).to_have_text("Resume when it is committed.")
    page.get_by_test_id("runbook").screenshot(path=str(SHOTS / "runbook-workbench.png"))
    page.get_by_test_id("runbook-newer").get_by_role("link", name="see what changed").click()

    diff = page.get_by_test_id("diff")
    expect(diff.locator("tr.diff-old")).to_contain_text(
        ["Allowed decisions: Resume, Hand off", "2. Resume when it is committed."]
    )
    expect(diff.locator("tr.diff-new")).to_contain_text(
        ["Allowed decisions: Resume, Hand off, Abort", "has its R- reference"]
    )
    expect(page.get_by_test_id("changed-fields")).to_have_text("body, allowed decisions")
    expect(diff).to_contain_text("<script>alert('x')</script> is text here.")  # shown as text, never run
    page.screenshot(path=str(SHOTS / "runbooks.png"), full_page=True)
    page.get_by_test_id("nav-runbooks").click()
    expect(page.get_by_test_id("runbook-row")).to_have_count(1)
    page.screenshot(path=str(SHOTS / "runbook-list.png"))

    runbook = Runbook.objects.get()
    assert runbook.current_version.number == 2 and runbook.allowed_actions == ["resume", "handoff", "abort"]
