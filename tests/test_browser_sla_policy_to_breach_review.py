"""Issue 9's acceptance flow in Chromium: an admin sets up a one-minute SLA policy with an escalation level
(Django admin) and a runbook using it (the console's editor), and previews it; an agent's checkpoint (over the
real API) gets it; the workbench countdown turns amber, then red; the escalation sweep reassigns it and notifies
(the bell shows it); the breach appears in the TPM breach review with its overrun; the TPM records a reason and
exports the CSV.

Nobody waits for real minutes. The live server runs in this process, so time-machine holds the server's clock
and moves it by hand; Playwright's clock moves the browser's (the countdown is ticked by console.js).
"""

from __future__ import annotations

import csv
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from playwright.sync_api import expect
from recovery_client import RecoveryClient

from tests.browser_fixtures import login
from tests.helpers import make_agent
from workflows import tasks
from workflows.models import Checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Screenshots for a person to look at; kept out of the repository (BROWSER_SHOTS moves them).
SHOTS = Path(os.environ.get("BROWSER_SHOTS") or tempfile.gettempdir()) / "sla-policy-flow"


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_one_minute_policy_runs_from_the_admin_to_the_breach_review_csv(
    new_page, live_server, adam, alice, bob, tess
):
    start = datetime.now(UTC).replace(microsecond=0)
    with time_machine.travel(start, tick=False) as server_clock:
        admin = new_page()
        login(admin, adam)
        create_policy(admin)
        create_breach_reason(admin, "Understaffed shift")
        create_runbook(admin)

        admin.goto("/runbooks/preview/?kind=refund&reason=model_timeout")
        expect(admin.get_by_test_id("preview-runbook")).to_contain_text("Refunds: the model timed out")
        expect(admin.get_by_test_id("preview-policy")).to_contain_text(
            "Refunds within a minute: decision in 1 min (warns 30 s before)"
        )
        expect(admin.get_by_test_id("preview-due")).to_contain_text(f"{start + timedelta(minutes=1):%H:%M} UTC")
        expect(admin.get_by_test_id("preview-result")).to_contain_text("version 1")
        expect(admin.get_by_test_id("preview-result")).to_contain_text("bob, reassigns")
        shot(admin, "1-runbook-preview")

        # An agent pauses a refund over HTTP, as a real runtime does.
        _, token = make_agent("refund-bot")
        agent = RecoveryClient(live_server.url, token, timeout=10, retries=0)
        workflow = agent.create_workflow("T-4711", "refund", "Refund for ticket T-4711")
        opened = agent.open_checkpoint(workflow["id"], "model_timeout", detail="the model timed out")
        checkpoint = Checkpoint.objects.select_related("policy", "runbook").get(pk=opened["id"])
        assert checkpoint.policy.name == "Refunds within a minute" and checkpoint.runbook.slug == "refund-one-minute"
        assert checkpoint.due_at == start + timedelta(minutes=1)
        assert checkpoint.warn_at == start + timedelta(seconds=30)  # 50 % of the target before it

        operator = new_page()
        operator.clock.install(time=start)
        login(operator, alice)
        operator.goto(f"/checkpoints/{checkpoint.pk}/")
        clock = operator.get_by_test_id("sla-clock")
        countdown = clock.locator(".countdown")
        expect(countdown).to_have_attribute("data-sla", "ok")
        expect(operator.get_by_test_id("runbook")).to_contain_text("Refunds: the model timed out")
        operator.clock.fast_forward("00:35")
        expect(countdown).to_have_attribute("data-sla", "warn")
        expect(clock).to_have_class(has_class("sla-warn"))
        expect(countdown).to_contain_text("left")
        shot(operator, "2-workbench-amber")
        operator.clock.fast_forward("00:30")
        expect(countdown).to_have_attribute("data-sla", "breached")
        expect(clock).to_have_class(has_class("sla-breached"))
        expect(countdown).to_contain_text("over")
        shot(operator, "3-workbench-red")

        # Two minutes past the due time, the beat's sweep runs (the real task function).
        # The web's clock is moved; the sweep judges on the database's clock (guarantee 7), so it is told the instant.
        server_clock.move_to(start + timedelta(minutes=2, seconds=5))
        swept = tasks.sweep_clocks(now=start + timedelta(minutes=2, seconds=5))
        assert (swept["warnings"], swept["breaches"], swept["escalations"]) == (1, 1, 1)
        checkpoint.refresh_from_db()
        assert checkpoint.breached_at == checkpoint.due_at and checkpoint.assignee == bob

        bobs = new_page()
        login(bobs, bob)
        expect(bobs.get_by_test_id("bell-count")).to_have_text("2")
        bobs.get_by_test_id("bell").click()
        notes = bobs.get_by_test_id("notification")
        expect(notes.filter(has_text="Escalation level 1 assigned it to you")).to_have_count(1)
        expect(notes.filter(has_text="escalated to bob")).to_have_count(1)
        shot(bobs, "4-bell-notifications")

        # The TPM reads the review three minutes and a half after the checkpoint opened: 2m35s over.
        server_clock.move_to(start + timedelta(minutes=3, seconds=35))
        review = new_page()
        login(review, tess)
        review.get_by_test_id("nav-breaches").click()
        row = review.locator(f'[data-testid="breach-row"][data-id="{checkpoint.pk}"]')
        expect(row.get_by_test_id("overrun")).to_have_text("2m")
        expect(row.get_by_test_id("escalations")).to_have_text("1")
        expect(row).to_contain_text("bob")
        expect(review.get_by_test_id("card-decision-met").get_by_test_id("card-value")).to_have_text("0.0 %")
        row.get_by_label("Breach reason").select_option(label="Understaffed shift")
        row.get_by_label("Breach note").fill("one operator on the refunds shift")
        row.get_by_role("button", name="Save").click()
        expect(review.get_by_test_id("flash")).to_contain_text(f"Breach reason recorded for checkpoint {checkpoint.pk}")
        shot(review, "5-breach-review")

        with review.expect_download() as download:
            review.get_by_test_id("breach-csv").click()
        with open(download.value.path(), newline="", encoding="utf-8") as export:
            [line] = [r for r in csv.DictReader(export) if r["checkpoint"] == str(checkpoint.pk)]
    assert line["workflow"] == "Refund for ticket T-4711" and line["runbook"] == "refund-one-minute"
    assert line["due_at"] == line["breached_at"] == (start + timedelta(minutes=1)).isoformat()
    assert line["decided_at"] == "" and line["overrun_seconds"] == "155"
    assert (line["owner"], line["escalation_levels_fired"]) == ("bob", "1")
    assert (line["breach_reason"], line["breach_note"]) == ("Understaffed shift", "one operator on the refunds shift")


