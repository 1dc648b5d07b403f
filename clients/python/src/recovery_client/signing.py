"""Signatures on decision deliveries: ``X-Recovery-Signature: sha256=<hex HMAC-SHA256 of the raw body>``."""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["sign", "verify_signature"]


def sign(secret: str, body: bytes) -> str:
    """The ``X-Recovery-Signature`` header value for a raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """Check a delivery's signature on the raw bytes, in constant time."""
    return bool(header) and hmac.compare_digest(sign(secret, body), header or "")
