"""The realistic data scripts/screenshots.py photographs: the queue's checkpoints, a replay, an incident with
its rollout, drills, teams and four weeks of breaches. Imported once Django is set up (screenshots.py does it).
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_step, make_user, make_worked_example
from workflows.models import Checkpoint, Comment, Decider, Incident, ReplayRun, Rollout, Workflow

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
    # The last three Tuesdays at 10:00 in the team's time zone, as the drill's schedule says.
    local = timezone.now().astimezone(ZoneInfo(calendar.time_zone))
    tuesday = (local - timedelta(days=(local.weekday() - 1) % 7)).replace(hour=10, minute=0, second=0, microsecond=0)
    if tuesday > local:
        tuesday -= timedelta(days=7)
    for week, (claim, decide) in enumerate([(9, 24), (6, 15), (3, 8)]):
        occurrence = weekly.start_occurrence(by=tess)
        assert occurrence is not None
        started = tuesday - timedelta(days=7 * (2 - week))
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
    agent, _ = make_agent("payments-agent", owner=alice)
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
