"""console/folder_broker.py: the embedded default's broker writes each message whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from kombu import Connection
from kombu.exceptions import ChannelError

from console import folder_broker
from tests.stack import ROOT, tmpfs


def connection(folder, transport: str = "console.folder_broker:Transport") -> Connection:
    for sub in ("out", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return Connection(
        "filesystem://",
        transport=transport,
        transport_options={
            "data_folder_in": str(folder / "out"),
            "data_folder_out": str(folder / "out"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        },
    )


EMBEDDED = """
import django
django.setup()
from django.conf import settings
from console.celery import app
with app.connection_for_write() as conn:
    print(settings.CELERY_BROKER_TRANSPORT, type(conn.transport).__module__, type(conn.transport).__name__)
"""


def test_the_console_uses_it_for_the_embedded_default(tmp_path):
    """What the settings pick with no broker set (a subprocess: this run's own broker may be Redis)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CELERY_BROKER_URL", "CELERY_BROKER_TRANSPORT", "DJANGO_SETTINGS_MODULE")
    }
    env.update(DJANGO_SETTINGS_MODULE="console.settings", VAR_DIR=str(tmp_path), SECRET_KEY="t")
    out = subprocess.run(
        [sys.executable, "-c", EMBEDDED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["console.folder_broker:Transport", "console.folder_broker", "Transport"]


def test_a_message_is_renamed_into_place_whole_and_read_back(tmp_path):
    with connection(tmp_path) as conn:
        queue = conn.SimpleQueue("q")
        queue.put({"decision": 7, "text": "é" * 1000})
        files = sorted(p.name for p in (tmp_path / "out").iterdir())
        assert len(files) == 1 and files[0].endswith(".q.msg")  # no .partial left beside it
        message = queue.get(timeout=1)
        assert message.payload == {"decision": 7, "text": "é" * 1000}
        message.ack()
        queue.close()
    assert list((tmp_path / "out").iterdir()) == []


def test_a_write_that_fails_leaves_no_file_a_consumer_would_take(tmp_path, monkeypatch):
    with connection(tmp_path) as conn:
        # A queue name of its own: kombu remembers bindings per process, and would not write this folder's table.
        queue = conn.SimpleQueue("refused")  # the exchange table is written while there is room

        class FullDisk:
            """The file a write on a full disk gets: created, then every write refused."""

            def __init__(self, path, mode, **kwargs):
                self.handle = open(path, mode, **kwargs)  # noqa: SIM115 - closed in __exit__

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.handle.close()

            def write(self, data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(folder_broker, "open", FullDisk, raising=False)
        with pytest.raises(ChannelError, match="Cannot add file"):
            queue.put({"decision": 8})
        monkeypatch.undo()
        assert list((tmp_path / "out").iterdir()) == []  # kombu's own _put leaves an empty .msg here
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        queue.close()


def test_a_file_that_is_no_message_is_set_aside_and_the_next_message_still_taken(tmp_path, caplog):
    """What kombu's own ``_put`` left on a full disk (an empty ``.msg``, taken first as the oldest): set
    aside with an error in the log, never raised to the worker (which stopped: "Unrecoverable error")."""
    with connection(tmp_path) as conn:
        queue = conn.SimpleQueue("mixed")
        queue.put({"decision": 9})
        (whole,) = (tmp_path / "out").iterdir()
        empty = tmp_path / "out" / f"0_{'0' * 8}-left-by-a-full-disk.mixed.msg"  # sorts first
        empty.write_bytes(b"")
        with caplog.at_level("ERROR", logger="console.folder_broker"):
            message = queue.get(timeout=1)
        assert message.payload == {"decision": 9}
        message.ack()
        queue.close()
    assert list((tmp_path / "out").iterdir()) == []
    assert [p.name for p in (tmp_path / "processed").iterdir()] == [empty.name + folder_broker.UNREADABLE]
    assert f"{empty.name} is no message (0 bytes)" in caplog.text
    assert whole.name not in caplog.text


CONSUMER = """
import json, sys
from kombu import Connection
folder, transport = sys.argv[1], sys.argv[2]
options = {"data_folder_in": folder + "/out", "data_folder_out": folder + "/out", "store_processed": False,
           "processed_folder": folder + "/processed", "control_folder": folder + "/control"}
with Connection("filesystem://", transport=transport, transport_options=options) as conn:
    queue, taken, idle = conn.SimpleQueue("race"), [], 0
    while idle < 20:
        try:
            message = queue.get(timeout=0.05)
        except queue.Empty:
            idle += 1
            continue
        taken.append(message.payload["n"])
        message.ack()
        idle = 0
print(json.dumps(taken))
"""


@pytest.fixture
def broker_on_its_own_disk(tmp_path):
    """A broker folder on a tmpfs of its own: another filesystem than the system's temporary folder."""
    with tmpfs(tmp_path / "broker", "16m") as folder:
        yield folder


def test_workers_racing_for_messages_on_another_filesystem_each_take_every_message_once(broker_on_its_own_disk):
    """Found by make chaos's disk-pressure run: kombu's _get copied each message to /tmp across filesystems,
    two workers could both take one, and one read it half copied and stopped ("Unrecoverable error")."""
    folder = broker_on_its_own_disk
    with connection(folder) as conn:
        queue = conn.SimpleQueue("race")
        for n in range(1500):
            queue.put({"n": n, "pad": "x" * 2000})
        queue.close()
    consumers = [
        subprocess.Popen(
            [sys.executable, "-c", CONSUMER, str(folder), "console.folder_broker:Transport"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [consumer.communicate(timeout=120) for consumer in consumers]
    assert [consumer.returncode for consumer in consumers] == [0, 0, 0], [err[-2000:] for _out, err in results]
    taken = [n for out, _err in results for n in json.loads(out)]
    assert sorted(taken) == list(range(1500))  # every message taken, none twice
    assert sum(1 for out, _err in results if json.loads(out)) >= 2  # they did race for them
    assert list((folder / "out").iterdir()) == [] and list((folder / "processed").iterdir()) == []
