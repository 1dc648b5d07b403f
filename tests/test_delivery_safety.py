"""Deliveries go only where they may: no redirects, no proxies, no private or metadata targets, https.

Finding 3 of issue 12. Every request here stays on loopback: refused targets are
refused before any connection, and the DNS-rebinding test answers with loopback
addresses only.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from tests.stack import Receiver
from workflows import runtime, tasks
from workflows.models import Agent, Decider, Decision


@pytest.fixture
def production_rules(settings):
    """The defaults with DEBUG off: https only, private targets refused, nothing allow-listed."""
    settings.DELIVERY_REQUIRE_HTTPS = True
    settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES = True
    settings.DELIVERY_ALLOWED_NETWORKS = []
    return settings


class Redirector:
    """A resume endpoint that answers every POST with ``status`` and a Location elsewhere."""

    def __init__(self, status: int, location: str) -> None:
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.requests.append(self.command)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        outer = self
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/resume"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Redirector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decision(resume_url: str, alice, **agent_fields) -> Decision:
    agent, _ = make_agent(resume_url=resume_url, **agent_fields)
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.claim(by=alice)
    return Decider(checkpoint).decide(by=alice, action="resume", instructions="go", money_confirmed=True)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_attempt_and_is_never_followed(db, alice, receiver, settings, status):
    settings.DELIVERY_BACKOFF_SECONDS = 0
    with Redirector(status, receiver.url) as redirector:
        decision = _decision(redirector.url, alice)
        assert tasks.deliver_decision(decision.pk) == "retry"
    decision.refresh_from_db()
    assert decision.status == Decision.Status.QUEUED
    assert f"answered {status} redirecting to {receiver.url}" in decision.last_error
    assert "never follow redirects" in decision.last_error
    assert redirector.requests == ["POST"] and receiver.deliveries == []


def test_proxy_variables_are_ignored(db, alice, receiver, monkeypatch):
    proxy = Receiver()  # were the proxy used, the delivery would land here
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy.url.rsplit("/", 1)[0])
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        decision = _decision(receiver.url, alice)
        assert tasks.deliver_decision(decision.pk) == "delivered"
    finally:
        proxy.close()
    assert len(receiver.deliveries) == 1 and proxy.deliveries == []


REFUSED = {
    "http://127.0.0.1:5432/": "loopback",
    "http://localhost:5432/": "loopback",
    "http://[::1]:8000/": "loopback",
    "http://[::ffff:127.0.0.1]:8000/": "loopback",
    "http://0.0.0.0:8000/": "private",
    "http://10.0.0.1/": "private",
    "http://192.168.1.20/hook": "private",
    "http://100.64.0.1/": "not a public address",
    "http://169.254.10.10/": "link-local",
    "http://169.254.169.254/latest/meta-data/": "metadata",
    "http://metadata.google.internal/computeMetadata/v1/": "metadata",
    "http://[fd00:ec2::254]/": "metadata",
}


@pytest.mark.parametrize("url", REFUSED)
def test_private_and_metadata_targets_are_refused_before_connecting(db, production_rules, alice, monkeypatch, url):
    production_rules.DELIVERY_REQUIRE_HTTPS = False  # the address rule, not the scheme rule, is under test
    connections: list[object] = []  # were a refused target connected to, the attempt would stop here

    def no_connection(address, *args, **kwargs):
        connections.append(address)
        raise OSError("the test allows no connection here")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", no_connection)
    decision = _decision(url, alice)

    assert tasks.deliver_decision(decision.pk) == "retry"

    decision.refresh_from_db()
    assert REFUSED[url] in decision.last_error and "may not go to" in decision.last_error
    assert connections == []


def test_metadata_addresses_are_refused_even_when_allow_listed(db, settings):
    settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES = False
    settings.DELIVERY_ALLOWED_NETWORKS = ["169.254.0.0/16"]
    with pytest.raises(runtime.UnsafeTarget, match="metadata"):
        runtime.resolve(runtime.parse_target("http://169.254.169.254/"))


def test_the_allow_list_lets_the_demo_fleet_and_on_premise_agents_through(db, production_rules, alice, receiver):
    production_rules.DELIVERY_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    decision = _decision(receiver.url, alice, allow_plain_http=True)
    assert tasks.deliver_decision(decision.pk) == "delivered"
    assert len(receiver.deliveries) == 1


def test_the_connection_goes_to_the_address_that_was_checked(db, settings, alice, receiver, monkeypatch):
    """DNS rebinding: a later answer (127.0.0.2, where nothing listens) must never be used."""
    settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES = True
    settings.DELIVERY_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    port = receiver.server.server_address[1]
    answers = iter(["127.0.0.1"])
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        if host == "rebind.test":
            address = next(answers, "127.0.0.2")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    decision = _decision(f"http://rebind.test:{port}/resume", alice)

    assert tasks.deliver_decision(decision.pk) == "delivered"
    [delivery] = receiver.deliveries
    assert delivery["host"] == f"rebind.test:{port}" and delivery["path"] == "/resume"


def test_a_name_with_any_refused_address_is_refused(db, settings, monkeypatch):
    settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES = True
    settings.DELIVERY_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, *a, **k: [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port)),
        ],
    )
    with pytest.raises(runtime.UnsafeTarget, match="10.1.2.3 is a private address"):
        runtime.resolve(runtime.parse_target("http://mixed.test/"))


def test_production_requires_https_unless_the_agent_opts_out(db, production_rules, alice, receiver):
    production_rules.DELIVERY_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    refused = _decision(receiver.url, alice)
    assert tasks.deliver_decision(refused.pk) == "retry"
    refused.refresh_from_db()
    assert "must use https" in refused.last_error and receiver.deliveries == []

    allowed = _decision(receiver.url, alice, allow_plain_http=True)
    assert tasks.deliver_decision(allowed.pk) == "delivered"


@pytest.mark.parametrize("scheme", ["ftp", "file", "gopher"])
def test_only_http_and_https_are_ever_delivered_to(db, scheme):
    with pytest.raises(runtime.UnsafeTarget, match="Only http and https"):
        runtime.parse_target(f"{scheme}://example.com/resume")


CONFIGURED = [
    "http://127.0.0.1:5432",
    "http://169.254.169.254/",
    "http://10.0.0.1/",
    "https://metadata.google.internal/",
    "ftp://example.com/resume",
]


@pytest.mark.parametrize("url", CONFIGURED)
def test_create_agent_refuses_unsafe_resume_urls(db, production_rules, url):
    with pytest.raises(CommandError):
        call_command("create_agent", "unsafe-bot", "--resume-url", url)
    assert not Agent.objects.filter(name="unsafe-bot").exists()


@pytest.mark.parametrize("url", CONFIGURED)
def test_the_admin_refuses_unsafe_resume_urls(db, client, production_rules, url):
    root = make_user("root", role="admin")
    client.force_login(root)
    response = client.post(
        reverse("admin:workflows_agent_add"), {"name": "unsafe-bot", "resume_url": url, "is_active": "on"}
    )
    assert response.status_code == 200, "the form comes back with an error"
    assert not Agent.objects.filter(name="unsafe-bot").exists()
    assert response.context["adminform"].form.errors["resume_url"]


def test_the_admin_accepts_a_public_https_url(db, client, production_rules):
    client.force_login(make_user("root", role="admin"))
    response = client.post(
        reverse("admin:workflows_agent_add"),
        {"name": "public-bot", "resume_url": "https://93.184.215.14/resume", "is_active": "on"},
    )
    assert response.status_code == 200 and 'data-testid="token"' in response.content.decode()  # shown once
    assert Agent.objects.get(name="public-bot").resume_url == "https://93.184.215.14/resume"


# --- Notification webhooks go out under the same rules (issue 9's channels, issue 12's finding 3) -----------


def _webhook_delivery(url: str, user, **channel_fields):
    from django.db import transaction

    from workflows.models import Channel, Delivery, Notification

    Channel.objects.create(kind="webhook", user=user, url=url, **channel_fields)
    with transaction.atomic():
        Notification.send(
            kind="sla_breached",
            title="Decision target breached",
            body="Due 10:00 UTC.",
            checkpoint=make_checkpoint(),
            users=[user],
            key="n1",
        )
    return Delivery.objects.get()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_webhook_redirect_is_a_failed_attempt_and_is_never_followed(db, alice, receiver, settings, status):
    settings.NOTIFY_BACKOFF_SECONDS = 0
    with Redirector(status, receiver.url) as redirector:
        delivery = _webhook_delivery(redirector.url, alice)
        assert tasks.deliver_notification(delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert redirector.requests == ["POST"] and receiver.deliveries == []
    assert f"answered {status} redirecting to {receiver.url}" in delivery.last_error


@pytest.mark.parametrize("url", ["http://127.0.0.1:5432/", "http://169.254.169.254/latest/", "http://10.0.0.1/hook"])
def test_a_webhook_to_a_private_or_metadata_address_is_refused_before_connecting(db, alice, production_rules, url):
    production_rules.NOTIFY_BACKOFF_SECONDS = 0
    delivery = _webhook_delivery(url, alice, allow_plain_http=True)
    assert tasks.deliver_notification(delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert "may not go to" in delivery.last_error and REFUSED_REASON[url] in delivery.last_error


REFUSED_REASON = {
    "http://127.0.0.1:5432/": "loopback",
    "http://169.254.169.254/latest/": "metadata",
    "http://10.0.0.1/hook": "private",
}


def test_a_webhook_needs_https_in_production_unless_its_channel_opts_out(db, alice, receiver, production_rules):
    production_rules.DELIVERY_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    production_rules.NOTIFY_BACKOFF_SECONDS = 0
    refused = _webhook_delivery(receiver.url, alice)
    assert tasks.deliver_notification(refused.pk) == "retry"
    refused.refresh_from_db()
    assert "Webhook URLs must use https here" in refused.last_error and receiver.deliveries == []

    refused.channel.allow_plain_http = True
    refused.channel.save()
    assert tasks.deliver_notification(refused.pk) == "sent"
    assert len(receiver.deliveries) == 1


@pytest.mark.parametrize("url", CONFIGURED)
def test_the_admin_refuses_unsafe_webhook_urls(db, client, production_rules, url):
    from workflows.models import Channel

    root = make_user("root", role="admin")
    client.force_login(root)
    response = client.post(
        reverse("admin:workflows_channel_add"),
        {"kind": "webhook", "user": root.pk, "url": url, "allow_plain_http": "on", "is_active": "on"},
    )
    assert response.status_code == 200, "the form comes back with an error"
    assert response.context["adminform"].form.errors["url"]
    assert not Channel.objects.exists()
