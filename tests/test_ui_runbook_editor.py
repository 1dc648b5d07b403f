"""Admins list, create and edit runbooks in the console; the checks a careful admin expects, with
friendly messages, hold there and in the Django admin; operators and TPMs cannot edit."""

import datetime

import pytest
from django.urls import reverse

from tests.helpers import make_agent, make_policy, make_runbook
from workflows.models import Action, Event, Runbook


def form_data(**changes):
    data = {
        "title": "Refund: the model timed out",
        "url": "https://runbooks.example/refunds",
        "body": "Check the **ledger**.",
        "workflow_kind": "refund",
        "reason": "model_timeout",
        "priority": "0",
        "allowed_actions": [Action.RESUME, Action.HANDOFF],
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_an_admin_creates_a_runbook_with_every_field_and_it_is_version_1(client, adam):
    agent, _ = make_agent("refund-bot")
    policy = make_policy(name="Refunds", target=20, warning=5)
    client.force_login(adam)
    assert client.get(reverse("runbook_new")).status_code == 200
    answer = client.post(
        reverse("runbook_new"),
        form_data(
            agent=agent.pk,
            priority="3",
            policy=policy.pk,
            owner=adam.pk,
            review_by="2027-03-01",
            requires_four_eyes="on",
            allowed_actions=[Action.ABORT, Action.RESUME],
        ),
    )
    runbook = Runbook.objects.get()
    assert answer.status_code == 302 and answer["Location"] == reverse("runbook", args=[runbook.pk])
    assert (runbook.slug, runbook.agent, runbook.priority, runbook.policy, runbook.owner, runbook.review_by) == (
        "refund-the-model-timed-out",
        agent,
        3,
        policy,
        adam,
        datetime.date(2027, 3, 1),
    )
    assert runbook.allowed_actions == [Action.RESUME, Action.ABORT]  # in the actions' own order
    assert runbook.requires_four_eyes and not runbook.four_eyes_on_every_resume
    assert runbook.current_version.number == 1 and runbook.current_version.created_by == adam
    event = Event.objects.get(verb=Event.Verb.ADMIN_CREATED)
    assert event.actor_user == adam and event.data["version"] == 1
    page = client.get(reverse("runbooks")).content.decode()
    assert "Refund: the model timed out" in page and "kind refund, reason model timeout, agent refund-bot" in page


def test_the_editor_offers_the_real_decisions_as_checkboxes(client, adam):
    client.force_login(adam)
    page = client.get(reverse("runbook_new")).content.decode()
    for action in Action.values:
        assert f'type="checkbox" name="allowed_actions" value="{action}"' in page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"allowed_actions": None}, "allowed_actions", "Choose at least one decision operators may take."),
        ({"allowed_actions": ["launch_missiles"]}, "allowed_actions", "Select a valid choice."),
        ({"url": "", "body": " "}, "body", "Give operators something to read: a link, a body, or both."),
        ({"url": "javascript:alert(1)"}, "url", "Enter a valid URL."),
        ({"title": ""}, "title", "This field is required."),
        ({"is_default": "on"}, "is_default", "The default applies when nothing else matches"),
        ({"review_by": "next tuesday"}, "review_by", "Enter a valid date."),
    ],
)
def test_a_bad_runbook_is_refused_with_a_message_on_its_field_and_nothing_is_saved(
    client, adam, changes, field, message
):
    client.force_login(adam)
    answer = client.post(reverse("runbook_new"), form_data(**changes))
    assert answer.status_code == 422
    page = answer.content.decode()
    assert f'data-testid="error-{field}"' in page
    assert message in page
    assert not Runbook.objects.exists()
    assert "Check the **ledger**." in page or changes.get("body") == " "  # what was typed is kept


def test_two_runbooks_with_the_same_rules_and_priority_are_refused_as_a_tie(client, adam):
    make_runbook(title="Refund timeouts", workflow_kind="refund", reason="model_timeout")
    client.force_login(adam)
    answer = client.post(reverse("runbook_new"), form_data())
    assert answer.status_code == 422
    assert "“Refund timeouts” has the same match rules and priority" in answer.content.decode()
    assert client.post(reverse("runbook_new"), form_data(priority="1")).status_code == 302


def test_a_second_default_gets_a_friendly_message_in_the_console(client, adam):
    make_runbook(title="General recovery", is_default=True)
    client.force_login(adam)
    answer = client.post(reverse("runbook_new"), form_data(workflow_kind="", reason="", is_default="on"))
    page = answer.content.decode()
    assert answer.status_code == 422
    assert "“General recovery” is already the default runbook, and only one can be." in page
    assert "one_default_runbook" not in page
    assert Runbook.objects.count() == 1


def test_a_second_default_gets_a_friendly_message_in_the_django_admin(client, adam):
    make_runbook(title="General recovery", is_default=True)
    client.force_login(adam)
    data = form_data(
        slug="second",
        workflow_kind="",
        reason="",
        is_default="on",
        owner="",
        agent="",
        policy="",
        review_by="",
        **{"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"},
    )
    answer = client.post(reverse("admin:workflows_runbook_add"), data)
    page = answer.content.decode()
    assert answer.status_code == 200  # the form again, with the message
    assert "“General recovery” is already the default runbook, and only one can be." in page
    assert "one_default_runbook" not in page and "Constraint" not in page
    assert Runbook.objects.count() == 1


