"""python manage.py create_agent NAME [--resume-url URL] [--owner USERNAME]."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.helpers import make_agent, make_user
from workflows.models import Agent


def create_agent(*args: str) -> str:
    out = StringIO()
    call_command("create_agent", *args, stdout=out)
    return out.getvalue()


def printed(output: str, label: str) -> str:
    return re.search(rf"^\s*{label}:\s+(\S+)$", output, re.MULTILINE).group(1)


def test_it_registers_the_agent_and_prints_a_working_token_once(db):
    output = create_agent("support-bot")
    agent = Agent.objects.get(name="support-bot")
    token = printed(output, "token")
    assert Agent.authenticate(token) == agent
    assert token not in agent.token_hash  # only the hash is stored
    assert agent.resume_url == "" and agent.owner is None


def test_it_prints_the_signing_secret_the_agent_verifies_deliveries_with(db):
    output = create_agent("support-bot", "--resume-url", "https://agent.example/resume")
    agent = Agent.objects.get(name="support-bot")
    assert printed(output, "signing secret") == agent.signing_secret
    assert agent.resume_url == "https://agent.example/resume"


def test_it_sets_the_default_owner(db):
    olivia = make_user("olivia")
    create_agent("support-bot", "--owner", "olivia")
    assert Agent.objects.get(name="support-bot").owner == olivia


def test_an_existing_name_is_a_clear_error_and_keeps_the_old_token(db):
    agent, token = make_agent("support-bot")
    with pytest.raises(CommandError, match="already exists"):
        create_agent("support-bot")
    assert Agent.authenticate(token) == agent
    assert Agent.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["support bot"], "not a valid name"),
        (["x" * 65], "longer than 64"),
        (["support-bot", "--owner", "nobody"], "No user"),
        (["support-bot", "--resume-url", "not a url"], "not an http"),
        (["support-bot", "--resume-url", "ftp://agent.example/resume"], "not an http"),
    ],
)
def test_bad_arguments_are_clear_errors_and_create_nothing(db, args, message):
    with pytest.raises(CommandError, match=message):
        create_agent(*args)
    assert not Agent.objects.exists()
