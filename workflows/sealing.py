"""Signing secrets at rest: encrypted (Fernet, from ``cryptography``) with keys from the environment.

The console must know a signing secret to sign deliveries, so it cannot keep only a hash (as
it does for tokens). It keeps it encrypted: a copy of the database alone does not let anyone
sign a delivery an agent would accept. ``SIGNING_SECRET_KEYS`` lists Fernet keys, the first
encrypts, all decrypt (rotation: put a new key first; ``reseal`` re-encrypts a stored value);
without it a key is derived from ``SECRET_KEY``, which also comes from the environment.
"""

from __future__ import annotations

import base64
import hashlib
from typing import overload

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

PREFIX = "fernet:"


def _keys() -> MultiFernet:
    keys = list(settings.SIGNING_SECRET_KEYS) or [
        base64.urlsafe_b64encode(
            hashlib.sha256(b"recovery-console signing secrets\0" + settings.SECRET_KEY.encode()).digest()
        ).decode()
    ]
    return MultiFernet([Fernet(k) for k in keys])


def seal(secret: str) -> str:
    return PREFIX + _keys().encrypt(secret.encode()).decode() if secret else ""


def unseal(stored: str) -> str:
    if not stored:
        return ""
    if not stored.startswith(PREFIX):
        raise ValueError("A signing secret is stored unencrypted; run the migrations.")
    try:
        return _keys().decrypt(stored[len(PREFIX) :].encode()).decode()
    except InvalidToken as exc:
        raise ValueError(
            "A signing secret cannot be decrypted with SIGNING_SECRET_KEYS (or SECRET_KEY); "
            "put the key it was sealed with back in the list."
        ) from exc


def reseal(stored: str) -> str:
    """Re-encrypt with the first key (after a key rotation)."""
    return PREFIX + _keys().rotate(stored[len(PREFIX) :].encode()).decode() if stored else ""


class Sealed(property):
    """A secret a model reads and writes in the clear and keeps sealed in one of its fields.

        signing_secret = Sealed("sealed_signing_secret")

    Reading unseals the field, writing seals into it. A ``property`` to Django, so a model's
    constructor takes it by name like its fields.
    """

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(self._unsealed, self._seal_into)

    def _unsealed(self, instance: object) -> str:
        return unseal(getattr(instance, self.field))

    def _seal_into(self, instance: object, secret: str) -> None:
        setattr(instance, self.field, seal(secret))

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Sealed: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> str: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Sealed | str:
        return self if instance is None else self._unsealed(instance)

    def __set__(self, instance: object, secret: str) -> None:
        self._seal_into(instance, secret)
