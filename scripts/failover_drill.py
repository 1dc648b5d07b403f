"""The article's test, run for an operator to watch: "can it disappear for ten minutes, fail over, and come
back with its state intact?" (demo/failover_drill.py has the stages).

Runs on its own throwaway SQLite database, with an in-process console and two demo agent runtimes on free
ports, so it needs nothing running and touches no real data. Every call between them is real HTTP; the
ten minutes are the silence sweep's clock, not a wait. Exits 1 when a check fails.

    make failover-drill                       # the operator's part played by the script
    make failover-drill DRILL_ARGS=--interactive   # fail it over yourself in the browser
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workflows.models.base import Operator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):  # a scratch database, never the configured one
    os.environ.pop(name, None)
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DEBUG": "1",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "VAR_DIR": tempfile.mkdtemp(prefix="rc-failover-"),
        "DJANGO_ALLOW_ASYNC_UNSAFE": "true",
        "LOG_LEVEL": "WARNING",
    }
)

import django  # noqa: E402

django.setup()

from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test.testcases import LiveServerThread  # noqa: E402
from recovery_client import ApiError  # noqa: E402

from demo.failover_drill import FailoverDrill  # noqa: E402
from tests.helpers import make_user  # noqa: E402
from workflows.models import Decision, Event  # noqa: E402

failures: list[str] = []


def stage(number: int, title: str) -> None:
    print(f"\n{number}. {title}")


def note(text: str) -> None:
    print(f"   {text}")


def check(ok: bool, what: str) -> None:
    print(f"   {'✓' if ok else '✗ FAILED:'} {what}")
    if not ok:
        failures.append(what)


def wait_for_decision(drill: FailoverDrill, base: str, password: str) -> Decision:
    checkpoint = drill.checkpoint()
    note(f"Sign in at {base}/login/ as alice / {password} and open {base}/checkpoints/{checkpoint.pk}/ :")
    ledgers = drill.fleets["standby"].server.url(f"/ledgers?q={drill.key('note')}")
    note(f"claim it, look the unknown note up in the demo ledgers ({ledgers}), confirm it with its")
    note("reference, then choose 'Fail over' to support-bot-standby. Waiting for your decision (Ctrl-C gives up)...")
    while True:
        decision = checkpoint.decisions.active().first()
        if decision is not None:
            if decision.action != "failover":
                raise SystemExit(f"You decided {decision.action}; this drill needs a failover. Run it again.")
            return decision
        time.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--interactive", action="store_true", help="stop before the failover and let you make it on the workbench"
    )
    parser.add_argument("--port", type=int, default=0, help="the console's port (default: a free one)")
    args = parser.parse_args()
    # The 409s and the agents' own "standing down" lines are the point, printed below as the stages go.
    for logger in ("django.request", "workflows.demo", "kombu"):
        logging.getLogger(logger).setLevel(logging.ERROR)
    call_command("migrate", verbosity=0)
    password = "drill-" + secrets.token_urlsafe(9)
    alice = make_user("alice", password=password)
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=args.port)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    base = f"http://127.0.0.1:{server.port}"
    workdir = Path(os.environ["VAR_DIR"])
    print(f"Console {base}; demo ledgers and journals in {workdir}")
    drill = FailoverDrill(base, workdir, owner=make_user("olivia"))
    try:
        drill.start()
        run(drill, alice, base, password, interactive=args.interactive)
    finally:
        drill.close()
        server.terminate()
    print(
        "\n"
        + (
            "All checks passed: it disappeared for ten minutes, failed over and came back with its state intact."
            if not failures
            else f"{len(failures)} check(s) failed: " + "; ".join(failures)
        )
    )
    return 1 if failures else 0


def run(drill: FailoverDrill, alice: Operator, base: str, password: str, *, interactive: bool) -> None:
    stage(1, "support-bot runs the refund for a ticket, and its process dies mid-workflow")
    workflow = drill.disappear()
    for step in workflow.steps.order_by("seq"):
        note(f"step {step.seq} {step.name:<18} {step.status:<9} {step.external_ref or ''}")
    check(
        drill.executed() == {"refund": 1, "note": 1, "message": 0},
        f"the ledgers: refund and note executed, no message yet ({drill.executed()})",
    )
    note("The note was written in the ticket system, but support-bot died before reporting it: the console")
    note("holds it as pending. support-bot's resume endpoint is gone with its process.")

    stage(2, "Ten minutes of silence (the sweep's clock moved on; support-bot's silence limit is 5 minutes)")
    check(drill.sweep_after(minutes=4) == 0, "after 4 minutes the sweep leaves it running")
    check(drill.sweep_after(minutes=10) == 1, "after 10 minutes the sweep pauses it at a checkpoint")
    checkpoint = drill.checkpoint()
    state = checkpoint.resume_state
    note(f"checkpoint {checkpoint.pk}: {checkpoint.detail}")
    committed = ", ".join(f"{s['name']} {s['external_ref']}" for s in state["committed"])
    note(f"committed: {committed}")
    note(f"promises:  {', '.join(state['promises'])}")
    note(f"unknown:   {', '.join(e['idempotency_key'] for e in state['unknown_effects'])}")
    check(
        [e["idempotency_key"] for e in state["unknown_effects"]] == [drill.key("note")],
        "the note is an unknown effect an operator must confirm",
    )

    stage(3, "An operator confirms the note from the ledgers and fails over to support-bot-standby")
    decision = wait_for_decision(drill, base, password) if interactive else drill.fail_over(alice)
    note(
        f"decision {decision.pk}: {decision.action} to {decision.standby.name if decision.standby else '?'}"
        f" by {decision.decided_by.get_username()}: {decision.instructions[:80]}"
    )
    check(drill.deliver(decision) == "delivered", "the decision reached the standby's resume endpoint")
    workflow.refresh_from_db()
    check(
        workflow.status == "completed" and workflow.agent.name == "support-bot-standby",
        f"support-bot-standby completed it ({workflow.status}, agent {workflow.agent.name})",
    )
    check(
        drill.executed() == {"refund": 1, "note": 1, "message": 1} and not drill.ledgers.duplicates(),
        f"each effect executed once: {drill.executed()}, no key twice",
    )
    check(
        drill.stand_down(decision) == "failed",
        "the stand-down notice cannot reach support-bot yet (it will be retried)",
    )

    stage(4, "support-bot comes back")
    drill.come_back()
    check(
        drill.journal_status() == "stood_down",
        "its restarted runtime asks about the run it left and is told to stand down (409 stood_down)",
    )
    check(drill.stand_down(decision) == "sent", "the retried stand-down notice reaches it")
    check(
        drill.frozen_run_carries_on() == "stood_down",
        "the run its frozen process held tries to write the note again: refused, it stops",
    )
    try:
        assert drill.frozen is not None
        drill.frozen.client.get_workflow(str(workflow.pk))
        check(False, "the console still answers support-bot about the workflow")
    except ApiError as exc:
        note(f"what support-bot is told: {exc.status} {exc.code}: {exc.message}")
    check(
        drill.executed() == {"refund": 1, "note": 1, "message": 1} and not drill.ledgers.duplicates(),
        f"still each effect once: {drill.executed()}",
    )

    stage(5, "The state, end to end")
    for step in workflow.steps.order_by("seq"):
        note(
            f"step {step.seq} {step.name:<18} {step.status:<9} {step.idempotency_key or '':<18} "
            f"{step.external_ref or ''}"
        )
    refund = workflow.steps.get(idempotency_key=drill.key("refund"))
    check(refund.external_ref == state["committed"][0]["external_ref"], "the refund is the one committed before")
    check(
        workflow.steps.get(idempotency_key=drill.key("note")).external_ref == drill.ledgers.lookup(drill.key("note")),
        "the note carries the reference the ticket system gave the first time",
    )
    check(
        bool(workflow.steps.filter(name="notify_customer", promise__contains=state["promises"][0]).exists()),
        f"the promise '{state['promises'][0]}' was told to the customer",
    )
    verbs = dict.fromkeys(Event.objects.filter(workflow=workflow).values_list("verb", flat=True))
    note(f"event log: {', '.join(verbs)}")
    report = drill.report()
    note(f"drill report ({base}/drills/{report.drill.pk}/report/): {report.verdict}")
    for reason in report.reasons:
        note(f"  {reason}")
    check(
        workflow.drill_id == report.drill.pk and report.verdict == "passed",
        f"the drill definition's report reads passed ({report.verdict})",
    )
    if interactive:
        input(f"\n   The workflow page: {base}/workflows/{workflow.pk}/ -- press Enter to stop the console. ")


if __name__ == "__main__":
    sys.exit(main())
