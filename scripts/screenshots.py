"""Screenshots of the queue, the workbench, the approvals tab, My workflows, the workflow page, a replay,
failing over, a fork, the workbench on a phone, notifications on the phone (Web Push), the TPM pages
(resume dashboard, readiness, staffing budget), an incident with its blast radius and a rollout,
recovery drills (the drills page, a report with its trend) and the queue per team, from realistic data:
docs/screenshots/*.png.

Runs on its own throwaway SQLite database and an in-process server, so it
needs nothing running and touches no real data:

    .venv/bin/python scripts/screenshots.py
    .venv/bin/python scripts/screenshots.py --only incident     # the incident page alone
    .venv/bin/python scripts/screenshots.py --only drills       # drills.png and drill-report.png alone
    .venv/bin/python scripts/screenshots.py --only-push    # just docs/screenshots/push.png
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"

sys.path.insert(0, str(ROOT))
for name in ("DATABASE_URL", "CELERY_BROKER_URL"):  # a scratch database, never the configured one
    os.environ.pop(name, None)
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DEBUG": "1",
        "SECRET_KEY": "screenshots",
        "VAR_DIR": tempfile.mkdtemp(prefix="rc-screens-"),
        "DJANGO_ALLOW_ASYNC_UNSAFE": "true",
        "LOG_LEVEL": "WARNING",
        # A throwaway VAPID key (generated for these pictures, never used again): Web Push is on.
        "VAPID_PRIVATE_KEY": "Cx8auzcAvgSPAO3UhYsgUgyqOQS7r3pqJ0n3J11Imic",
    }
)

import django  # noqa: E402

django.setup()

from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test.testcases import LiveServerThread  # noqa: E402
from playwright.sync_api import Browser, Page, ViewportSize  # noqa: E402

from scripts.screenshot_data import (  # noqa: E402
    seed,
    seed_breach_history,
    seed_drills,
    seed_incident,
    seed_replay,
    seed_teams,
)
from tests.helpers import make_user  # noqa: E402
from workflows.models import Checkpoint, Incident  # noqa: E402

PASSWORD = "pw-" + "x" * 12


def serve() -> str:
    """Start the console in this process on a free port (its static files too); answers its base URL."""
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    return f"http://127.0.0.1:{server.port}"


def signed_in(browser: Browser, base: str, username: str, *, phone: bool = False) -> Page:
    """A new page signed in as ``username``: a desktop window, or a phone (390 x 844, touch)."""
    size: ViewportSize = {"width": 390, "height": 844} if phone else {"width": 1440, "height": 900}
    page = browser.new_page(base_url=base, viewport=size, device_scale_factor=1, is_mobile=phone, has_touch=phone)
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_test_id("login-submit").click()
    return page


def drill_shots(browser: Browser, base: str) -> None:
    latest = seed_drills()
    tpm = signed_in(browser, base, "tess")
    tpm.goto("/drills/")
    tpm.check('input[name="when"][value="weekly"]')
    tpm.screenshot(path=str(OUT / "drills.png"), full_page=True)
    tpm.goto(f"/drills/{latest}/report/")
    tpm.screenshot(path=str(OUT / "drill-report.png"), full_page=True)


def main_drills() -> None:
    from playwright.sync_api import sync_playwright

    call_command("migrate", verbosity=0)
    base = serve()
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        drill_shots(browser, base)
        browser.close()
    print(f"wrote drills and drill-report .png in {OUT}")


def shoot_incident(browser: Browser, base: str, incident: Incident) -> None:
    page = signed_in(browser, base, "alice")
    page.goto(f"/incidents/{incident.pk}/")
    page.wait_for_selector('[data-testid="rollout"]')
    page.screenshot(path=str(OUT / "incident.png"), full_page=True)


def push_screenshot(browser: Browser, base: str, checkpoint: Checkpoint) -> None:
    """The notifications page on a phone: what pushes, and alice's devices with Web Push on."""
    from django.db import transaction

    from workflows.models import Channel, Notification

    alice = make_user("alice")
    with transaction.atomic():
        Notification.send(
            kind=Notification.Kind.ASSIGNED,
            users=[alice],
            checkpoint=checkpoint,
            key="shot:assigned",
            title=f"bob assigned it to you: {checkpoint.workflow.title}",
            body="You handled this customer's last refund.",
        )
        Notification.send(
            kind=Notification.Kind.ESCALATED,
            users=[alice],
            checkpoint=checkpoint,
            key="shot:escalated",
            title=f"Escalation level 1: {checkpoint.workflow.title}",
            body="Breached at 09:40 UTC; escalated to alice.",
        )
    for device, host in (("Chrome on Android", "fcm.googleapis.com"), ("Safari on iOS", "web.push.apple.com")):
        Channel.subscribe(
            alice,
            device=device,
            endpoint=f"https://{host}/{device.split()[0].lower()}-demo-subscription",
            p256dh="BOwJoG03PpcBW69U0qLoSdqtjeePEu4Y4p5_MFWgG-6REoEBwMpC0Nf9qMZrFpiLX4mMI3Po48FNjoRiL9ThQhg",
            auth="AAAAAAAAAAAAAAAAAAAAAA",
        )
    phone = signed_in(browser, base, "alice", phone=True)
    phone.goto("/notifications/")
    phone.get_by_test_id("push-devices").screenshot(path=str(OUT / "push.png"))