def test_the_django_admin_still_edits_a_runbook_and_writes_a_version(client, adam):
    runbook = make_runbook(title="Refunds", workflow_kind="refund")
    client.force_login(adam)
    assert client.get(reverse("admin:workflows_runbook_change", args=[runbook.pk])).status_code == 200
    data = form_data(
        title="Refunds, edited in the admin",
        workflow_kind="refund",
        reason="",
        owner="",
        agent="",
        policy=runbook.policy_id,
        review_by="",
        **{
            "versions-TOTAL_FORMS": "1",
            "versions-INITIAL_FORMS": "1",
            "versions-0-id": str(runbook.current_version.pk),
            "versions-0-runbook": str(runbook.pk),
        },
    )
    answer = client.post(reverse("admin:workflows_runbook_change", args=[runbook.pk]), data)
    assert answer.status_code == 302, answer.content.decode()[:3000]
    runbook.refresh_from_db()
    assert runbook.title == "Refunds, edited in the admin" and runbook.current_version.number == 2
    assert runbook.current_version.created_by == adam
    answer = client.post(
        reverse("admin:workflows_runbook_change", args=[runbook.pk]),
        {**data, "allowed_actions": [], "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"},
    )
    assert "Choose at least one decision operators may take." in answer.content.decode()


@pytest.mark.parametrize("name", ["runbooks", "runbook_new", "runbook_edit", "runbook_preview"])
def test_operators_and_tpms_cannot_open_the_runbook_editor(client, alice, tess, name):
    runbook = make_runbook()
    url = reverse(name, args=[runbook.pk] if name == "runbook_edit" else [])
    for user in (alice, tess):
        client.force_login(user)
        assert client.get(url).status_code == 403
        assert client.post(url, form_data()).status_code == 403
    runbook.refresh_from_db()
    assert runbook.title == "Refund runbook" and Runbook.objects.count() == 1


def test_admins_see_the_runbooks_link_in_the_navigation_and_operators_do_not(client, adam, alice):
    client.force_login(adam)
    assert 'data-testid="nav-runbooks"' in client.get(reverse("queue")).content.decode()
    client.force_login(alice)
    assert 'data-testid="nav-runbooks"' not in client.get(reverse("queue")).content.decode()


def test_the_slug_of_a_saved_runbook_cannot_be_changed_from_the_editor(client, adam):
    runbook = make_runbook(slug="refunds", workflow_kind="refund", reason="model_timeout")
    client.force_login(adam)
    client.post(
        reverse("runbook_edit", args=[runbook.pk]), form_data(slug="hijacked", policy=runbook.policy_id, based_on=1)
    )
    runbook.refresh_from_db()
    assert runbook.slug == "refunds" and runbook.title == "Refund: the model timed out"


def test_a_default_made_by_another_admin_between_the_check_and_the_save_still_gets_the_friendly_message(
    client, adam, monkeypatch
):
    make_runbook(title="General recovery", is_default=True)
    # The other admin's default commits after this form's checks ran: they see no default yet.
    monkeypatch.setattr(Runbook, "clean", lambda self: None)
    monkeypatch.setattr(Runbook, "validate_constraints", lambda self, exclude=None: None)
    client.force_login(adam)
    answer = client.post(reverse("runbook_new"), form_data(workflow_kind="", reason="", is_default="on"))
    assert answer.status_code == 422
    assert "Another runbook is already the default: only one runbook can be." in answer.content.decode()
    assert Runbook.objects.count() == 1 and not Event.objects.filter(verb=Event.Verb.ADMIN_CREATED).exists()


def _admin_default_form():
    return form_data(
        slug="second",
        workflow_kind="",
        reason="",
        is_default="on",
        owner="",
        agent="",
        policy="",
        review_by="",
        **{"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"},
    )


def test_in_the_django_admin_a_default_saved_by_another_admin_mid_save_gets_the_form_again_with_the_message(
    client, adam, monkeypatch
):
    make_runbook(title="General recovery", is_default=True)

    # The other admin's default commits after this form's first checks: they see no default, once.
    def once_blind(check):
        blind = [True]

        def checked(self, *args, **kwargs):
            if blind.pop() if blind else False:
                return None
            return check(self, *args, **kwargs)

        return checked

    monkeypatch.setattr(Runbook, "clean", once_blind(Runbook.clean))
    monkeypatch.setattr(Runbook, "validate_constraints", once_blind(Runbook.validate_constraints))
    client.force_login(adam)

    answer = client.post(reverse("admin:workflows_runbook_add"), _admin_default_form())

    page = answer.content.decode()
    assert answer.status_code == 200  # the form again, what was typed kept, the message beside it
    assert "is already the default" in page and 'value="second"' in page
    assert Runbook.objects.count() == 1


def test_in_the_django_admin_a_race_that_outlasts_the_second_check_is_a_message_not_a_500(client, adam, monkeypatch):
    make_runbook(title="General recovery", is_default=True)
    monkeypatch.setattr(Runbook, "clean", lambda self: None)
    monkeypatch.setattr(Runbook, "validate_constraints", lambda self, exclude=None: None)
    client.force_login(adam)

    answer = client.post(reverse("admin:workflows_runbook_add"), _admin_default_form(), follow=True)

    assert answer.status_code == 200
    assert "Another runbook is already the default: only one runbook can be." in answer.content.decode()
    assert Runbook.objects.count() == 1 and not Event.objects.filter(verb=Event.Verb.ADMIN_CREATED).exists()
