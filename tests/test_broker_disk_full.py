"""Disk pressure on the embedded default's broker (the filesystem transport): its folder fills up.

A real full disk: a small tmpfs mounted on the broker folder and filled to the last byte, with a
real outbox relay and a real Celery worker on the filesystem broker. The decision is recorded and
stays due, every page of the console says what is wrong and how many decisions wait, ``/metrics``
says so too; once there is room the relay sends it and it is delivered once, and the banner goes.
"""

from __future__ import annotations

import errno
import os
import time

import pytest

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example, squeezed
from tests.stack import Stack, tmpfs, wait_until
from workflows.models import BrokerStatus, Decider, Decision

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BANNER = "Decisions are not reaching the workers."


def fill(filler) -> None:
    """Write ``filler`` until its disk has not one byte left."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def assert_nothing_written_stays(out) -> None:
    """No message file in ``out``, whole or half written: a failed publish leaves nothing behind.

    The relay keeps trying while the disk is full, so a ``….msg.partial`` of the write under way may be
    there at any one look (``folder_broker`` writes it, fails and removes it). Each write has a name of
    its own, so two looks a second apart share no file if none stays; and no name a consumer takes
    (``….msg``) is there at either look.
    """
    first = {p.name for p in out.iterdir()}
    time.sleep(1)
    second = {p.name for p in out.iterdir()}
    assert first & second == set(), f"left in the broker folder: {sorted(first & second)}"
    assert [name for name in first | second if not name.endswith(".msg.partial")] == []


@pytest.fixture
def broker_disk(tmp_path):
    """VAR_DIR whose broker/ folder is a 256 KB tmpfs of its own (with room); yields VAR_DIR."""
    var = tmp_path / "var"
    with tmpfs(var / "broker", "256k") as broker:
        for sub in ("out", "processed", "control"):  # what the settings make, made while there is room
            (broker / sub).mkdir()
        yield var


@pytest.fixture
def full_broker_folder(broker_disk):
    """VAR_DIR whose broker/ folder is a 256 KB tmpfs, full; yields (VAR_DIR, the file that fills it)."""
    filler = broker_disk / "broker" / "filler"
    fill(filler)
    return broker_disk, filler


def test_a_full_broker_disk_is_said_on_every_page_and_the_decision_goes_out_once_there_is_room(
    full_broker_folder, receiver, client, settings
):
    var, filler = full_broker_folder
    settings.METRICS_ALLOWED_IPS, settings.METRICS_CACHE_SECONDS = ["127.0.0.1/32"], 0  # the scrape, uncached
    operator = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    stack = Stack("filesystem://", VAR_DIR=str(var), DELIVERY_LEASE_SECONDS="3", SWEEP_INTERVAL_SECONDS="0.3")
    try:
        relay = stack.relay()
        checkpoint = make_checkpoint(make_worked_example(agent=agent))
        decision = Decider(checkpoint).decide(by=operator, action="resume", instructions="go on", money_confirmed=True)
        wait_until(
            lambda: relay.output().count("relay tick failed") >= 2,
            timeout=60,
            what="the relay to find the broker's disk full twice",
        )
        decision.refresh_from_db()
        assert decision.status == Decision.Status.QUEUED  # kept, and still due
        status = BrokerStatus.failing()
        assert status is not None and status.failures >= 2
        assert f"The broker folder {var / 'broker' / 'out'} is out of disk space" in status.last_error

        client.force_login(operator)
        page = squeezed(client.get("/").content.decode())
        assert BANNER in page
        assert "1 decision is recorded and waits; nothing is lost" in page
        assert "is out of disk space" in page
        assert squeezed(client.get(f"/checkpoints/{checkpoint.pk}/").content.decode()).count(BANNER) == 1
        metrics = client.get("/metrics").content.decode()
        assert "recovery_broker_failing 1.0" in metrics
        assert receiver.deliveries == []

        broker = var / "broker"
        assert [p.stat().st_size for p in (broker / "control").glob("*.exchange")] == [0]  # left by the full disk
        assert_nothing_written_stays(broker / "out")  # a message is written whole or not at all (folder_broker)
        filler.unlink()  # room again: nobody touches the decision
        wait_until(lambda: BrokerStatus.failing() is None, timeout=60, what="the relay to hand it over")
        wait_until(
            lambda: not [p for p in broker.rglob("*") if p.is_file() and p.stat().st_size == 0],
            timeout=30,
            what="the relay to clear what the full disk left unreadable",
        )
        stack.worker()  # it would not even start on the empty exchange table
        wait_until(
            lambda: Decision.objects.get(pk=decision.pk).status == Decision.Status.SUCCEEDED,
            timeout=60,
            what="the decision to go out once the broker has room",
        )
        assert receiver.delivery_ids() == [str(decision.delivery_id)]
        assert BrokerStatus.failing() is None
        assert BANNER not in squeezed(client.get("/").content.decode())
        assert "recovery_broker_failing 0.0" in client.get("/metrics").content.decode()
    finally:
        stack.stop()


def test_workers_beside_a_broker_disk_that_fills_keep_running_and_deliver_once_there_is_room(
    broker_disk, receiver, settings
):
    """Found by the chaos run's disk-pressure run: with kombu's own transport, a publish on the full disk
    left an empty message file, and every worker that took it stopped ("Unrecoverable error")."""
    operator = make_user("alice")
    agent, _ = make_agent(resume_url=receiver.url)
    stack = Stack("filesystem://", VAR_DIR=str(broker_disk), DELIVERY_LEASE_SECONDS="3", SWEEP_INTERVAL_SECONDS="0.3")
    try:
        workers = [stack.worker("w1"), stack.worker("w2")]
        relay = stack.relay()
        first = Decider(make_checkpoint(make_worked_example(agent=agent))).decide(
            by=operator, action="resume", instructions="go on", money_confirmed=True
        )
        wait_until(
            lambda: receiver.delivery_ids() == [str(first.delivery_id)],
            timeout=60,
            what="a delivery while the disk has room (the exchange table written)",
        )
        filler = broker_disk / "broker" / "filler"
        fill(filler)
        second = Decider(make_checkpoint(make_worked_example(agent=agent))).decide(
            by=operator, action="resume", instructions="go on", money_confirmed=True
        )
        wait_until(
            lambda: relay.output().count("relay tick failed") >= 3,
            timeout=60,
            what="the relay to find the broker's disk full three times",
        )
        time.sleep(3)  # the workers poll the folder every second: what a failed write left, they have taken
        assert [w.name for w in workers if not w.alive()] == [], "\n".join(w.output()[-2000:] for w in workers)
        assert_nothing_written_stays(broker_disk / "broker" / "out")  # nothing half written
        assert Decision.objects.get(pk=second.pk).status == Decision.Status.QUEUED

        filler.unlink()
        wait_until(
            lambda: Decision.objects.get(pk=second.pk).status == Decision.Status.SUCCEEDED,
            timeout=60,
            what="the decision to go out once the broker has room",
        )
        assert receiver.delivery_ids() == [str(first.delivery_id), str(second.delivery_id)]
        assert all(w.alive() for w in workers)
        assert BrokerStatus.failing() is None
    finally:
        stack.stop()