def main() -> None:
    from playwright.sync_api import sync_playwright

    if sys.argv[1:] == ["--only", "incident"]:
        call_command("migrate", verbosity=0)
        make_user("alice")
        incident = seed_incident()
        base = serve()
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            shoot_incident(browser, base, incident)
            browser.close()
        print(f"wrote incident.png in {OUT}")
        return

    call_command("migrate", verbosity=0)
    checkpoint = seed()
    workflow, replay_checkpoint, run = seed_replay()
    from django.contrib.auth import get_user_model

    from scripts.recovery_history import build

    operators = list(get_user_model().objects.filter(username__in=["alice", "bob"]))
    print(f"recovery history: {build(operators)} workflows over 28 days (seed 2026)")
    base = serve()
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        if "--only-push" in sys.argv:
            push_screenshot(browser, base, checkpoint)
            browser.close()
            return
        page = signed_in(browser, base, "alice")
        page.wait_for_selector('[data-testid="queue-row"]')
        page.keyboard.press("j")
        page.keyboard.press("j")
        page.screenshot(path=str(OUT / "queue.png"))
        page.goto(f"/checkpoints/{checkpoint.pk}/")
        refund = page.get_by_test_id("unknown-effect").filter(has_text="issue_refund")
        refund.get_by_test_id("confirm-happened").check()
        refund.get_by_test_id("confirm-ref").fill("R-88")
        page.get_by_test_id("instructions").fill(
            "Refund R-88 is in the ledger: do not issue it again. Write the ticket note, then notify the customer."
        )
        page.locator("body").click(position={"x": 5, "y": 200})
        page.screenshot(path=str(OUT / "workbench.png"), full_page=True)
        page.goto("/?scope=approval")
        page.wait_for_selector('[data-testid="queue-row"]')
        page.get_by_test_id("row-review-open").first.click()  # what is approved shows before Approve works
        page.screenshot(path=str(OUT / "approvals.png"))
        page.goto("/mine/")
        page.screenshot(path=str(OUT / "mine.png"), full_page=True)
        page.goto(f"/workflows/{workflow.pk}/")
        page.get_by_test_id("step-output").nth(4).locator("summary").click()
        page.screenshot(path=str(OUT / "workflow.png"), full_page=True)
        page.goto(f"/replays/{run.pk}/")
        page.screenshot(path=str(OUT / "replay.png"), full_page=True)
        page.goto(f"/checkpoints/{replay_checkpoint.pk}/")
        page.get_by_test_id("standby").select_option("support-bot-standby")
        page.screenshot(path=str(OUT / "failover.png"), full_page=True)
        page.goto(f"/workflows/{workflow.pk}/")
        page.get_by_test_id("fork-from").fill("6")
        page.get_by_test_id("fork-reason").fill("The refund went out in cents: refund again with the corrected amount.")
        page.get_by_test_id("fork-input").fill('{"amount": "195.66"}')
        page.get_by_test_id("fork-money-confirmed").check()
        for repeat in page.locator('input[name="repeat"]').all():  # the refund the original already issued
            repeat.check()
        page.get_by_test_id("fork-submit").click()
        page.get_by_test_id("workflow-link").first.click()
        page.wait_for_selector('[data-testid="forked-from"]')
        page.screenshot(path=str(OUT / "fork.png"), full_page=True)
        phone = signed_in(browser, base, "alice", phone=True)
        phone.goto(f"/checkpoints/{checkpoint.pk}/")
        phone.screenshot(path=str(OUT / "phone.png"))
        push_screenshot(browser, base, checkpoint)
        tpm = signed_in(browser, base, "tess")
        tpm.goto("/resumes/?grain=day")
        tpm.screenshot(path=str(OUT / "resumes.png"), full_page=True)
        tpm.goto("/readiness/")
        tpm.screenshot(path=str(OUT / "readiness.png"), full_page=True)
        tpm.goto("/staffing/")
        tpm.screenshot(path=str(OUT / "staffing.png"), full_page=True)
        seed_breach_history()  # after the resume pages: their pictures keep the fleet's own history
        tpm.goto("/breaches/")
        tpm.set_viewport_size({"width": 1440, "height": 1500})  # the cards, the charts and the table's top
        tpm.screenshot(path=str(OUT / "breaches.png"))
        shoot_incident(browser, base, seed_incident())  # its checkpoints are not in the queue's picture
        seed_teams()  # the pictures above show a console without teams
        page = signed_in(browser, base, "alice")  # signing in again for the incident ended this page's session
        page.wait_for_selector('[data-testid="team-tab-support"]')
        page.screenshot(path=str(OUT / "team-queue.png"))
        drill_shots(browser, base)  # last: its team is not in the team queue's picture
        browser.close()
    print(
        f"wrote queue, workbench, approvals, mine, workflow, replay, failover, fork, phone, push, resumes, "
        f"readiness, staffing, breaches, incident, team-queue, drills and drill-report .png in {OUT}"
    )


if __name__ == "__main__":
    main_drills() if sys.argv[1:] in (["drills"], ["--only", "drills"]) else main()
