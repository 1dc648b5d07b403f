"""Seed the demo: roles, users, runbooks and the demo agents. Idempotent: `make run` calls it every time.

Users get random passwords on first creation, kept in ``var/demo/users.json``
(dev only) and printed every run. Agent tokens and signing secrets go to
``var/demo/agents.json`` for the demo fleet; a token is stored only hashed in the
console, so when that file is lost (or no longer matches) the token is rotated.
Rows someone edited since (a runbook's text, a password) are left as they are.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from demo import history, slack_workspace
from demo.signin import USERS, sign_in_lines
from demo.store import demo_dir
from workflows.models import (
    Agent,
    Channel,
    Drill,
    EscalationLevel,
    Reason,
    Runbook,
    SlackLink,
    SlackWorkspace,
    SLAPolicy,
    hash_token,
)

ROLES = ("operator", "tpm", "admin")
# The polling agent second, so that `run_demo_fleet --agents 2` still exercises both delivery paths.
if TYPE_CHECKING:
    from workflows.models.base import Operator
    from workflows.shapes import JsonObject


class AgentEntry(TypedDict):
    """One demo agent as ``agents.json`` keeps it for the fleet (its token in the clear: dev only)."""

    name: str
    kind: str
    token: str | None
    signing_secret: str
    resume_url: str
    owner: str | None


AGENTS = (
    ("support-bot", "refund", True, "Support agent: refunds for tickets (the worked example)."),
    ("ticket-bot", "ticket_triage", False, "Triage agent without a resume endpoint: it polls for decisions."),
    ("billing-bot", "billing_dispute", True, "Billing agent: invoice disputes and credits."),
    ("support-bot-standby", "refund", True, "Standby support agent: refunds fail over to it when support-bot is down."),
)
DEMO_DRILL = "support-bot's model provider throttles every call from the refund decision on"
DEMO_LEDGERS_URL = re.compile(r"http://127\.0\.0\.1:\d+/ledgers")
UNKNOWN_EFFECT_BODY = (
    "A call to an external system failed. If the resume state lists an unknown effect (say the refund "
    "T-1042:refund), the call timed out and nobody knows whether it happened: never resume on a guess. "
    "Open the ledgers (link above) and search for the effect's idempotency key. A row means it happened: "
    'confirm "happened" and note its reference; the agent records it and does not execute it again. No '
    'row means it did not: confirm "did not happen"; the agent executes it once, with the same key. '
    "If nothing is unknown, the tool simply failed: retry the step."
)


def runbooks(fleet_port: int) -> list[dict[str, Any]]:
    # Targets a support desk would set (money first): with minutes, every row of a demo queue was red
    # within a quarter of an hour and the colour told an operator nothing.
    ledgers = f"http://127.0.0.1:{fleet_port}/ledgers"
    return [
        {
            "slug": "default",
            "title": "Default: read the resume state, then decide",
            "is_default": True,
            "body": "Read what is committed, what is pending and what was promised to the customer. Resume when "
            "the next step is safe; hand off when a person must take over; abort only when nothing "
            "the customer was promised is left undone.",
            "sla_target_minutes": 60,
            "sla_warning_minutes": 15,
        },
        {
            "slug": "refund-model-timeout",
            "title": "Refund: the model timed out",
            "workflow_kind": "refund",
            "reason": Reason.MODEL_TIMEOUT,
            "body": "The model call died mid-refund. Check the committed effects: a committed refund has its R-… "
            "reference and is never issued again on resume. Resume: the agent writes the ticket note and "
            'notifies the customer once, and keeps the promise "refund within 5 days".',
            "sla_target_minutes": 30,
            "sla_warning_minutes": 10,
        },
        {
            "slug": "refund-unknown-refund",
            "title": "Refund: the refund's outcome is unknown",
            "workflow_kind": "refund",
            "reason": Reason.TOOL_ERROR,
            "url": ledgers,
            "body": UNKNOWN_EFFECT_BODY,
            "sla_target_minutes": 20,
            "sla_warning_minutes": 5,
        },
        {
            "slug": "billing-unknown-credit",
            "title": "Billing dispute: the credit's outcome is unknown",
            "workflow_kind": "billing_dispute",
            "reason": Reason.TOOL_ERROR,
            "url": ledgers,
            "body": UNKNOWN_EFFECT_BODY.replace("the refund T-1042:refund", "the credit INV-1042:credit"),
            "sla_target_minutes": 20,
            "sla_warning_minutes": 5,
        },
        {
            "slug": "billing-model-timeout-four-eyes",
            "title": "Billing dispute: the model timed out (four eyes)",
            "workflow_kind": "billing_dispute",
            "reason": Reason.MODEL_TIMEOUT,
            "requires_four_eyes": True,
            "body": "The model died while deciding a credit. A credit moves money: your decision is a proposal until a "
            "second operator approves it (four eyes). Check the invoice and the committed effects, propose, "
            "and ask a colleague to approve it from the Awaiting approval tab.",
            "sla_target_minutes": 45,
            "sla_warning_minutes": 15,
        },
        {
            "slug": "untrusted-output",
            "title": "A tool answered garbage",
            "reason": Reason.UNTRUSTED_OUTPUT,
            "body": "A tool answered something that does not parse (shown escaped in the trajectory). The agent "
            "did not act on it. Retry the step when the upstream looks healthy again; hand off if it "
            "keeps happening.",
            "sla_target_minutes": 45,
            "sla_warning_minutes": 15,
        },
    ]


def read_json(path: Path) -> JsonObject:
    try:
        data: JsonObject = json.loads(path.read_text())
        return data
    except (FileNotFoundError, ValueError):
        return {}


def write_private(path: Path, data: Mapping[str, object]) -> None:
    """Secrets: owner-only file, replaced atomically so the fleet never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


