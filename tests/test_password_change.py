"""Operators and TPMs change their own password (issue 22, finding 13: there was no page).

ASVS V2.1: the current password first, a minimum length, common passwords refused; the change is
an audit event and the session that made it stays signed in while the others end.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.helpers import make_user
from workflows.models import Event

OLD = "correct-horse-battery"
NEW = "a-longer-staple-for-2026"


def _change(client, old=OLD, new=NEW, again=None, **extra):
    return client.post(
        reverse("password_change"), {"old_password": old, "new_password1": new, "new_password2": again or new}, **extra
    )


@pytest.mark.parametrize("role", ["operator", "tpm", "admin"])
def test_a_user_changes_their_own_password_stays_signed_in_and_it_is_audited(client, db, role):
    user = make_user("pat", role=role, password=OLD)
    elsewhere = Client()
    assert elsewhere.post("/login/", {"username": "pat", "password": OLD}).status_code == 302
    assert client.post("/login/", {"username": "pat", "password": OLD}).status_code == 302
    page = client.get(reverse("queue")).content.decode()
    assert f'href="{reverse("password_change")}"' in page  # linked from the user menu

    response = _change(client, REMOTE_ADDR="192.0.2.44")

    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password(NEW) and not user.check_password(OLD)
    assert client.get(reverse("queue")).status_code == 200  # this session kept
    assert elsewhere.get(reverse("queue")).status_code == 302  # the others signed out
    event = Event.objects.get(verb=Event.Verb.PASSWORD_CHANGED)
    assert event.actor_user == user and event.subject == f"user:{user.pk}" and event.data["ip"] == "192.0.2.44"
    assert OLD not in str(event.data) and NEW not in str(event.data)


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("wrong-password-guess", NEW, "Your old password was entered incorrectly"),
        (OLD, "q1w2e3r4t5y6", "This password is too common"),
        (OLD, "Sh0rt&sweet", "This password is too short"),
    ],
)
def test_the_current_password_is_required_and_weak_passwords_are_refused(client, db, old, new, error):
    user = make_user("pat", password=OLD)
    client.force_login(user)

    response = _change(client, old=old, new=new)

    assert response.status_code == 200 and error in response.content.decode()
    user.refresh_from_db()
    assert user.check_password(OLD)
    assert not Event.objects.filter(verb=Event.Verb.PASSWORD_CHANGED).exists()


def test_guessing_the_current_password_from_a_borrowed_session_locks_out(client, db, settings):
    user = make_user("pat", password=OLD)
    client.force_login(user)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _change(client, old="guess-" + "x" * 12)

    response = _change(client)  # the right one, too late

    assert response.status_code == 429
    user.refresh_from_db()
    assert user.check_password(OLD)
    assert (
        Event.objects.filter(verb=Event.Verb.LOGIN_FAILED, data__username="pat").count() == settings.AXES_FAILURE_LIMIT
    )


def test_anonymous_visitors_are_sent_to_sign_in(client, db):
    response = client.get(reverse("password_change"))
    assert response.status_code == 302 and response["Location"].startswith("/login/")
