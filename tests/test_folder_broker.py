"""console/folder_broker.py: the embedded default's broker writes each message whole or not at all."""

from __future__ import annotations

import errno
import os

import pytest
from kombu import Connection
from kombu.exceptions import ChannelError

from console import folder_broker


def connection(folder, transport: str = "console.folder_broker:Transport") -> Connection:
    for sub in ("out", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return Connection("filesystem://", transport=transport, transport_options={
        "data_folder_in": str(folder / "out"), "data_folder_out": str(folder / "out"),
        "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control"),
        "store_processed": False})


def test_the_console_uses_it_for_the_embedded_default(settings):
    if settings.CELERY_BROKER_URL != "filesystem://":
        pytest.skip("this run's broker is not the embedded default")
    assert settings.CELERY_BROKER_TRANSPORT == "console.folder_broker:Transport"
    from console.celery import app

    with app.connection_for_write() as conn:
        assert type(conn.transport) is folder_broker.Transport


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
