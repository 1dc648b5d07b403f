"""An agent names owners only among the people who may act, and learns nothing about the rest.

Finding 2 of issue 12: an agent could hand a workflow to any user, superuser
included, and ``unknown_owner`` told it which usernames exist.
"""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.apitools import api_agent, assert_error
from tests.helpers import make_user
from workflows.models import Agent, Workflow


def _start(bot, owner: str):
    return bot.post("/workflows", {"external_id": f"T-{owner}", "kind": "refund", "title": "t", "owner": owner})


def test_operators_and_admins_may_be_named_owners(db):
    make_user("olga", role="operator")
    make_user("ada", role="admin")
    bot = api_agent()
    for name in ("olga", "ada"):
        assert _start(bot, name).status_code == 201
    assert sorted(Workflow.objects.values_list("owner__username", flat=True)) == ["ada", "olga"]


def test_an_unknown_and_an_ineligible_owner_get_the_same_answer(db, django_user_model):
    make_user("tess", role="tpm")
    django_user_model.objects.create_superuser("root", password="pw-" + "x" * 12)
    gone = make_user("gone", role="operator")
    gone.is_active = False
    gone.save()
    bot = api_agent()

    answers = {name: _start(bot, name) for name in ("nobody", "tess", "root", "gone")}

    bodies = {name: assert_error(response, 422, "unknown_owner", "owner") for name, response in answers.items()}
    assert len({repr(body) for body in bodies.values()}) == 1, bodies
    assert not Workflow.objects.exists()


def test_create_agent_refuses_an_owner_who_may_not_act(db):
    make_user("tess", role="tpm")
    with pytest.raises(CommandError, match="only active operators and admins"):
        call_command("create_agent", "tpm-owned", "--owner", "tess")
    assert not Agent.objects.filter(name="tpm-owned").exists()


def test_the_admin_offers_only_owners_who_may_act(client, db):
    make_user("tess", role="tpm")
    olga = make_user("olga", role="operator")
    client.force_login(make_user("root", role="admin"))
    form = client.get(reverse("admin:workflows_agent_add")).context["adminform"].form
    assert olga in form.fields["owner"].queryset
    assert not form.fields["owner"].queryset.filter(username="tess").exists()
