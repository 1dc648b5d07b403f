"""Shared fixtures for the browser tests (Playwright driving Debian's Chromium).

Registered for the whole suite through ``pytest_plugins`` in conftest.py, which
also brings the autouse static-files fixture below to every test that renders
a page.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw-" + "x" * 12  # tests.helpers.make_user's default


@pytest.fixture(autouse=True)
def _static_files_without_manifest(settings: Any) -> None:
    # With DEBUG off, settings use whitenoise's manifest storage, which needs
    # collectstatic first; tests render templates straight from static/.
    # (MANIFEST_STATIC set in conftest.py comes too late: pytest-django loads
    # the settings before it imports conftest.py.)
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session")
def _playwright() -> Iterator[Any]:
    # Playwright's sync API runs an event loop in this thread; the test's own ORM
    # calls are still synchronous, so Django's async guard would refuse them.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=10_000)  # a poll every 3 s, and a loaded CI machine
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(_playwright: Any) -> Iterator[Any]:
    browser = _playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


class InFlight:
    """Requests the live server has begun and not finished, counted by Django's request signals.

    A page's last click can leave a request running in the live server's thread (a partial its answer
    triggered, a poll) after the test's last check passed. The teardown's flush (``TRUNCATE``) then
    races it for table locks: CI saw PostgreSQL break that deadlock by failing the flush. So a page's
    teardown closes its browser context, then waits for the server to finish what it had begun.
    """

    def __init__(self) -> None:
        self.count, self.connections, self.changed = 0, 0, threading.Condition()

    def watch(self, live_server: Any) -> None:
        """Count the live server's connections from accept to close too: a request the browser had sent
        before its context closed can sit accepted (or in the listen queue) before Django's
        ``request_started`` fires, and a wait on the request count alone then let the flush in first."""
        httpd = live_server.thread.httpd
        if getattr(httpd, "in_flight_watched", False):
            return
        process, shutdown = httpd.process_request, httpd.shutdown_request

        def counted_process(request: Any, client_address: Any) -> None:
            with self.changed:
                self.connections += 1
            process(request, client_address)

        def counted_shutdown(request: Any) -> None:
            try:
                shutdown(request)
            finally:
                with self.changed:
                    self.connections -= 1
                    self.changed.notify_all()

        httpd.process_request, httpd.shutdown_request = counted_process, counted_shutdown
        httpd.in_flight_watched = True

    @staticmethod
    def served(sender: Any) -> bool:
        """A request of the live server, not of Django's test client (whose unread streams never finish)."""
        from django.test.client import AsyncClientHandler, ClientHandler

        return not (isinstance(sender, type) and issubclass(sender, (ClientHandler, AsyncClientHandler)))

    def started(self, sender: Any, **kwargs: Any) -> None:
        if not self.served(sender):
            return
        with self.changed:
            self.count += 1

    def finished(self, sender: Any, **kwargs: Any) -> None:
        if not self.served(sender):
            return
        with self.changed:
            self.count -= 1
            self.changed.notify_all()

    def _drain(self, deadline: float) -> None:
        with self.changed:
            while self.count > 0 or self.connections > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the live server still handles {self.count} request(s) on "
                        f"{self.connections} connection(s) after the teardown's wait"
                    )
                self.changed.wait(left)

    def wait_until_idle(self, live_server: Any, timeout: float = 30.0) -> None:
        """Every connection the browser opened is closed and its request finished. Then one request of our
        own: the server accepts in order, so once it is answered nothing queued before it is left unseen."""
        deadline = time.monotonic() + timeout
        self._drain(deadline)
        with urllib.request.urlopen(f"{live_server.url}/healthz", timeout=timeout) as answer:
            answer.read()
        self._drain(deadline)


@pytest.fixture(scope="session")
def _in_flight() -> Iterator[InFlight]:
    from django.core.signals import request_finished, request_started

    in_flight = InFlight()
    request_started.connect(in_flight.started, dispatch_uid="browser-in-flight-started")
    request_finished.connect(in_flight.finished, dispatch_uid="browser-in-flight-finished")
    yield in_flight
    request_started.disconnect(dispatch_uid="browser-in-flight-started")
    request_finished.disconnect(dispatch_uid="browser-in-flight-finished")


@pytest.fixture
def new_page(browser: Any, live_server: Any, _in_flight: InFlight) -> Iterator[Any]:
    """A factory of pages, each in its own browser context (its own session cookie)."""
    contexts = []
    _in_flight.watch(live_server)

    def make() -> Any:
        context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()
    _in_flight.wait_until_idle(live_server)  # before the flush: nothing of this test's still writes


@pytest.fixture
def page(new_page: Any) -> Any:
    return new_page()


def login(page: Any, user: Any, password: str = PASSWORD) -> None:
    from playwright.sync_api import expect

    page.goto("/login/")
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("whoami")).to_have_text(user.get_username())
