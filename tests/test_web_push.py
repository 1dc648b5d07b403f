"""Web Push: a person turns notifications on for a device; a checkpoint assigned to them, an escalation to them
and a proposal waiting for their approval reach it through pywebpush, encrypted to the device and signed with
the console's VAPID key, through the notification outbox (retries, backoff; a 404/410 switches the device off).

Against a loopback push service the test starts (tests/push_service.py): it checks the encryption headers,
decrypts the body with the subscription's private key and verifies the VAPID JWT. pywebpush is never mocked.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.staticfiles import finders
from django.core.checks import run_checks
from django.test import Client
from django.urls import reverse

from console.event_text import event_text
from tests.helpers import make_checkpoint, make_policy, make_runbook, make_worked_example
from tests.push_service import PushService
from workflows import push, tasks
from workflows.models import Channel, Decider, Delivery, EscalationLevel, Event, Notification

SUBJECT = "mailto:oncall@example.com"


@pytest.fixture
def vapid(settings):
    settings.VAPID_PRIVATE_KEY = push.new_private_key()
    settings.VAPID_SUBJECT = SUBJECT
    settings.PUSH_TTL_SECONDS = 1800
    return push.public_key()


@pytest.fixture
def service(vapid):
    service = PushService(vapid)
    yield service
    service.close()


def subscribe(user, browser, *, device="Chrome on Android"):
    client = Client()
    client.force_login(user)
    return client.post(
        reverse("push_subscribe"),
        json.dumps({**browser.subscription, "device": device}),
        content_type="application/json",
    )


def deliver_pending() -> list[str]:
    """What the workers do: every pending delivery, once (whatever its next attempt time)."""
    return [
        tasks.deliver_notification(pk)
        for pk in Delivery.objects.filter(status=Delivery.Status.PENDING).order_by("pk").values_list("pk", flat=True)
    ]


def pushes(channel) -> Delivery:
    return Delivery.objects.get(channel=channel)


def test_a_checkpoint_assigned_to_me_reaches_my_device_encrypted_signed_and_opening_the_workbench(
    db, service, alice, bob
):
    browser = service.browser()
    answer = subscribe(alice, browser)
    assert answer.status_code == 201 and answer.json()["device"] == "Chrome on Android"
    channel = Channel.objects.get(kind=Channel.Kind.PUSH)
    assert (channel.user, channel.endpoint, channel.is_active) == (alice, browser.endpoint, True)
    checkpoint = make_checkpoint()

    assert checkpoint.assign(to=alice, by=bob, note="you know this customer")
    assert deliver_pending() == ["sent"]

    assert service.problems == []
    [received] = service.received
    assert received.message["title"].startswith("bob assigned it to you: ")
    assert received.message["body"] == "you know this customer"
    assert received.message["url"].endswith(reverse("workbench", args=[checkpoint.pk]))
    assert received.message["tag"] == f"checkpoint-{checkpoint.pk}"
    assert received.headers["ttl"] == "1800" and received.headers["urgency"] == "normal"
    assert received.claims["aud"] == service.origin and received.claims["sub"] == SUBJECT
    delivery = pushes(channel)
    assert delivery.status == Delivery.Status.SENT and delivery.attempt_log.get().status_code == 201
    subscribed = Event.objects.get(verb=Event.Verb.PUSH_SUBSCRIBED)
    assert subscribed.actor == "alice" and event_text(subscribed) == "turned on notifications on Chrome on Android"


def test_an_escalation_to_me_and_a_proposal_waiting_for_my_approval_are_pushed_but_a_warning_is_not(
    db, service, alice, bob
):
    subscribe(alice, service.browser())
    policy = make_policy(name="escalating", target=30, warning=10)
    EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, user=alice)
    make_runbook(workflow_kind="refund", policy=policy, requires_four_eyes=True)
    escalated = make_checkpoint()
    tasks.sweep_clocks(escalated.due_at + timedelta(minutes=1))  # warned (nobody holds it), breached, escalated
    proposal = make_checkpoint(make_worked_example(refund_status="pending"))
    unknown = {e["idempotency_key"]: "did_not_happen" for e in proposal.unknown_effects}
    Decider(proposal).decide(
        by=bob, action="resume", confirmations=unknown, money_confirmed=True, instructions="issue it once"
    )

    deliver_pending()

    assert service.problems == []
    kinds = sorted(r.message["kind"] for r in service.received)
    assert kinds == [Notification.Kind.APPROVAL_WAITING, Notification.Kind.ESCALATED]
    by_kind = {r.message["kind"]: r for r in service.received}
    assert by_kind["escalated"].headers["urgency"] == "high"
    assert "bob proposes to resume: waiting for your approval" in by_kind["approval_waiting"].message["title"]
    assert by_kind["approval_waiting"].message["url"].endswith(reverse("workbench", args=[proposal.pk]))
    # The proposer is not asked to approve their own proposal.
    assert not Notification.objects.filter(recipient=bob, kind=Notification.Kind.APPROVAL_WAITING).exists()


@pytest.mark.parametrize("status", [404, 410])
def test_a_subscription_the_push_service_says_is_gone_is_switched_off_and_never_tried_again(
    db, service, alice, bob, status
):
    subscribe(alice, service.browser())
    channel = Channel.objects.get(kind=Channel.Kind.PUSH)
    service.answer(status)
    make_checkpoint().assign(to=alice, by=bob)

    assert deliver_pending() == ["failed"]

    channel.refresh_from_db()
    delivery = pushes(channel)
    assert not channel.is_active and delivery.attempts == 1 and delivery.attempt_log.get().status_code == status
    assert "the subscription is gone" in delivery.last_error
    gone = Event.objects.get(verb=Event.Verb.PUSH_UNSUBSCRIBED)
    assert gone.actor_type == Event.ActorType.SYSTEM and f"the push service answered {status}" in event_text(gone)
    make_checkpoint().assign(to=alice, by=bob)
    assert Delivery.objects.filter(channel=channel).count() == 1  # the next one is not even queued for it


def test_a_push_service_that_fails_is_retried_with_backoff(db, service, alice, bob, settings):
    settings.NOTIFY_BACKOFF_SECONDS = 60
    subscribe(alice, service.browser())
    service.answer(503, 429)
    make_checkpoint().assign(to=alice, by=bob)

    assert deliver_pending() == ["retry"]
    delivery = Delivery.objects.get()
    assert delivery.status == Delivery.Status.PENDING and "did not take the message" in delivery.last_error
    assert delivery.next_attempt_at - delivery.attempt_log.get().at == timedelta(seconds=60)
    assert deliver_pending() == ["retry"]
    delivery.refresh_from_db()
    assert delivery.next_attempt_at - delivery.attempt_log.last().at == timedelta(seconds=120)  # the backoff doubled
    assert deliver_pending() == ["sent"]
    assert [a.status_code for a in delivery.attempt_log.all()] == [503, 429, 201]
    assert len(service.received) == 1 and service.problems == []


def test_without_a_vapid_key_nothing_is_pushed_and_the_checks_say_why(db, service, alice, bob, settings):
    subscribe(alice, service.browser())
    settings.VAPID_PRIVATE_KEY = ""

    refused = subscribe(alice, service.browser(), device="another phone")
    assert refused.status_code == 409 and "VAPID_PRIVATE_KEY" in refused.json()["error"]
    assert Channel.objects.filter(kind=Channel.Kind.PUSH).count() == 1
    make_checkpoint().assign(to=alice, by=bob)
    assert deliver_pending() == ["failed"]  # at once: no retry can help
    assert "VAPID_PRIVATE_KEY is not set" in Delivery.objects.get().last_error and service.received == []
    assert "console.I001" in {m.id for m in run_checks(include_deployment_checks=True)}

    settings.VAPID_PRIVATE_KEY = "not-a-key"
    assert "console.E004" in {m.id for m in run_checks()}


def test_a_subscription_the_console_could_never_push_to_is_refused_with_the_reason(db, service, alice, settings):
    good = service.browser().subscription
    client = Client()
    client.force_login(alice)

    def post(body):
        return client.post(reverse("push_subscribe"), body, content_type="application/json")

    assert "Send the browser's subscription" in post("not json").json()["error"]
    assert "Send the browser's subscription" in post(json.dumps({"endpoint": good["endpoint"]})).json()["error"]
    bad_key = {**good, "keys": {"p256dh": "AAAA", "auth": good["keys"]["auth"]}}
    assert "not a P-256 public key" in post(json.dumps(bad_key)).json()["error"]
    settings.DELIVERY_ALLOWED_NETWORKS, settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES = [], True
    answer = post(json.dumps(good))
    assert answer.status_code == 400 and "loopback address" in answer.json()["error"]
    assert not Channel.objects.exists() and not Event.objects.filter(verb=Event.Verb.PUSH_SUBSCRIBED).exists()


def test_devices_are_each_persons_own_and_turning_one_off_is_audited(db, service, alice, bob):
    phone, laptop = service.browser(), service.browser()
    subscribe(alice, phone)
    subscribe(alice, laptop, device="Firefox on Linux")
    alices = Client()
    alices.force_login(alice)
    page = alices.get(reverse("notifications")).content.decode()
    assert page.count('data-testid="push-device"') == 2 and "Firefox on Linux" in page
    laptop_channel = Channel.objects.get(endpoint=laptop.endpoint)

    bobs = Client()
    bobs.force_login(bob)
    assert bobs.post(reverse("push_unsubscribe", args=[laptop_channel.pk])).status_code == 404
    assert 'data-testid="push-device"' not in bobs.get(reverse("notifications")).content.decode()
    assert alices.post(reverse("push_unsubscribe", args=[laptop_channel.pk])).status_code == 302

    laptop_channel.refresh_from_db()
    assert not laptop_channel.is_active
    off = Event.objects.get(verb=Event.Verb.PUSH_UNSUBSCRIBED)
    assert off.actor == "alice" and "Firefox on Linux" in event_text(off)
    assert alices.get(reverse("notifications")).content.decode().count('data-testid="push-device"') == 1
    # The phone is handed to bob: his browser subscribes the same endpoint, and it is his from now on.
    assert subscribe(bob, phone).status_code == 201
    assert Channel.objects.get(endpoint=phone.endpoint).user == bob
    assert Channel.objects.filter(kind=Channel.Kind.PUSH).count() == 2


def test_the_manifest_and_the_service_worker_are_served_with_their_types_under_a_strict_csp(db, alice):
    client = Client()
    manifest = client.get("/manifest.webmanifest")
    assert manifest.status_code == 200 and manifest["Content-Type"] == "application/manifest+json"
    app = json.loads(manifest.content)
    assert (app["start_url"], app["scope"], app["display"]) == ("/", "/", "standalone")
    assert {"192x192", "512x512"} <= {icon["sizes"] for icon in app["icons"]}
    for icon in app["icons"]:  # static files (whitenoise serves them; the test client has no collected copy)
        assert finders.find(icon["src"].removeprefix("/static/")), icon["src"]

    worker = client.get("/sw.js")
    assert worker.status_code == 200 and worker["Content-Type"].startswith("text/javascript")
    assert worker["Service-Worker-Allowed"] == "/" and b"notificationclick" in worker.content

    client.force_login(alice)
    page = client.get(reverse("notifications"))
    csp = page["Content-Security-Policy"]
    assert "worker-src 'self'" in csp and "manifest-src 'self'" in csp and "unsafe-inline" not in csp
    html = page.content.decode()
    assert '<link rel="manifest" href="/manifest.webmanifest">' in html and 'data-testid="push-toggle"' in html


def test_someone_else_cannot_take_a_device_over_by_its_endpoint_alone(db, service, alice, bob):
    """Security review: a subscription names its endpoint; another person posting that endpoint with keys of
    their own would have silenced alice's phone. Only the same subscription (the browser signed in as bob
    sends the endpoint with its keys) moves the device to bob."""
    phone = service.browser()
    subscribe(alice, phone)
    impostor = service.browser()
    stolen = {**impostor.subscription, "endpoint": phone.endpoint}
    bobs = Client()
    bobs.force_login(bob)
    answer = bobs.post(
        reverse("push_subscribe"), json.dumps({**stolen, "device": "not yours"}), content_type="application/json"
    )
    assert answer.status_code == 400 and "another person's device" in answer.json()["error"]
    channel = Channel.objects.get(endpoint=phone.endpoint)
    assert (channel.user, channel.is_active, channel.device) == (alice, True, "Chrome on Android")
    assert not Event.objects.filter(verb=Event.Verb.PUSH_SUBSCRIBED, actor_user=bob).exists()