class Command(BaseCommand):
    help = "Create the demo roles, users, runbooks and agents (idempotent) and print the demo logins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="Port of the console (for the login URL).")
        parser.add_argument("--fleet-port", type=int, default=8765, help="Port of the demo fleet's resume server.")
        parser.add_argument(
            "--history-days",
            type=int,
            default=history.DAYS,
            help="Days of recorded history before today, once (0: none).",
        )

    def handle(self, *args: Any, port: int, fleet_port: int, history_days: int = history.DAYS, **options: Any) -> None:
        users_path, agents_path = demo_dir() / "users.json", demo_dir() / "agents.json"
        passwords = read_json(users_path)
        with transaction.atomic():
            users, new_passwords = self.seed_users(passwords)
            self.seed_runbooks(fleet_port, escalate_to=users["admin"], operators=Group.objects.get(name="operator"))
            agents, rotated = self.seed_agents(read_json(agents_path), fleet_port, owner=users["operator"])
            self.seed_drill(by=users["tpm"])
        # Before the channels exist: three weeks of notifications are history, not emails to send today.
        recorded = history.seed(
            operator=users["operator"],
            second=users["admin"],
            tpm=users["tpm"],
            days=history_days,
            agents=list(Agent.objects.filter(name__in=[name for name, *_ in AGENTS]).order_by("pk")),
        )
        with transaction.atomic():
            self.seed_channels(users)
            self.seed_slack(users)  # after the history too: its checkpoints are not posted to Slack
        if new_passwords:
            write_private(users_path, {**passwords, **new_passwords})
        write_private(agents_path, {"console": f"http://127.0.0.1:{port}", "agents": agents})
        self.report({**passwords, **new_passwords}, users, agents, rotated, port, users_path, agents_path)
        if recorded:
            self.stdout.write(
                f"Recorded {recorded} workflows of demo history over the last {history_days} days "
                "(the TPM pages' trends, breaches, readiness and staffing)."
            )

    def seed_users(self, passwords: JsonObject) -> tuple[dict[str, Operator], dict[str, str]]:
        User = get_user_model()
        groups = {role: Group.objects.get_or_create(name=role)[0] for role in ROLES}
        users: dict[str, Operator] = {}
        new: dict[str, str] = {}
        for username, role in USERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                # A password from the file is reused when the database was reset but the file kept.
                kept = passwords.get(username)
                password = kept if isinstance(kept, str) and kept else secrets.token_urlsafe(12)
                user = User.objects.create_user(username, password=password)
                new[username] = password
            if role == "admin" and not (user.is_staff and user.is_superuser):
                user.is_staff = user.is_superuser = True
                user.save(update_fields=["is_staff", "is_superuser"])
            user.groups.add(groups[role])
            users[username] = user
        return users, new

    def seed_policy(self, target: int, warning: int, *, escalate_to: Operator, operators: Group) -> SLAPolicy:
        """A demo policy: breach tells the admin at once; 5 minutes later the least-loaded operator gets it."""
        policy, created = SLAPolicy.objects.get_or_create(
            name=f"Demo: decide within {target} min",
            defaults={
                "decision_target_minutes": target,
                "decision_warning": warning,
                "watchers": operators,
                "claim_reminder_minutes": 10,
                "claim_release_minutes": 15,
            },
        )
        if created:
            EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, user=escalate_to)
            EscalationLevel.objects.create(
                policy=policy, delay_minutes=5, notify=True, reassign=True, group=operators, stop_once_claimed=True
            )
        return policy

    def seed_channels(self, users: dict[str, Operator]) -> None:
        """Every demo user gets email (written under var/mail/ by the default file backend)."""
        for user in users.values():
            if not user.email:
                user.email = f"{user.username}@demo.invalid"
                user.save(update_fields=["email"])
            Channel.objects.get_or_create(user=user, kind=Channel.Kind.EMAIL)

    def seed_slack(self, users: dict[str, Operator]) -> None:
        """The simulated Slack workspace the fleet serves at /slack (demo/slack_workspace.py), its users
        linked to the demo's operator, admin and TPM (one is left unlinked, to show the link flow)."""
        workspace = SlackWorkspace.objects.filter(team_id=slack_workspace.TEAM).first()
        if workspace is None:
            workspace = SlackWorkspace(
                team_id=slack_workspace.TEAM, name="Simulated workspace", default_channel=slack_workspace.CHANNEL
            )
            workspace.bot_token, workspace.signing_secret = slack_workspace.BOT_TOKEN, secrets.token_hex(16)
            workspace.save()
        for slack_user, username in slack_workspace.PEOPLE.items():
            if username in users:
                SlackLink.objects.get_or_create(
                    workspace=workspace,
                    slack_user_id=slack_user,
                    defaults={"user": users[username], "nonce": f"demo-{slack_user}"},
                )

    def seed_runbooks(self, fleet_port: int, *, escalate_to: Operator, operators: Group) -> None:
        for spec in runbooks(fleet_port):
            spec = dict(spec)
            if spec.get("is_default") and Runbook.objects.filter(is_default=True).exclude(slug=spec["slug"]).exists():
                spec["is_default"] = False  # an admin chose another default: keep theirs
            spec["policy"] = self.seed_policy(
                spec.pop("sla_target_minutes"),
                spec.pop("sla_warning_minutes"),
                escalate_to=escalate_to,
                operators=operators,
            )
            # The admin keeps them; they are due for review in six months (then flagged stale and admin told).
            spec.update(owner=escalate_to, review_by=timezone.localdate() + timedelta(days=182))
            runbook, created = Runbook.objects.get_or_create(slug=spec.pop("slug"), defaults=spec)
            # The fleet's port may change between runs; a hand-edited URL is left alone.
            if (
                not created
                and spec.get("url")
                and DEMO_LEDGERS_URL.fullmatch(runbook.url)
                and runbook.url != spec["url"]
            ):
                runbook.url = spec["url"]
                runbook.save(update_fields=["url"])

    def seed_drill(self, *, by: Operator) -> None:
        """One drill definition on the demo fleet, to start from the Drills page (the fleet carries it out)."""
        Drill.objects.get_or_create(
            name=DEMO_DRILL,
            series=None,
            defaults={
                "agent": Agent.objects.get(name="support-bot"),
                "kind": "refund",
                "fault": Drill.Fault.RATE_LIMIT_STORM,
                "at_seq": 2,
                "runs": 3,
                "announced": True,
                "created_by": by,
            },
        )

    def seed_agents(self, saved: JsonObject, fleet_port: int, *, owner: Operator) -> tuple[list[AgentEntry], list[str]]:
        listed = saved.get("agents")
        known = {e.get("name"): e for e in listed if isinstance(e, dict)} if isinstance(listed, list) else {}
        entries: list[AgentEntry] = []
        rotated: list[str] = []
        for name, kind, webhook, description in AGENTS:
            resume_url = f"http://127.0.0.1:{fleet_port}/agents/{name}/resume" if webhook else ""
            agent = Agent.objects.filter(name=name).first()
            kept = (known.get(name) or {}).get("token")
            token = kept if isinstance(kept, str) else None
            if agent is None:
                agent, token = Agent.register(name, resume_url=resume_url, owner=owner, description=description)
                Agent.objects.filter(pk=agent.pk).update(silence_seconds=300)
            else:
                if not token or hash_token(token) != agent.token_hash:
                    token = agent.set_new_token()  # the clear token is gone: the only way is a new one
                    rotated.append(name)
                agent.resume_url = resume_url
                agent.owner = agent.owner or owner
                agent.is_active = True
                agent.save()
            # The fleet's runtimes answer replays next to their resume endpoint (an admin's setting).
            replay_url = resume_url.removesuffix("/resume") + "/replay" if resume_url else ""
            Agent.objects.filter(pk=agent.pk).update(
                replay_url=replay_url,
                kinds=[kind],
                capabilities=["replay", "fork", "failover", "drill", "drill_sandbox"] if replay_url else [],
            )
            entries.append(
                {
                    "name": name,
                    "kind": kind,
                    "token": token,
                    "signing_secret": agent.signing_secret,
                    "resume_url": resume_url,
                    "owner": agent.owner.get_username() if agent.owner else None,
                }
            )
        return entries, rotated

    def report(
        self,
        passwords: JsonObject,
        users: dict[str, Operator],
        agents: list[AgentEntry],
        rotated: list[str],
        port: int,
        users_path: Path,
        agents_path: Path,
    ) -> None:
        try:
            login = reverse("login")
        except NoReverseMatch:
            login = "/"
        write = self.stdout.write
        for line in sign_in_lines(f"http://127.0.0.1:{port}{login}", passwords):
            write(line)
        write(f"Demo agents (tokens in {agents_path}" + (f"; rotated: {', '.join(rotated)}" if rotated else "") + "):")
        name_width = max(len(entry["name"]) for entry in agents) + 2  # the longest name still has a space after it
        kind_width = max(len(entry["kind"]) for entry in agents) + 2
        for entry in agents:
            how = f"resume URL {entry['resume_url']}" if entry["resume_url"] else "polls for decisions"
            write(f"  {entry['name']:<{name_width}}{entry['kind']:<{kind_width}}{how}")
