"""In Chromium at 390 × 844: every page of the URLconf, for every role, fits the window without a
horizontal scroll (issue 28, item 11).

The pages come from the URLconf (tests/phone_walk.py, the walk tests/test_access_rules.py makes),
never from a hand list, and are opened with the data they show in use: a claimed checkpoint with
an unknown refund and a comment, a replayed workflow with a drift, a runbook with two versions, a
history behind the TPM pages, a breach with its reason, notifications, and an object of every
model the admin lists. One browser, one context per role (operator, TPM, admin), the data made once.
A table may scroll inside its own box (``overflow-x: auto``): that does not widen the page. No word of a
table or of shown JSON is broken mid-word to make it fit (the replay's JSON was: "ticke t").
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.roles import ADMIN, OPERATOR, TPM
from tests.browser_fixtures import login
from tests.helpers import make_checkpoint, make_runbook, make_worked_example
from tests.phone_walk import BROKEN_WORDS, CULPRITS, pages
from tests.recovery_histories import build_history
from tests.replaytools import ReplayRuntime
from workflows import tasks
from workflows.models import (
    BreachReason,
    BusinessCalendar,
    Channel,
    Checkpoint,
    Comment,
    DriftIgnoreRule,
    Drill,
    Incident,
    Notification,
    OperatorProfile,
    ReplayRun,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
WIDTH = "() => document.documentElement.scrollWidth"


def _every_kind_of_page(runtime, alice, bob, tess, adam):
    build_history(operator=alice, other=bob, owner=adam)  # the resume dashboard, readiness, staffing
    workflow = runtime.recorded_workflow("T-4242", owner=alice)
    drifted = Checkpoint.open_for(
        workflow,
        reason="provider_change",
        at_seq=7,
        detail="refund 100x the ticket amount: provider changed behaviour?",
    )
    runtime.provider.changed = True
    replay = ReplayRun.request(workflow, from_seq=3, to_seq=7, by=alice, checkpoint=drifted)
    tasks.run_replay(replay.pk)
    runbook = make_runbook(
        slug="refunds",
        title="Refunds interrupted mid-way",
        workflow_kind="refund",
        requires_four_eyes=True,
        body="1. Look the refund up in the payment ledger.\n2. Never issue it a second time.",
    )
    runbook.snapshot(by=adam)
    runbook.title = "Refunds interrupted between the refund and the ticket note"
    runbook.save()
    runbook.snapshot(by=adam)
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending", owner=alice))
    checkpoint.claim(by=alice)
    Comment.post(checkpoint=checkpoint, author=bob, body="Payments says **R-88** settled. @alice the note can say it.")
    breached = make_checkpoint(reason="tool_error")
    now = timezone.now()
    Checkpoint.objects.filter(pk=breached.pk).update(
        opened_at=now - timedelta(hours=2), due_at=now - timedelta(hours=1), breached_at=now - timedelta(hours=1)
    )
    reason = BreachReason.objects.create(name="Understaffed shift")
    Checkpoint.objects.get(pk=breached.pk).explain_breach(reason=reason, note="Two operators out sick", by=tess)
    calendar = BusinessCalendar.objects.create(name="Office hours")
    OperatorProfile.objects.create(user=alice, calendar=calendar)
    Channel.objects.create(kind="email", user=alice)
    DriftIgnoreRule.objects.create(path="output.*_at", note="timestamps differ on every run")
    Notification.send(
        kind=Notification.Kind.SLA_BREACHED,
        title="Decision target breached: Refund for T-1042",
        checkpoint=breached,
        users=[alice, tess, adam],
        key="phone-walk",
    )
    incident = Incident.open_from([checkpoint, breached], by=alice, title="Refunds stopped at the model step")
    drilled = workflow.agent
    drilled.advertise(["replay", "drill"])
    drill = Drill(
        agent=drilled, name="crash after the ticket is read", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=1, runs=2
    )
    drill.full_clean()
    drill.save()
    from workflows.models.evidence import Evidence

    evidence = Evidence.submit(incident, text="ref-does-not-match-anything, PSP-1\n", by=alice)
    return {
        "checkpoint": checkpoint,
        "workflow": workflow,
        "replay": replay,
        "runbook": runbook,
        "incident": incident,
        "drill": drill,
        "evidence": evidence,
    }


@pytest.fixture
def replaying(db, tmp_path):
    runtime = ReplayRuntime(tmp_path, name="replay-bot")  # build_history's agent is the support-bot
    yield runtime
    runtime.close()


def test_every_page_fits_a_390_px_phone_for_every_role(browser, live_server, replaying, alice, bob, tess, adam):
    objects = _every_kind_of_page(replaying, alice, bob, tess, adam)
    wrong, missing, measured = [], [], 0
    for role, user in ((OPERATOR, alice), (TPM, tess), (ADMIN, adam)):
        context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, has_touch=True)
        try:
            page = context.new_page()
            login(page, user)
            for path, name in pages(role, objects):
                answer = page.request.get(path)  # the session's cookie: what this role gets, without a render
                if answer.status == 405 or "text/html" not in answer.headers.get("content-type", ""):
                    continue  # an action (POST only), a CSV, a script: not a page
                if answer.status == 404:
                    missing.append(f"{path} ({name}) as {role}: 404; give tests/phone_walk.FILL its object")
                    continue
                page.goto(path)
                measured += 1
                width = page.evaluate(WIDTH)
                if width > PHONE["width"]:
                    wrong.append(f"{path} ({name}) as {role}: {width} px; {', '.join(page.evaluate(CULPRITS))}")
                if broken := page.evaluate(BROKEN_WORDS, "main .grid td, main pre"):  # JSON or a table, mid-word
                    wrong.append(f"{path} ({name}) as {role}: words broken mid-word: {broken[:5]}")
        finally:
            context.close()
    assert not missing, "\n".join(missing)
    assert not wrong, "\n".join(wrong)
    assert measured > 100, measured  # the console's pages for three roles and the admin's for one
