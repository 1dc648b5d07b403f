"""Shared fixtures for the browser tests (Playwright driving Debian's Chromium).

Registered for the whole suite through ``pytest_plugins`` in conftest.py, which
also brings the autouse static-files fixture below to every test that renders
a page.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PASSWORD = "pw-" + "x" * 12  # tests.helpers.make_user's default


@pytest.fixture(autouse=True)
def _static_files_without_manifest(settings: Any) -> None:
    # With DEBUG off, settings use whitenoise's manifest storage, which needs
    # collectstatic first; tests render templates straight from static/.
    # (MANIFEST_STATIC set in conftest.py comes too late: pytest-django loads
    # the settings before it imports conftest.py.)
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}


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


@pytest.fixture
def new_page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A factory of pages, each in its own browser context (its own session cookie)."""
    contexts = []

    def make() -> Any:
        context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


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
