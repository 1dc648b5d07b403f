"""Delivery signatures: HMAC-SHA256 of the raw body, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

from recovery_client import sign, verify_signature

BODY = b'{"action": "resume", "delivery_id": "d-1"}'


def test_the_signature_is_the_hex_hmac_sha256_of_the_raw_body() -> None:
    assert sign("s3cret", BODY) == "sha256=" + hmac.new(b"s3cret", BODY, hashlib.sha256).hexdigest()


def test_a_signature_verifies_only_with_the_same_secret_and_the_same_bytes() -> None:
    header = sign("s3cret", BODY)
    assert verify_signature("s3cret", BODY, header)
    assert not verify_signature("other", BODY, header)
    assert not verify_signature("s3cret", BODY + b" ", header)
    assert not verify_signature("s3cret", BODY, None)
    assert not verify_signature("s3cret", BODY, "")
    assert not verify_signature("s3cret", BODY, header.removeprefix("sha256="))