def create_policy(page) -> None:
    page.goto("/admin/workflows/slapolicy/add/")
    page.fill("#id_name", "Refunds within a minute")
    page.fill("#id_decision_target_minutes", "1")
    page.fill("#id_decision_warning", "50")
    page.select_option("#id_decision_warning_unit", "percent")
    page.fill("#id_levels-0-delay_minutes", "1")
    page.check("#id_levels-0-notify")
    page.check("#id_levels-0-reassign")
    page.locator("#id_levels-0-user + .select2 .select2-selection").click()  # the admin's autocomplete
    page.locator(".select2-search__field").fill("bob")
    page.locator(".select2-results__option", has_text="bob").click()
    page.locator('input[name="_save"]').click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")


def create_breach_reason(page, name: str) -> None:
    page.goto("/admin/workflows/breachreason/add/")
    page.fill("#id_name", name)
    page.locator('input[name="_save"]').click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")


def create_runbook(page) -> None:
    """In the console's runbook editor (the Django admin stays as a fallback)."""
    page.goto("/")
    page.get_by_test_id("nav-runbooks").click()
    page.get_by_test_id("new-runbook").click()
    page.fill("#id_title", "Refunds: the model timed out")
    page.fill("#id_slug", "refund-one-minute")
    page.fill("#id_body", "Check the payment ledger before resuming.")
    page.fill("#id_workflow_kind", "refund")
    page.select_option("#id_policy", label="Refunds within a minute")
    page.select_option("#id_owner", label="adam")
    page.fill("#id_review_by", "2027-03-01")
    for action in ("resume", "handoff", "abort"):
        page.check(f"input[name=allowed_actions][value={action}]")
    page.get_by_test_id("save-runbook").click()
    expect(page.get_by_test_id("flash")).to_contain_text("created: version 1")


def has_class(css_class: str):
    import re

    return re.compile(rf"(^|\s){re.escape(css_class)}(\s|$)")
