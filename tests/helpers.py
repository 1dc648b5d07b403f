"""Plain ``make_*`` helpers: the worked example of DESIGN.md and its pieces."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from console.roles import set_role
from workflows.models import Agent, Checkpoint, EscalationLevel, Runbook, SLAPolicy, Step, Workflow
from workflows.shapes import PlanStep

_counter = itertools.count(1)


def run_together(targets: list[Callable[[], object]], *, timeout: float | None = None) -> list[threading.Thread]:
    """Start each target on its own thread, then wait for all of them (each up to ``timeout`` seconds).

    Returns the threads, so that a caller with a timeout can say which one hung."""
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return threads


def squeezed(html: str) -> str:
    """The HTML with each run of whitespace as one space, as a browser renders it: a template may wrap a
    sentence over lines without a test that reads the page noticing."""
    return " ".join(html.split())


def make_user(username: str, *, role: str = "operator", password: str = "pw-" + "x" * 12):
    user, _ = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": role == "admin", "is_superuser": role == "admin"}
    )
    user.set_password(password)
    user.save()
    set_role(user, role)
    return user


def make_agent(name: str | None = None, **kwargs: Any) -> tuple[Agent, str]:
    return Agent.register(name or f"agent-{next(_counter)}", **kwargs)


def make_policy(*, target: int = 30, warning: int = 10, escalate_to: Any = None, **kwargs: Any) -> SLAPolicy:
    """A policy with a decision target; ``escalate_to`` adds a first level at the breach that reassigns."""
    policy = SLAPolicy.objects.create(
        name=kwargs.pop("name", f"policy-{next(_counter)}"),
        decision_target_minutes=target,
        decision_warning=warning,
        **kwargs,
    )
    if escalate_to is not None:
        EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, reassign=True, user=escalate_to)
    return policy


def make_runbook(
    *, sla_target_minutes: int = 30, sla_warning_minutes: int = 10, escalation_target: Any = None, **kwargs: Any
) -> Runbook:
    """A runbook; the SLA keywords build its policy (as the migration turned old runbook targets into policies)."""
    defaults = {
        "slug": f"runbook-{next(_counter)}",
        "title": "Refund runbook",
        "url": "https://runbooks.example/refunds",
        "body": "Check the payment ledger.",
    }
    if "policy" not in kwargs:
        kwargs["policy"] = make_policy(
            target=sla_target_minutes, warning=sla_warning_minutes, escalate_to=escalation_target
        )
    return Runbook.objects.create(**{**defaults, **kwargs})


def make_workflow(agent: Agent | None = None, **kwargs: Any) -> Workflow:
    agent = agent or make_agent()[0]
    n = next(_counter)
    defaults = {"external_id": f"T-{1000 + n}", "kind": "refund", "title": f"Refund for ticket T-{1000 + n}"}
    return Workflow.objects.create(agent=agent, **{**defaults, **kwargs})


def make_step(
    workflow: Workflow, seq: int, name: str, kind: str = "tool", status: str = "committed", **kwargs: Any
) -> Step:
    if kind == "effect":
        kwargs.setdefault("idempotency_key", f"{workflow.external_id}:{name}")
    return Step.objects.create(workflow=workflow, seq=seq, name=name, kind=kind, status=status, **kwargs)


def make_worked_example(*, refund_status: str = "committed", owner=None, agent: Agent | None = None) -> Workflow:
    """The refund of DESIGN.md, interrupted between step 3 (refund) and step 4 (ticket note)."""
    workflow = make_workflow(agent, owner=owner)
    make_step(workflow, 1, "read_ticket", "tool", output={"ticket": "T-1042", "amount": "42.00"}, verified=True)
    make_step(
        workflow,
        2,
        "decide_refund",
        "model",
        output={"decision": "refund", "amount": "42.00"},
        promise="refund within 5 days",
    )
    make_step(
        workflow,
        3,
        "issue_refund",
        "effect",
        status=refund_status,
        input={"amount": "42.00", "currency": "EUR"},
        external_ref="R-88" if refund_status == "committed" else None,
    )
    return workflow


# What the worked example's agent reports it will do after the refund: no more money.
REMAINING_PLAN: list[PlanStep] = [
    {"name": "write_ticket_note", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
    {"name": "notify_customer", "kind": "effect", "amount": None, "currency": None, "moves_money": False},
]


def make_checkpoint(workflow: Workflow | None = None, *, reason: str = "model_timeout", **kwargs: Any) -> Checkpoint:
    """A checkpoint as a current agent opens it, with its plan (pass ``plan=None`` for one that sends none)."""
    workflow = workflow or make_worked_example()
    return Checkpoint.open_for(
        workflow,
        reason=reason,
        detail=kwargs.pop("detail", "model timed out"),
        at_seq=kwargs.pop("at_seq", 4),
        state=kwargs.pop("state", {"remaining": ["write_ticket_note", "notify_customer"]}),
        plan=kwargs.pop("plan", REMAINING_PLAN),
        **kwargs,
    )


# How long before now a checkpoint that is to breach in a test opens: its deadline (30 minutes on the fallback
# terms and the policies tests make) and what a test does after it (a sweep 20 minutes on, a decision 42 minutes
# on) all fall before now. A breach stamped in the future lands on tomorrow's date after about 23:10 UTC, past the
# end of the breach review's default period (today), and the test would fail at night only.
OVERDUE_BY = timedelta(hours=3)


def make_overdue_checkpoint(workflow: Workflow | None = None, **kwargs: Any) -> Checkpoint:
    """A checkpoint opened ``OVERDUE_BY`` ago, whose decision deadline has passed (its breach is not yet swept)."""
    checkpoint = make_checkpoint(workflow, now=timezone.now() - OVERDUE_BY, **kwargs)
    assert checkpoint.due_at + timedelta(hours=1) < timezone.now(), "a policy too long for OVERDUE_BY"
    return checkpoint


def before_migration(executor: Any, suffix: str) -> list[tuple[str, str]]:
    """The migration targets just before the workflows migration whose name ends with ``suffix``: found by name,
    not number, since migrations are renumbered when branches land together."""
    name = next(n for app, n in executor.loader.disk_migrations if app == "workflows" and n.endswith(suffix))
    return [d for d in executor.loader.get_migration("workflows", name).dependencies if d[0] == "workflows"]
