"""seed_demo is safe on every `make run`: it creates the demo once and always prints how to log in."""

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from demo.fleet import load_agents
from workflows.models import Agent, Drill, Runbook


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def seed(*args):
    out = StringIO()
    # The recorded history has tests of its own (test_seed_demo_history.py): these are about the rest.
    call_command("seed_demo", "--history-days", "0", *args, stdout=out)
    return out.getvalue()


def test_seeding_twice_creates_everything_once_and_prints_the_same_passwords(db, var_dir):
    first, second = seed(), seed()

    passwords = json.loads((var_dir / "demo" / "users.json").read_text())
    assert set(passwords) == {"operator", "tpm", "admin"}
    for username, password in passwords.items():
        assert password in first and password in second
        assert get_user_model().objects.get(username=username).check_password(password)
    assert "http://127.0.0.1:8000/login/" in second
    assert get_user_model().objects.count() == 3
    assert sorted(Group.objects.values_list("name", flat=True)) == ["admin", "operator", "tpm"]
    assert Agent.objects.count() == 4 and Runbook.objects.count() == 6  # 3 agents and support-bot's standby
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser and admin.groups.filter(name="admin").exists()
    assert get_user_model().objects.get(username="tpm").groups.get().name == "tpm"


def test_agents_json_holds_working_tokens_secrets_and_resume_urls(db, var_dir):
    seed("--fleet-port", "9123")
    configs = {c.name: c for c in load_agents(var_dir / "demo" / "agents.json")}

    assert set(configs) == {"support-bot", "billing-bot", "ticket-bot", "support-bot-standby"}
    for name, config in configs.items():
        agent = Agent.objects.get(name=name)
        assert Agent.authenticate(config.token) == agent
        assert config.signing_secret == agent.signing_secret
        assert agent.owner.username == "operator" and config.owner == "operator"
        assert agent.resume_url == config.resume_url
    assert configs["support-bot"].resume_url == "http://127.0.0.1:9123/agents/support-bot/resume"
    assert configs["ticket-bot"].polls and not configs["support-bot"].polls
    assert configs["support-bot"].kind == "refund"
    standby = Agent.objects.get(name="support-bot-standby")
    assert standby.capabilities == ["replay", "fork", "failover", "drill", "drill_sandbox"]
    assert standby.kinds == ["refund"]
    assert standby.replay_url == "http://127.0.0.1:9123/agents/support-bot-standby/replay"
    assert (var_dir / "demo" / "agents.json").stat().st_mode & 0o077 == 0  # secrets: owner only


def test_tokens_are_kept_while_the_file_matches_and_rotated_when_it_is_lost(db, var_dir):
    seed()
    path = var_dir / "demo" / "agents.json"
    before = {c.name: c.token for c in load_agents(path)}
    seed()
    assert {c.name: c.token for c in load_agents(path)} == before

    path.unlink()
    out = seed()
    after = {c.name: c.token for c in load_agents(path)}
    assert "rotated: support-bot, ticket-bot, billing-bot, support-bot-standby" in out
    for name, token in after.items():
        assert token != before[name]
        assert Agent.authenticate(token).name == name
        assert Agent.authenticate(before[name]) is None


def test_the_runbooks_match_the_worked_example_and_escalate_to_admin(db, var_dir):
    seed("--fleet-port", "9123")

    unknown_refund = Runbook.match("refund", "tool_error")
    assert unknown_refund.url == "http://127.0.0.1:9123/ledgers"
    assert "did not happen" in unknown_refund.body
    assert Runbook.match("refund", "model_timeout").slug == "refund-model-timeout"
    assert Runbook.match("ticket_triage", "rate_limit").is_default
    # The runbooks' targets now live in SLA policies: the first escalation level tells admin at the breach.
    assert all(r.policy.levels.first().user.username == "admin" for r in Runbook.objects.all())
    # Realistic targets (issue 8: with 3-5 minutes nearly every demo row was red and colour meant nothing).
    assert all(20 <= r.policy.decision_target_minutes <= 60 for r in Runbook.objects.all())
    # Admin owns them, due for review in about six months: none is stale on a fresh demo.
    assert all(
        r.owner.username == "admin" and not r.is_stale and r.current_version.number == 1 for r in Runbook.objects.all()
    )


def test_an_admins_edits_survive_a_reseed_and_the_ledgers_link_follows_the_fleet_port(db, var_dir):
    seed()
    Runbook.objects.filter(slug="refund-model-timeout").update(body="Our own words.")
    seed("--fleet-port", "9200")
    assert Runbook.objects.get(slug="refund-model-timeout").body == "Our own words."
    assert Runbook.objects.get(slug="refund-unknown-refund").url == "http://127.0.0.1:9200/ledgers"
    assert Agent.objects.get(name="billing-bot").resume_url == "http://127.0.0.1:9200/agents/billing-bot/resume"


def test_the_agents_table_keeps_a_space_after_the_longest_name(db, var_dir):
    """Issue 28 item 15: the table printed `support-bot-standbyrefund`."""
    out = seed()

    rows = [line for line in out.splitlines() if "support-bot-standby" in line and "refund" in line]
    assert rows and all("support-bot-standby  refund" in line for line in rows), rows
    kinds = {line.split()[1] for line in out.splitlines() if line.startswith("  ") and "-bot" in line.split()[0]}
    assert kinds == {"refund", "ticket_triage", "billing_dispute"}


def test_the_demo_seeds_one_drill_on_the_fleet_that_may_start(db, var_dir):
    seed()
    seed()  # idempotent: still one
    [drill] = Drill.objects.all()
    assert drill.agent.name == "support-bot" and drill.fault == Drill.Fault.RATE_LIMIT_STORM and drill.runs == 3
    assert drill.status == Drill.Status.DRAFT and drill.cannot_run() == ""  # the fleet advertises drills
    assert drill.start()
