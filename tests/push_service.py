"""A loopback Web Push service (RFC 8030) that checks what the console sends it, and the browsers that subscribe.

``PushService`` is a small threaded HTTP server the test starts. ``browser()`` makes a subscription the way a
browser's ``PushManager.subscribe`` does: an endpoint at this service, a fresh P-256 key pair and a 16-byte
auth secret (``toJSON()``'s shape); the service keeps the private half to read what arrives. For every POST it
checks, as a real push service and the receiving browser would:

- ``Content-Encoding: aes128gcm`` and a ``TTL`` header (RFC 8030), an ``Urgency`` when given;
- ``Authorization: vapid t=<JWT>, k=<key>`` (RFC 8292): ``k`` is the console's VAPID public key, the JWT is
  ES256-signed by it (verified with PyJWT and cryptography), its ``aud`` is this service's origin, ``exp`` is in
  the future and at most 24 hours away, and ``sub`` is a mailto: or https: contact;
- the body decrypts (RFC 8291, ``http_ece``) with the subscription's private key and auth secret.

A request that fails a check is answered 400 and the reason kept in ``problems``; otherwise it answers the next
status the test queued with ``answer(...)`` (201 by default) and keeps the decrypted message in ``received``.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    claims: dict[str, Any]
    message: dict[str, Any]


@dataclass
class Browser:
    """One subscribed browser: what it sends the console, and the private key it decrypts with."""

    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    subscription: dict[str, Any] = field(default_factory=dict)


class PushService:
    def __init__(self, vapid_public_key: str) -> None:
        self.vapid_public_key = vapid_public_key
        self.browsers: dict[str, Browser] = {}  # path -> browser
        self.received: list[Received] = []
        self.problems: list[str] = []
        self.answers: list[int] = []
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with service.lock:
                    browser = service.browsers.get(self.path)
                    queued = service.answers.pop(0) if service.answers else None
                try:
                    if browser is None:
                        status = 404
                    else:
                        received = service.check(self.path, headers, body, browser)
                        status = queued or 201
                        if 200 <= status < 300:
                            with service.lock:
                                service.received.append(received)
                except AssertionError as exc:
                    with service.lock:
                        service.problems.append(str(exc))
                    status = 400
                self.send_response(status)
                self.send_header("Content-Length", "0")
                if status == 201:
                    self.send_header("Location", f"{self.path}/message/{secrets.token_hex(4)}")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def browser(self) -> Browser:
        """A new subscription at this service, as ``PushSubscription.toJSON()`` gives it."""
        private_key = ec.generate_private_key(ec.SECP256R1())
        public = private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        auth, path = secrets.token_bytes(16), f"/push/{secrets.token_urlsafe(12)}"
        browser = Browser(self.origin + path, private_key, auth)
        browser.subscription = {
            "endpoint": browser.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": b64(public), "auth": b64(auth)},
        }
        with self.lock:
            self.browsers[path] = browser
        return browser

    def answer(self, *statuses: int) -> None:
        with self.lock:
            self.answers += list(statuses)

    def check(self, path: str, headers: dict[str, str], body: bytes, browser: Browser) -> Received:
        assert headers.get("content-encoding") == "aes128gcm", (
            f"Content-Encoding is {headers.get('content-encoding')!r}"
        )
        assert headers.get("ttl", "").isdigit(), f"TTL is {headers.get('ttl')!r}"
        scheme, _, params = headers.get("authorization", "").partition(" ")
        assert scheme == "vapid", f"Authorization scheme is {scheme!r}"
        parts = dict(p.strip().split("=", 1) for p in params.split(","))
        assert parts.get("k") == self.vapid_public_key, "k is not the console's VAPID public key"
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(parts["k"]))
        try:
            claims = jwt.decode(
                parts.get("t", ""),
                key,
                algorithms=["ES256"],
                audience=self.origin,
                options={"require": ["aud", "exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise AssertionError(f"the VAPID JWT does not verify: {exc}") from None
        assert time.time() < claims["exp"] <= time.time() + 24 * 3600, f"exp {claims['exp']} is not within 24 hours"
        assert str(claims["sub"]).startswith(("mailto:", "https:")), f"sub is {claims['sub']!r}"
        try:
            plaintext = http_ece.decrypt(
                body, private_key=browser.private_key, auth_secret=browser.auth, version="aes128gcm"
            )
        except Exception as exc:
            raise AssertionError(f"the body does not decrypt with the subscription's keys: {exc!r}") from None
        return Received(path, headers, claims, json.loads(plaintext))
