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
from datetime import timedelta
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
from django.utils import timezone  # noqa: E402
from playwright.sync_api import Browser  # noqa: E402

from tests.helpers import (  # noqa: E402
    make_agent,
    make_checkpoint,
    make_runbook,
    make_step,
    make_user,
    make_worked_example,
)
from workflows.models import Checkpoint, Comment, Decider, Incident, ReplayRun, Rollout, Workflow  # noqa: E402

PASSWORD = "pw-" + "x" * 12

OTHERS = [  # kind, title, reason, detail, minutes until due, claimed by
    (
        "address_change",
        "Update shipping address for order O-7731",
        "tool_error",
        "CRM returned 502 on PATCH /customers/4410",
        -6,
        "bob",
    ),
    ("refund", "Refund for ticket T-1039", "untrusted_output", "refund amount differs from the order total", 3, None),
    (
        "subscription_cancel",
        "Cancel subscription S-2291",
        "rate_limit",
        "billing API: 429 Too Many Requests",
        7,
        "alice",
    ),
    (
        "invoice_dispute",
        "Dispute on invoice INV-5520",
        "provider_change",
        "model answered in a new JSON shape",
        12,
        None,
    ),
    ("refund", "Refund for ticket T-1047", "model_timeout", "model call exceeded 60 s", 18, "bob"),
    ("password_reset", "Account recovery for C-88120", "manual", "operator paused: identity check", 24, None),
    ("address_change", "Update billing address for C-55014", "other", "agent went silent after step 2", 41, None),
    ("invoice_dispute", "Dispute on invoice INV-5528", "tool_error", "ledger lookup timed out", 55, None),
]


