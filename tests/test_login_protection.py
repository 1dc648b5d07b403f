"""Password guessing is stopped, passwords are long, idle sessions end, sign-ins are audited.

Finding 5 of issue 12: 30 wrong passwords then the right one logged in, on
/login/ and /admin/login/.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.password_validation import validate_password
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_user
from workflows.models import Event

PASSWORD = "correct-horse-battery"


@pytest.mark.parametrize("url", ["/login/", "/admin/login/"])
def test_thirty_wrong_passwords_lock_the_account_and_the_right_one_no_longer_works(client, db, settings, url):
    adam = make_user("adam", role="admin", password=PASSWORD)
    for _ in range(30):
        client.post(url, {"username": "adam", "password": "guess-" + "x" * 12})
    response = client.post(url, {"username": "adam", "password": PASSWORD})

    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert (
        Event.objects.filter(verb=Event.Verb.LOGIN_FAILED, data__username="adam").count() == settings.AXES_FAILURE_LIMIT
    )
    assert Event.objects.filter(verb=Event.Verb.LOCKED_OUT, data__username="adam").count() == 1
    assert not Event.objects.filter(verb=Event.Verb.LOGGED_IN, actor_user=adam).exists()


def test_signing_in_to_your_own_account_between_guesses_at_another_does_not_reset_the_count(client, db, settings):
    """Issue 22, finding 3: a success cleared every failure from the address, the other account's too."""
    make_user("adam", role="admin", password=PASSWORD)
    make_user("mallory", password="mallorys-own-password")
    for _ in range(3 * settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "adam", "password": "guess-" + "x" * 12}, REMOTE_ADDR="203.0.113.5")
        client.post("/login/", {"username": "mallory", "password": "mallorys-own-password"}, REMOTE_ADDR="203.0.113.5")
        client.cookies.clear()  # a fresh session, as a script without cookies sends
    response = client.post("/login/", {"username": "adam", "password": PASSWORD}, REMOTE_ADDR="203.0.113.5")

    assert response.status_code == 429
    assert not Event.objects.filter(verb=Event.Verb.LOGGED_IN, actor_user__username="adam").exists()
    assert Event.objects.filter(verb=Event.Verb.LOCKED_OUT, data__username="adam").count() == 1


def test_a_sign_in_still_forgets_its_own_typos(client, db, settings):
    make_user("alice", password=PASSWORD)
    for _ in range(3):
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            client.post("/login/", {"username": "alice", "password": "typo-" + "x" * 12}, REMOTE_ADDR="192.0.2.9")
        assert (
            client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="192.0.2.9").status_code
            == 302
        )
        client.cookies.clear()
    assert (
        client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="192.0.2.9").status_code == 302
    )


def test_a_sign_in_is_an_audit_event_with_the_address(client, db):
    alice = make_user("alice", password=PASSWORD)
    client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="192.0.2.7")
    event = Event.objects.get(verb=Event.Verb.LOGGED_IN)
    assert event.actor_user == alice and event.data["ip"] == "192.0.2.7" and event.subject == f"user:{alice.pk}"


def test_the_lockout_counts_the_client_behind_the_proxy_not_the_proxy(client, db, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    make_user("alice", password=PASSWORD)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            "/login/",
            {"username": "mallory", "password": "x" * 12},
            REMOTE_ADDR="10.0.0.2",
            HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.9",
        )
    assert (
        client.post(
            "/login/",
            {"username": "alice", "password": PASSWORD},
            REMOTE_ADDR="10.0.0.2",
            HTTP_X_FORWARDED_FOR="198.51.100.4",
        ).status_code
        == 302
    )  # another client, same proxy
    failed = Event.objects.filter(verb=Event.Verb.LOGIN_FAILED).first()
    assert failed.data["ip"] == "203.0.113.9"  # the address the proxy saw, not what the client wrote


def test_passwords_are_at_least_twelve_characters():
    with pytest.raises(ValidationError):
        validate_password("Tr0ub4dor&3")  # 11
    validate_password("Tr0ub4dor&3x")


def _session(client) -> Session:
    return Session.objects.get(session_key=client.session.session_key)


def test_an_idle_session_ends_and_activity_keeps_it_alive(client, db, settings):
    assert settings.SESSION_COOKIE_AGE == 8 * 3600
    make_user("alice", password=PASSWORD)
    client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert _session(client).expire_date > timezone.now() + timedelta(hours=7, minutes=59)

    # A page load after a while slides the expiry; a background htmx poll does not.
    session = client.session
    session["_active_at"] = 0
    session.save()
    Session.objects.filter(session_key=session.session_key).update(expire_date=timezone.now() + timedelta(hours=1))
    client.get(reverse("queue"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="queue-table")
    assert _session(client).expire_date < timezone.now() + timedelta(hours=2)
    client.get(reverse("queue"))
    assert _session(client).expire_date > timezone.now() + timedelta(hours=7, minutes=59)

    # Eight idle hours later the session is gone: the next request signs in again.
    Session.objects.filter(session_key=session.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get(reverse("queue"))
    assert response.status_code == 302 and response["Location"].startswith("/login/")
