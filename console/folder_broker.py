"""The embedded default's broker: kombu's filesystem transport, each message written whole or not at all.

kombu's ``_put`` creates the message file under its final name and then writes it. On a full disk the
write fails and an empty ``.msg`` file stays behind; a worker that takes it cannot decode it and stops
with "Unrecoverable error" (found by ``make chaos CHAOS_ARGS=--hard``: its disk-pressure run filled the
broker folder while workers ran, and every worker crashed again and again until the disk had room).
Here the message is written under a name no consumer reads (``….msg.partial``) and renamed into place,
which is atomic on one filesystem: a consumer sees a whole message or none, and a failed write removes
its file. The outbox still has the decision, so nothing is lost; the relay sends it again.

Taking a message is made atomic too. kombu's ``_get`` with ``store_processed`` off moves the file to the
system's temporary folder; when that is another filesystem (the chaos run's broker folder is a tmpfs of
its own; ``/tmp`` often is one), the move is a copy then a delete, two workers can both copy one message
to the same temporary path, and one reads it half written: "Unrecoverable error" again, and the message
taken twice. Here a worker claims a file by renaming it into the processed folder beside it, on the same
filesystem: one worker wins, the others move on. A file that still is no message (one left by kombu's
own ``_put`` before this transport) is set aside with an error in the log, never a worker's crash: the
outbox sends its decision again.

Selected in settings with ``CELERY_BROKER_TRANSPORT`` when ``CELERY_BROKER_URL`` is ``filesystem://``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

PARTIAL = ".partial"  # after ".msg": a consumer only takes names ending in "<queue>.msg"
UNREADABLE = ".unreadable"  # a claimed file that is no message, kept in the processed folder for a person

log = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    # kombu's stubs name the argument "payload" here and "message" on AbstractChannel: one of them must differ.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        """Put a message on ``queue``: written in full under a partial name, then renamed into place."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL
        try:
            with open(partial, "wb", buffering=0) as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """Take the oldest message on ``queue``: claimed by a rename on one filesystem, so by one worker."""
        wanted = f"{queue}.msg"
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != wanted:
                continue
            claimed = os.path.join(self.processed_folder, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), claimed)
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise ChannelError(
                        "the broker's processed folder must be on the data folder's "
                        "filesystem: a message is taken by renaming it there"
                    ) from exc
                continue  # another worker took it first
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {claimed!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
            except ValueError:
                log.error(
                    "broker folder: %s is no message (%d bytes); set aside as %s%s",
                    filename,
                    len(payload),
                    claimed,
                    UNREADABLE,
                )
                with contextlib.suppress(OSError):
                    os.replace(claimed, claimed + UNREADABLE)
                continue
            if not self.store_processed:
                with contextlib.suppress(OSError):
                    os.remove(claimed)
            return message
        raise Empty()


class Transport(filesystem.Transport):
    Channel = Channel
