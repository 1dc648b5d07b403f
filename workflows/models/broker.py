"""Whether the broker is taking the messages handed to it: one row, written only when that changes.

Decisions never depend on the broker to be kept (the decision row is its own outbox entry), but
an operator who approves a resume must be told when it cannot go out: a Redis that is down, or
the embedded default's broker folder on a full disk. Whoever hands a message to the broker (the
web request right after a decision commits, the outbox relay, the notification relay) reports
the outcome here; every page shows a banner while it is failing, and ``/metrics`` a gauge.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, models
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

ROW = 1
LOW_DISK_BYTES = 1024 * 1024  # below this, a folder broker is said to be out of room
SETTLED_SECONDS = 2.0  # a control file younger than this may be mid-write by another process

log = logging.getLogger(__name__)


def repair_folder_broker() -> list[Path]:
    """Remove what a full disk left unreadable in the folder broker: exchange tables and empty messages.

    kombu's filesystem transport keeps each exchange's bindings as a JSON file; a bind on a full disk
    creates the file and cannot write it, and from then on every publish and every worker start fails
    to parse it, long after the disk has room again. Such a file is removed (once no writer can still be
    filling it); the next bind writes it again, and the outbox sends what a missing binding dropped.
    A message file created and never written (kombu's own ``_put`` on a full disk, in a folder written
    before ``console.folder_broker``) is removed too: a worker would fail to decode it, and the decision
    it was for is still due in the outbox; so is a ``.partial`` file a killed writer never renamed. Does
    nothing for other brokers.
    """
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    folder = options.get("control_folder")
    if not folder or not str(getattr(settings, "CELERY_BROKER_URL", "")).startswith("filesystem"):
        return []
    removed = []
    outbox = options.get("data_folder_out")
    messages = [*Path(outbox).glob("*.msg"), *Path(outbox).glob("*.msg.partial")] if outbox else []
    for message in messages:  # created, never written (or a writer killed before its rename): no message at all
        with contextlib.suppress(OSError):
            stat = message.stat()
            partial = message.suffix == ".partial"
            if (partial or stat.st_size == 0) and time.time() - stat.st_mtime >= SETTLED_SECONDS:
                message.unlink(missing_ok=True)
                removed.append(message)
    for table in Path(folder).glob("*.exchange"):
        try:
            if time.time() - table.stat().st_mtime < SETTLED_SECONDS:
                continue
            json.loads(table.read_bytes() or b"not json")
        except ValueError:
            table.unlink(missing_ok=True)
            removed.append(table)
            log.warning("broker folder: removed %s, left unreadable by a write on a full disk", table)
        except OSError:
            continue  # gone meanwhile, or unreadable for another reason: the refusal says which
    return removed


def diagnosis(exc: BaseException) -> str:
    """The error in a person's words, with what the folder broker's disk has left when it is short."""
    error = f"{type(exc).__name__}: {exc}".strip()
    folder = (getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}).get("data_folder_in")
    if folder and Path(folder).exists():
        free = shutil.disk_usage(folder).free
        if free < LOW_DISK_BYTES:
            return (f"The broker folder {folder} is out of disk space ({free:,} bytes free): {error}")[:1000]
    return error[:1000]


class BrokerStatus(models.Model):
    id = models.PositiveSmallIntegerField(primary_key=True, default=ROW)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="The first refusal since the broker last took a message."
    )
    last_error = models.TextField(blank=True)
    failures = models.PositiveIntegerField(default=0, help_text="Refusals since failing_since.")
    last_failure_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "broker status"

    def __str__(self) -> str:
        return f"failing since {self.failing_since:%Y-%m-%d %H:%M}" if self.failing_since else "taking messages"

    @classmethod
    def refused(cls, exc: BaseException) -> None:
        """The broker refused a message. Never raises: reporting must not hide the refusal it reports."""
        now, error = timezone.now(), diagnosis(exc)
        with contextlib.suppress(DatabaseError):  # the database is the other half of the outage: the log has it
            updated = cls.objects.filter(pk=ROW).update(
                failing_since=Coalesce(F("failing_since"), Value(now)),
                last_error=error,
                failures=F("failures") + 1,
                last_failure_at=now,
            )
            if not updated:
                cls.objects.get_or_create(
                    pk=ROW, defaults={"failing_since": now, "last_error": error, "failures": 1, "last_failure_at": now}
                )

    @classmethod
    def took(cls) -> None:
        """The broker took a message: clear a failure (one UPDATE that matches nothing while all is well)."""
        with contextlib.suppress(DatabaseError):
            cls.objects.filter(pk=ROW, failing_since__isnull=False).update(failing_since=None, failures=0)

    @classmethod
    def failing(cls) -> BrokerStatus | None:
        return cls.objects.filter(pk=ROW, failing_since__isnull=False).first()
