"""In Chromium: the notifications page registers the service worker at the root scope with no CSP violation,
and a push delivered to it (through the DevTools protocol, as a push service would) is shown as a
notification that opens the workbench; a push naming another site opens the console's home instead."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from tests.browser_fixtures import login
from tests.test_browser_csp_and_chrome import _violations, _watch
from workflows import push

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTIFICATIONS = (
    "navigator.serviceWorker.ready.then(r => r.getNotifications())"
    ".then(ns => ns.map(n => ({title: n.title, body: n.body, tag: n.tag, data: n.data})))"
)


def _shown(page, ready, timeout: float = 30.0) -> list[dict]:
    """The notifications shown, once ``ready`` holds of them. Asked again until then: the list is read in a
    promise, which ``page.wait_for_function`` counts as truthy at once instead of awaiting it."""
    deadline = time.monotonic() + timeout
    while not ready(shown := page.evaluate(NOTIFICATIONS)):
        assert time.monotonic() < deadline, f"the notifications shown never got there: {shown}"
    return shown


def _pushed(page, deliver, message: dict, attempts: int = 6) -> dict:
    """The notification ``message`` (delivered to the worker) is shown as. Chromium's DevTools delivery drops a
    message now and then, idle too (3 of 25 in a row once, none of them shown); a push service delivers again
    what the browser has not acknowledged, so this does too, a few seconds apart. The tag makes a repeat replace
    the notification, never add one."""
    for _ in range(attempts):
        deliver(message)
        try:
            shown = _shown(page, lambda ns: any(n["tag"] == message["tag"] for n in ns), timeout=5.0)
        except AssertionError:
            continue
        [notification] = [n for n in shown if n["tag"] == message["tag"]]
        return notification
    raise AssertionError(f"{message['tag']} was never shown after {attempts} deliveries")


def test_the_service_worker_shows_a_push_that_opens_the_workbench(page, alice, live_server, settings):
    settings.VAPID_PRIVATE_KEY = push.new_private_key()
    console = _watch(page)
    page.context.grant_permissions(["notifications"], origin=live_server.url)
    login(page, alice)

    page.goto("/notifications/")
    toggle = page.get_by_test_id("push-toggle")
    expect(toggle).to_be_enabled()  # the worker is registered and the browser has no subscription yet
    expect(toggle).to_have_text("Turn on for this device")
    assert page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)") == live_server.url + "/"

    registrations: list[dict] = []
    devtools = page.context.new_cdp_session(page)
    devtools.on("ServiceWorker.workerRegistrationUpdated", lambda e: registrations.extend(e["registrations"]))
    devtools.send("ServiceWorker.enable")
    deadline = time.monotonic() + 10
    while not registrations and time.monotonic() < deadline:
        page.evaluate("0")  # lets the protocol's events in
    [registration] = [r for r in registrations if r["scopeURL"] == live_server.url + "/"]

    def deliver(message: dict) -> None:
        devtools.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": live_server.url, "registrationId": registration["registrationId"], "data": json.dumps(message)},
        )

    shown = _pushed(
        page,
        deliver,
        {
            "title": "bob assigned it to you: Refund for ticket T-1042",
            "body": "you know this customer",
            "url": f"{live_server.url}/checkpoints/7/",
            "tag": "checkpoint-7",
            "kind": "assigned",
        },
    )
    assert shown == {
        "title": "bob assigned it to you: Refund for ticket T-1042",
        "body": "you know this customer",
        "tag": "checkpoint-7",
        "data": {"url": "/checkpoints/7/"},
    }
    assert len(page.evaluate(NOTIFICATIONS)) == 1  # delivered again or not, one notification

    elsewhere = _pushed(
        page, deliver, {"title": "elsewhere", "url": "https://evil.example/phish", "tag": "checkpoint-8"}
    )
    assert elsewhere["data"] == {"url": "/"}  # a tap only ever opens the console

    # A path that a browser would read as another host ("//evil.example/…" on the console's own origin).
    sneaky = _pushed(
        page, deliver, {"title": "sneaky", "url": f"{live_server.url}//evil.example/phish", "tag": "checkpoint-9"}
    )
    assert sneaky["data"] == {"url": "/"}
    assert _violations(page, console) == []
