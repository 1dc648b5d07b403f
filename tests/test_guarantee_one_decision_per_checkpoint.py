"""Guarantee 1: one decision per checkpoint — 50 operators approving at once over HTTP.

A real multi-process gunicorn on PostgreSQL; each operator has its own session;
the winner's decision is delivered by a real worker, exactly once.
"""

import functools
import http.cookiejar
import string
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.sessions.backends.db import SessionStore

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example, run_together
from tests.stack import BIN, Receiver, Stack, free_port, private_redis, wait_until
from workflows.models import Decision, Event

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OPERATORS = 50
CSRF = string.ascii_letters[:32]


def session_for(user):
    """What logging in leaves behind, without 50 password hashes on a 2-core machine."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    # As Django's own force_login does: the first backend that can load a user (axes' comes first and cannot).
    session[BACKEND_SESSION_KEY] = next(
        path for path in settings.AUTHENTICATION_BACKENDS if hasattr(load_backend(path), "get_user")
    )
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return session.session_key


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def browser(base, session_key, follow):
    """An opener with the operator's cookies, like their browser tab."""
    jar = http.cookiejar.CookieJar()
    host = urllib.parse.urlsplit(base).hostname
    for name, value in (("sessionid", session_key), ("csrftoken", CSRF)):
        jar.set_cookie(
            http.cookiejar.Cookie(
                0, name, value, None, False, host, False, False, "/", True, False, None, False, None, None, {}
            )
        )
    handlers = [urllib.request.HTTPCookieProcessor(jar)] + ([] if follow else [NoRedirect])
    return urllib.request.build_opener(*handlers)


def post(base, path, session_key, fields, follow=False):
    data = urllib.parse.urlencode({"csrfmiddlewaretoken": CSRF, **fields}).encode()
    request = urllib.request.Request(base + path, data=data, method="POST")
    opener = browser(base, session_key, follow)
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def burst(n, action):
    barrier = threading.Barrier(n)
    answers = [None] * n

    def one(i):
        barrier.wait()
        answers[i] = action(i)

    run_together([functools.partial(one, i) for i in range(n)], timeout=120)
    return answers


@pytest.fixture
def console():
    with private_redis() as redis:
        receiver = Receiver()
        port = free_port()
        stack = Stack(redis.url, ALLOWED_HOSTS="127.0.0.1", SWEEP_INTERVAL_SECONDS="0.3")
        try:
            stack.start(
                "web",
                [
                    str(BIN / "gunicorn"),
                    "console.wsgi",
                    "-b",
                    f"127.0.0.1:{port}",
                    "-w",
                    "3",
                    "--threads",
                    "4",
                    "--timeout",
                    "60",
                ],
                ready="Booting worker",
            )
            yield f"http://127.0.0.1:{port}", stack, receiver
        finally:
            stack.stop()
            receiver.close()


def test_fifty_operators_approving_at_once_make_exactly_one_decision_and_one_delivery(console):
    base, stack, receiver = console
    operators = [make_user(f"op{i}") for i in range(OPERATORS)]
    sessions = [session_for(u) for u in operators]
    agent, _ = make_agent(resume_url=receiver.url)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))

    answers = burst(
        OPERATORS,
        lambda i: post(
            base,
            f"/checkpoints/{checkpoint.pk}/decide/",
            sessions[i],
            {"action": "resume", "instructions": f"resume, says op{i}", "money_confirmed": "on"},
        ),
    )

    assert Decision.objects.filter(checkpoint=checkpoint).count() == 1, answers[:2]
    decision = Decision.objects.get(checkpoint=checkpoint)
    winner = decision.decided_by.username
    statuses = sorted(status for status, _ in answers)
    assert statuses == [302] + [409] * (OPERATORS - 1)
    for status, body in answers:
        if status == 409:  # every loser is told what was decided and by whom
            assert "Already decided: resume by" in body and winner in body
    assert Event.objects.filter(checkpoint=checkpoint, verb="decided").count() == 1

    stack.worker()
    stack.relay()
    wait_until(
        lambda: Decision.objects.get(pk=decision.pk).status == "succeeded",
        timeout=60,
        what="the one decision to be delivered",
    )
    assert receiver.delivery_ids() == [str(decision.delivery_id)]


def test_fifty_operators_claiming_at_once_leave_one_holder_and_tell_the_others_who(console):
    base, _stack, _receiver = console
    operators = [make_user(f"op{i}") for i in range(OPERATORS)]
    sessions = [session_for(u) for u in operators]
    checkpoint = make_checkpoint()

    # Each operator's browser follows the redirect and shows the flash message it was given.
    answers = burst(
        OPERATORS, lambda i: post(base, f"/checkpoints/{checkpoint.pk}/claim/", sessions[i], {}, follow=True)
    )
    checkpoint.refresh_from_db()
    holder = checkpoint.assignee
    assert holder in operators
    assert Event.objects.filter(checkpoint=checkpoint, verb="claimed").count() == 1
    pages = [page for _, page in answers]
    assert sum("You claimed" in page for page in pages) == 1
    assert sum(f"{holder.username} has already claimed this checkpoint" in page for page in pages) == OPERATORS - 1
