"""The embedded default's broker: kombu's filesystem transport, each message written whole or not at all.

kombu's ``_put`` creates the message file under its final name and then writes it. On a full disk the
write fails and an empty ``.msg`` file stays behind; a worker that takes it cannot decode it and stops
with "Unrecoverable error" (found by ``make chaos CHAOS_ARGS=--hard``: its disk-pressure run filled the
broker folder while workers ran, and every worker crashed again and again until the disk had room).
Here the message is written under a name no consumer reads (``….msg.partial``) and renamed into place,
which is atomic on one filesystem: a consumer sees a whole message or none, and a failed write removes
its file. The outbox still has the decision, so nothing is lost; the relay sends it again.

Selected in settings with ``CELERY_BROKER_TRANSPORT`` when ``CELERY_BROKER_URL`` is ``filesystem://``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL = ".partial"  # after ".msg": kombu's _get only reads names ending in "<queue>.msg"


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


class Transport(filesystem.Transport):
    Channel = Channel
