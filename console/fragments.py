"""Rendered fragments kept in this process's memory, keyed by a digest of everything they show (issue 25).

A queue page is fifty rows of one template and a workbench fifty steps of another; rendering them was most of
each page's time. A fragment's key digests exactly what its template reads, so it changes the moment anything
it shows changes, and a fragment nothing changed costs a dictionary lookup. The store is a bounded LRU per
process (gunicorn's workers each keep their own): no round trip, and the memory stays flat however many
fragments pass through it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from django.db.models import Model

KEPT = 4_000  # a few KiB each: some MiB per web process at most


class FragmentCache:
    """A thread-safe LRU of rendered HTML (gunicorn runs threads), bounded by ``size`` entries."""

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self.kept: OrderedDict[bytes, str] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: bytes) -> str | None:
        with self.lock:
            html = self.kept.get(key)
            if html is None:
                self.misses += 1
                return None
            self.kept.move_to_end(key)
            self.hits += 1
            return html

    def put(self, key: bytes, html: str) -> None:
        with self.lock:
            self.kept[key] = html
            self.kept.move_to_end(key)
            while len(self.kept) > self.size:
                self.kept.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.kept.clear()
            self.hits = self.misses = 0


def fields(obj: Model) -> list[tuple[str, object]]:
    """A model instance's loaded column values and annotations, not Django's bookkeeping nor related objects."""
    return sorted(
        (k, v)
        for k, v in vars(obj).items()
        if not k.startswith("_") and not hasattr(v, "_meta") and not isinstance(v, list)
    )


def digest(*parts: object) -> bytes:
    return hashlib.blake2b(repr(parts).encode(), digest_size=20).digest()