def seed() -> Checkpoint:
    alice, bob = make_user("alice"), make_user("bob")
    make_user("tess", role="tpm")
    support, _ = make_agent("support-agent", owner=alice)
    billing, _ = make_agent("billing-agent", owner=bob)
    make_runbook(
        slug="refunds",
        title="Refunds interrupted mid-way",
        workflow_kind="refund",
        requires_four_eyes=True,
        sla_target_minutes=30,
        sla_warning_minutes=10,
        url="https://runbooks.example/refunds/interrupted",
        body="1. Look the refund up in the payment ledger by its idempotency key.\n"
        "2. Confirm whether it went out; never issue it a second time.\n"
        "3. Resume: the agent writes the ticket note and notifies the customer.",
    )
    make_runbook(slug="default", title="General recovery", is_default=True, url="https://runbooks.example/general")
    now = timezone.now()
    for i, (kind, title, reason, detail, due_in, who) in enumerate(OTHERS):
        agent = billing if kind in ("invoice_dispute", "subscription_cancel") else support
        workflow = Workflow.objects.create(
            agent=agent, external_id=f"X-{4100 + i}", kind=kind, title=title, owner=agent.owner
        )
        make_step(workflow, 1, "read_request", "tool", output={"ok": True}, verified=True)
        checkpoint = Checkpoint.open_for(workflow, reason=reason, detail=detail, at_seq=2)
        if who:
            checkpoint.claim(by=alice if who == "alice" else bob)
        Checkpoint.objects.filter(pk=checkpoint.pk).update(
            opened_at=now - timedelta(minutes=30 - due_in),
            due_at=now + timedelta(minutes=due_in),
            warn_at=now + timedelta(minutes=due_in - 10),
            breached_at=now + timedelta(minutes=due_in) if due_in < 0 else None,
        )
    # The worked example of DESIGN.md, with the refund's outcome unknown.
    workflow = make_worked_example(refund_status="pending", owner=alice, agent=support)
    Workflow.objects.filter(pk=workflow.pk).update(title="Refund for ticket T-1042", external_id="T-1042")
    workflow.steps.filter(seq=3).update(idempotency_key="T-1042:issue_refund")
    workflow.refresh_from_db()
    checkpoint = Checkpoint.open_for(
        workflow,
        reason="model_timeout",
        detail="model timed out after step 3",
        at_seq=4,
        state={"remaining": ["write_ticket_note", "notify_customer"], "ticket": "T-1042", "customer": "C-20931"},
        plan=[
            {"name": "write_ticket_note", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
            {"name": "notify_customer", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
        ],
    )
    Checkpoint.objects.filter(pk=checkpoint.pk).update(
        opened_at=now - timedelta(minutes=22), due_at=now + timedelta(minutes=8), warn_at=now - timedelta(minutes=2)
    )
    checkpoint.claim(by=alice)
    Comment.post(
        checkpoint=checkpoint,
        author=bob,
        body="Payments says **R-88** settled at 09:14. @alice the note can say *refunded*.",
    )
    # T-1048: the model timed out before the refund; bob's resume waits for a second operator.
    ahead = Workflow.objects.create(
        agent=support, external_id="T-1048", kind="refund", title="Refund for T-1048", owner=alice
    )
    make_step(ahead, 1, "read_ticket", "tool", output={"ticket": "T-1048", "amount": "120.60"}, verified=True)
    proposal = Checkpoint.open_for(
        ahead,
        reason="model_timeout",
        detail="decide_refund: model call timed out",
        at_seq=2,
        plan=[
            {"name": "decide_refund", "kind": "model", "amount": None, "currency": None, "moves_money": False},
            {"name": "issue_refund", "kind": "effect", "amount": "120.60", "currency": "EUR", "moves_money": True},
        ],
    )
    Checkpoint.objects.filter(pk=proposal.pk).update(
        due_at=now + timedelta(minutes=14), warn_at=now + timedelta(minutes=4)
    )
    proposal.refresh_from_db()
    Decider(proposal).decide(
        by=bob, action="resume", money_confirmed=True, instructions="Ticket checked: refund 120.60."
    )
    # Work bob handed off to alice, for "My workflows".
    handed = Workflow.objects.create(
        agent=billing, external_id="INV-5391", kind="invoice_dispute", title="Dispute on invoice INV-5391", owner=bob
    )
    make_step(handed, 1, "read_invoice", "tool", output={"total": "310.00"}, verified=True)
    paused = Checkpoint.open_for(handed, reason="untrusted_output", detail="credit note amount looks wrong", at_seq=2)
    decision = Decider(paused).decide(
        by=bob,
        action="handoff",
        new_owner=alice,
        instructions="The customer was credited twice in March. Check with finance, then close the dispute by hand.",
    )
    decision.start_attempt()
    decision.mark_succeeded()
    return checkpoint


def seed_teams() -> None:
    """Support (alice leads it) and Billing (bob), routing the fleet's kinds. The open checkpoints opened
    before the teams existed, so each is moved to its team as an admin would (an audited transfer)."""
    from django.contrib.auth import get_user_model

    from workflows.models import RoutingRule, Team
    from workflows.models.teams import transfer

    alice, bob = (get_user_model().objects.get(username=name) for name in ("alice", "bob"))
    support = Team.objects.create(name="Support", slug="support", lead=alice)
    billing = Team.objects.create(name="Billing", slug="billing")
    support.members.add(alice)
    billing.members.add(bob)
    for team, kinds in (
        (support, ("refund", "address_change", "password_reset")),
        (billing, ("invoice_dispute", "subscription_cancel")),
    ):
        for kind in kinds:
            RoutingRule.objects.create(team=team, workflow_kind=kind)
    for checkpoint in Checkpoint.objects.unresolved().filter(team__isnull=True).select_related("workflow"):
        team = RoutingRule.route(checkpoint.workflow.kind, checkpoint.workflow.agent_id)
        if team is not None:
            transfer(checkpoint, to=team, by=bob, note="teams set up")


BREACH_SEED = 2611  # the breach review's four weeks of history: printed, so the picture can be made again


def seed_breach_history() -> None:
    """Four weeks of decided checkpoints for the breach review: most in time, some breached (more on
    weekday evenings, when the demo desk is thin), a few with a recorded breach reason."""
    import random

    from workflows.models import Agent, BreachReason

    rng = random.Random(BREACH_SEED)
    print(f"breach history seed {BREACH_SEED}")
    tess = make_user("tess-history", role="tpm")
    reasons = [
        BreachReason.objects.get_or_create(name=name)[0]
        for name in ("Understaffed shift", "Waiting on finance", "Runbook unclear")
    ]
    agents = {a.name: a for a in Agent.objects.all()}
    kinds = [
        ("refund", "support-agent"),
        ("address_change", "support-agent"),
        ("invoice_dispute", "billing-agent"),
        ("subscription_cancel", "billing-agent"),
    ]
    now = timezone.now()
    for n in range(140):
        kind, agent_name = rng.choice(kinds)
        opened = now - timedelta(days=rng.uniform(1, 27), hours=rng.uniform(0, 6))
        evening = opened.weekday() < 5 and opened.hour >= 17
        workflow = Workflow.objects.create(
            agent=agents[agent_name],
            external_id=f"H-{7000 + n}",
            kind=kind,
            title=f"{kind.replace('_', ' ').capitalize()} H-{7000 + n}",
            owner=agents[agent_name].owner,
        )
        checkpoint = Checkpoint.open_for(
            workflow, reason=rng.choice(["model_timeout", "tool_error", "rate_limit"]), detail="history", at_seq=1
        )
        due = opened + timedelta(minutes=30)
        late = rng.random() < (0.45 if evening else 0.12)
        decided = (
            due + timedelta(minutes=rng.uniform(2, 90)) if late else opened + timedelta(minutes=rng.uniform(2, 28))
        )
        Checkpoint.objects.filter(pk=checkpoint.pk).update(
            status="resolved",
            opened_at=opened,
            due_at=due,
            warn_at=due - timedelta(minutes=10),
            first_claimed_at=opened + timedelta(minutes=rng.uniform(1, 8)),
            clock_stopped_at=decided,
            breached_at=due if late else None,
        )
        Workflow.objects.filter(pk=workflow.pk).update(status="completed")
        if late and rng.random() < 0.4:
            Checkpoint.objects.get(pk=checkpoint.pk).explain_breach(reason=rng.choice(reasons), note="", by=tess)


DRILL_SEED = 2026


def seed_drills() -> int:
    """A weekly drill in the Refunds team's calendar and three of its occurrences, a week apart, each with two
    drilled refunds an operator decided (journalled by the runtime; times spread as a desk would take them).
    Answers the latest occurrence's id."""
    import json
    import random
    from datetime import time

    from django.conf import settings

    from tests.apitools import api_agent
    from tests.recovery_histories import Fleet
    from workflows.models import BusinessCalendar, Decision, Drill, Step, Team

    rng = random.Random(DRILL_SEED)
    print(f"drill history seed {DRILL_SEED}")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the agent speaks through Django's test client
    alice, tess = make_user("alice"), make_user("tess", role="tpm")
    fleet = Fleet(api_agent("refund-agent"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox", "failover"])
    calendar = BusinessCalendar.objects.create(name="Paris office", time_zone="Europe/Paris", weekdays=[0, 1, 2, 3, 4])
    team = Team.objects.create(name="Refunds desk", slug="refunds-desk", calendar=calendar)
    weekly = Drill.objects.create(
        agent=fleet.api.agent,
        name="Tuesday: refund agent dies after the refund",
        kind="refund",
        fault=Drill.Fault.CRASH_AFTER_STEP,
        at_seq=3,
        runs=2,
        team=team,
        repeat_weekday=1,
        repeat_at=time(10),
        created_by=tess,
    )
    weekly.schedule(by=tess)
    Drill.objects.create(
        agent=fleet.api.agent,
        name="Fail over to the standby",
        kind="refund",
        fault=Drill.Fault.FAILOVER,
        at_seq=2,
        runs=3,
        announced=False,
        created_by=tess,
    )
    latest = 0
    for week, (claim, decide) in enumerate([(9, 24), (6, 15), (3, 8)]):
        occurrence = weekly.start_occurrence(by=tess)
        assert occurrence is not None
        started = timezone.now() - timedelta(days=7 * (2 - week), minutes=90)
        for n in range(2):
            ext = f"T-{2100 + 10 * week + n}"
            wf = fleet.start(ext)
            fleet.api.client.put(
                f"/api/v1/workflows/{wf}/drill-journal",
                content_type="application/json",
                data=json.dumps({"committed": [f"{ext}:refund"], "promises": ["refund within 5 days"]}),
            )
            checkpoint = fleet.pause(wf)
            fleet.decide(checkpoint)
            fleet.complete(wf)
            # The checkpoint's own clock stamps (what the report reads first), as a desk would take them.
            opened = Checkpoint.objects.get(pk=checkpoint.pk).opened_at
            Checkpoint.objects.filter(pk=checkpoint.pk).update(
                first_claimed_at=opened + timedelta(minutes=claim * rng.uniform(0.8, 1.2)),
                first_decision_at=opened + timedelta(minutes=decide * rng.uniform(0.8, 1.2)),
            )
            Step.objects.filter(workflow_id=wf, seq=3).update(
                updated_at=opened - timedelta(minutes=rng.uniform(4, 6))
            )  # the silence watchdog's wait
            Decision.objects.filter(checkpoint=checkpoint).update(
                decided_at=opened + timedelta(minutes=decide * rng.uniform(0.8, 1.2))
            )
            Workflow.objects.filter(pk=wf).update(finished_at=opened + timedelta(minutes=decide + 3))
        Drill.objects.filter(pk=occurrence.pk).update(started_at=started, occurrence_at=started)
        latest = occurrence.pk
    return latest


def drill_shots(browser: Browser, base: str) -> None:
    latest = seed_drills()
    tpm = browser.new_page(
        base_url=base,
        viewport={"width": 1440, "height": 900},
        device_scale_factor=1,
    )
    tpm.goto("/login/")
    tpm.fill("#id_username", "tess")
    tpm.fill("#id_password", PASSWORD)
    tpm.get_by_test_id("login-submit").click()
    tpm.goto("/drills/")
    tpm.check('input[name="when"][value="weekly"]')
    tpm.screenshot(path=str(OUT / "drills.png"), full_page=True)
    tpm.goto(f"/drills/{latest}/report/")
    tpm.screenshot(path=str(OUT / "drill-report.png"), full_page=True)


def main_drills() -> None:
    from playwright.sync_api import sync_playwright

    call_command("migrate", verbosity=0)
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        drill_shots(browser, f"http://127.0.0.1:{server.port}")
        browser.close()
    print(f"wrote drills and drill-report .png in {OUT}")


def seed_replay() -> tuple[Workflow, Checkpoint, ReplayRun]:
    """A recorded refund the demo runtime replays with its provider changed: drift at step 5."""
    from tests.replaytools import ReplayRuntime
    from workflows import tasks
    from workflows.models import Agent

    runtime = ReplayRuntime(Path(tempfile.mkdtemp(prefix="rc-replay-")), capabilities=("replay", "fork"))
    Agent.objects.filter(pk=runtime.record.pk).update(fork_edits=["effect"])  # as the demo runtime advertises
    standby, _ = Agent.register("support-bot-standby", resume_url=runtime.server.url("/agents/standby/resume"))
    Agent.objects.filter(pk=standby.pk).update(
        capabilities=["failover"], kinds=["refund"], runtime_version="demo-agent/1.1"
    )
    workflow = runtime.recorded_workflow("T-4242", owner=make_user("olivia"))
    checkpoint = Checkpoint.open_for(
        workflow,
        reason="provider_change",
        at_seq=7,
        detail="refund 100x the ticket amount: provider changed behaviour?",
    )
    runtime.provider.changed = True
    alice = make_user("alice")
    clean = ReplayRun.request(workflow, from_seq=1, to_seq=4, by=make_user("bob"))
    runtime.provider.changed = False
    tasks.run_replay(clean.pk)
    runtime.provider.changed = True
    run = ReplayRun.request(workflow, from_seq=3, to_seq=7, by=alice, checkpoint=checkpoint)
    tasks.run_replay(run.pk)
    return workflow, checkpoint, run


SHIPPING_REFUND = [
    {"name": "refund_shipping", "kind": "effect", "amount": "5.00", "currency": "EUR", "moves_money": True},
    {"name": "notify_customer", "kind": "effect", "moves_money": False},
]


def seed_incident() -> Incident:
    """Seven refunds of one agent stopped by a payments outage: an incident with money committed and planned,
    one refund whose outcome is unknown, the agent on hold, a note, and a rollout whose canary went out."""
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.get(username="alice")
    agent, _ = make_agent("refund-agent", owner=alice)
    for i in range(7):
        workflow = make_worked_example(agent=agent, refund_status="pending" if i == 0 else "committed")
        make_checkpoint(
            workflow,
            reason="tool_error",
            plan=SHIPPING_REFUND,
            detail=f"payments API answered 502 Bad Gateway for ticket T-{5200 + i} (req {7310 + i * 13})",
        )
    incident = Incident.objects.get(agent=agent)
    incident.take_command(alice, by=alice)
    incident.hold(by=alice, note="payments provider outage: no new refunds until it is back")
    incident.add_note("Payments status page confirms the outage; back since 14:05.", by=alice)
    rollout = Rollout.start(
        incident,
        action="resume",
        by=alice,
        canary_percent=20,
        money_total={c: str(a) for c, a in Rollout.stake_of(incident, "resume").totals.items()},
    )
    rollout.advance()
    return incident


def shoot_incident(browser: Browser, base: str, incident: Incident) -> None:
    page = browser.new_page(base_url=base, viewport={"width": 1440, "height": 900}, device_scale_factor=1)
    page.goto("/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.get_by_test_id("login-submit").click()
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
    phone = browser.new_page(
        base_url=base,
        viewport={"width": 390, "height": 844},
        device_scale_factor=1,
        is_mobile=True,
        has_touch=True,
    )
    phone.goto("/login/")
    phone.fill("#id_username", "alice")
    phone.fill("#id_password", PASSWORD)
    phone.get_by_test_id("login-submit").click()
    phone.goto("/notifications/")
    phone.get_by_test_id("push-devices").screenshot(path=str(OUT / "push.png"))


def main() -> None:
    from playwright.sync_api import sync_playwright

    if sys.argv[1:] == ["--only", "incident"]:
        call_command("migrate", verbosity=0)
        make_user("alice")
        incident = seed_incident()
        server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            shoot_incident(browser, f"http://127.0.0.1:{server.port}", incident)
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
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    base = f"http://127.0.0.1:{server.port}"
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
        page = browser.new_page(base_url=base, viewport={"width": 1440, "height": 900}, device_scale_factor=1)
        page.goto("/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.get_by_test_id("login-submit").click()
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
        phone = browser.new_page(
            base_url=base, viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True, has_touch=True
        )
        phone.goto("/login/")
        phone.fill("#id_username", "alice")
        phone.fill("#id_password", PASSWORD)
        phone.get_by_test_id("login-submit").click()
        phone.goto(f"/checkpoints/{checkpoint.pk}/")
        phone.screenshot(path=str(OUT / "phone.png"))
        push_screenshot(browser, base, checkpoint)
        tpm = browser.new_page(base_url=base, viewport={"width": 1440, "height": 900}, device_scale_factor=1)
        tpm.goto("/login/")
        tpm.fill("#id_username", "tess")
        tpm.fill("#id_password", PASSWORD)
        tpm.get_by_test_id("login-submit").click()
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
        page.goto("/")
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
