"""The only module that makes outbound HTTP requests: decisions, replays and webhooks, over checked connections.

A resume URL (or a notification webhook) is typed in by an admin and answered by someone else's program, so
every outbound request is held to these rules (README, "Delivery safety"):

- **http(s) only**, and https only where ``DELIVERY_REQUIRE_HTTPS`` (on when
  DEBUG is off) unless the agent's admin opted out (``Agent.allow_plain_http``).
- **Resolve, check, connect to the checked address.** The host is resolved
  once; every address it resolves to must be allowed; the connection goes to
  that address, with the name kept for the Host header, TLS SNI and the
  certificate check. A second DNS answer (rebinding) is never consulted.
- **Private targets refused** where ``DELIVERY_REFUSE_PRIVATE_ADDRESSES`` (on
  when DEBUG is off): loopback, private, link-local, shared, reserved and
  multicast addresses, unless inside ``DELIVERY_ALLOWED_NETWORKS`` (the demo
  fleet, on-premise agents). Cloud metadata endpoints are refused always.
- **No redirects**: a 3xx is a failed attempt whose reason names the redirect.
- **No proxies**: urllib3 never reads ``HTTP(S)_PROXY``; the connection is direct.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError
from recovery_client import sign

from .models import Decision, ReplayRun

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance metadata: never a resume endpoint, whatever the allow-list says.
METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "169.254.169.253")
)
ANSWER_MAX_BYTES = 1024 * 1024  # an agent's answer is read up to this, never unbounded


class DeliveryError(Exception):
    """The agent runtime did not accept the delivery; the attempt is retried."""


class UnsafeTarget(DeliveryError):
    """The resume URL points somewhere deliveries may not go; refused before connecting."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # the name as written (lower-case), IPv6 without brackets
    port: int
    path: str  # path and query

    @property
    def host_header(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == {"http": 80, "https": 443}[self.scheme] else f"{name}:{self.port}"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def parse_target(
    url: str,
    *,
    allow_plain_http: bool = False,
    noun: str = "resume URL",
    owner: str = "agent (an on-premise agent on a trusted network)",
) -> Target:
    """The URL's scheme, host and port, or UnsafeTarget saying which rule it breaks (no DNS here).

    ``noun`` and ``owner`` name what the URL is and whose admin may allow plain http, in the reasons."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeTarget(f"{url!r} is not a valid URL: {exc}.") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".")
    if scheme not in ("http", "https"):
        raise UnsafeTarget(f"Only http and https {noun}s are allowed, not {scheme or 'no scheme'}.")
    if scheme == "http" and settings.DELIVERY_REQUIRE_HTTPS and not allow_plain_http:
        raise UnsafeTarget(
            f"{noun[0].upper()}{noun[1:]}s must use https here; an admin can allow plain http for this {owner}."
        )
    if not host:
        raise UnsafeTarget(f"{url!r} names no host.")
    if parts.username or parts.password:
        raise UnsafeTarget(f"{noun[0].upper()}{noun[1:]}s may not carry a user name or password.")
    if host in METADATA_HOSTS or host.endswith(".metadata.google.internal"):
        raise UnsafeTarget(f"Deliveries may not go to {host}: it is a cloud metadata service.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def refusal(address: IPAddress) -> str | None:
    """Why deliveries may not connect to ``address``; None when they may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is loopback
    if address in METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address"
    if any(address in network for network in _allowed_networks()):
        return None
    if not settings.DELIVERY_REFUSE_PRIVATE_ADDRESSES:
        return None
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_link_local:
        return f"{address} is a link-local address"
    if address.is_private:
        return f"{address} is a private address"
    if address.is_multicast or address.is_unspecified or address.is_reserved or not address.is_global:
        return f"{address} is not a public address"
    return None


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.DELIVERY_ALLOWED_NETWORKS]


def resolve(target: Target, *, what: str = "agent's resume host") -> IPAddress:
    """The address to connect to: every address the name resolves to must be allowed (no mixed answers)."""
    try:
        literal = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise DeliveryError(f"The {what} {target.host} does not resolve: {exc}.") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    for address in addresses:
        reason = refusal(address)
        if reason:
            raise UnsafeTarget(
                f"Deliveries may not go to {target.host}: {reason} "
                "(DELIVERY_ALLOWED_NETWORKS lists the networks allowed anyway)."
            )
    return addresses[0]


def check_url(
    url: str,
    *,
    allow_plain_http: bool = False,
    noun: str = "resume URL",
    owner: str = "agent (an on-premise agent on a trusted network)",
) -> None:
    """For the admin and ``create_agent``: ValidationError when deliveries could never go there.

    A name that does not resolve yet is accepted (it is checked again at every delivery).
    """
    try:
        target = parse_target(url, allow_plain_http=allow_plain_http, noun=noun, owner=owner)
        resolve(target)
    except UnsafeTarget as exc:
        raise ValidationError(str(exc), code="unsafe_url") from None
    except DeliveryError:
        return


def check_resume_url(url: str, *, allow_plain_http: bool = False) -> None:
    check_url(url, allow_plain_http=allow_plain_http)


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_plain_http: bool = False,
    timeout: float | None = None,
    max_bytes: int = ANSWER_MAX_BYTES,
    what: str = "the agent's resume endpoint",
    noun: str = "resume URL",
    owner: str = "agent (an on-premise agent on a trusted network)",
) -> Answer:
    """POST ``body`` to ``url`` under the rules above; any answer, or DeliveryError when none came.

    ``what`` names the far end in the reasons ("the agent's resume endpoint", "the webhook")."""
    target = parse_target(url, allow_plain_http=allow_plain_http, noun=noun, owner=owner)
    address = resolve(target, what=f"{what.removeprefix('the ')} host")
    seconds = settings.DELIVERY_TIMEOUT_SECONDS if timeout is None else timeout
    limits = urllib3.Timeout(total=seconds)
    if target.scheme == "https":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            str(address),
            target.port,
            timeout=limits,
            retries=False,
            maxsize=1,
            cert_reqs="CERT_REQUIRED",
            server_hostname=target.host,
            assert_hostname=target.host,
        )
    else:
        pool = urllib3.HTTPConnectionPool(str(address), target.port, timeout=limits, retries=False, maxsize=1)
    try:
        response = pool.urlopen(
            "POST",
            target.path,
            body=body,
            headers={**headers, "Host": target.host_header},
            redirect=False,
            retries=False,
            preload_content=False,
            assert_same_host=False,
        )
        try:
            answer = Answer(response.status, dict(response.headers), response.read(max_bytes))
        finally:
            response.release_conn()
    except urllib3.exceptions.NewConnectionError as exc:  # a subclass of ConnectTimeoutError in urllib3 2
        raise DeliveryError(f"{what[0].upper()}{what[1:]} could not be reached: {exc}.") from exc
    except urllib3.exceptions.TimeoutError as exc:
        raise DeliveryError(f"{what[0].upper()}{what[1:]} did not answer within {seconds:g} s.") from exc
    except urllib3.exceptions.HTTPError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DeliveryError(f"{what[0].upper()}{what[1:]} could not be reached: {reason}.") from exc
    finally:
        pool.close()
    return answer


def deliver(decision: Decision) -> int:
    """POST the decision to the agent's resume endpoint; returns the 2xx status or raises DeliveryError."""
    agent = decision.agent
    body = json.dumps(decision.payload(), sort_keys=True).encode()
    answer = post(
        agent.resume_url,
        body,
        {
            "Content-Type": "application/json",
            "X-Recovery-Delivery": str(decision.delivery_id),
            "X-Recovery-Signature": sign(agent.signing_secret, body),
            "User-Agent": "recovery-console/1",
        },
        allow_plain_http=agent.allow_plain_http,
    )
    if 300 <= answer.status < 400:
        location = answer.headers.get("Location", "(no Location)")[:200]
        raise DeliveryError(
            f"The agent answered {answer.status} redirecting to {location}; deliveries never "
            "follow redirects, so the decision did not arrive. Fix the agent's resume URL."
        )
    if not 200 <= answer.status < 300:
        raise DeliveryError(f"The agent answered {answer.status} {_reason(answer.status)}.")
    return answer.status


def stand_down(decision: Decision) -> int:
    """After a failover, tell the replaced agent to stop working on the workflow (signed like a decision)."""
    agent, _ = decision.failover_agents()
    body = json.dumps(decision.stand_down_payload(), sort_keys=True).encode()
    answer = post(
        agent.resume_url,
        body,
        {
            "Content-Type": "application/json",
            "X-Recovery-Delivery": decision.stand_down_payload()["delivery_id"],
            "X-Recovery-Signature": sign(agent.signing_secret, body),
            "User-Agent": "recovery-console/1",
        },
        allow_plain_http=agent.allow_plain_http,
    )
    if not 200 <= answer.status < 300:
        raise DeliveryError(f"The agent answered {answer.status} {_reason(answer.status)}.")
    return answer.status


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


# --- replays (issue 11) -----------------------------------------------------------------


class ReplayError(Exception):
    """The runtime could not replay: unreachable, refused, too slow or answered garbage. Ends the replay."""


REPLAY_ANSWER_MAX_BYTES = 4 * 1024 * 1024  # up to REPLAY_MAX_STEPS outputs


def replay(run: ReplayRun) -> object:
    """POST the signed replay request under the delivery rules above; the parsed JSON answer (results inline,
    any JSON value: ``parse_results`` checks its shape), or None when the runtime accepted it (202) and will
    post its results later. ReplayError with the reason."""
    agent = run.agent
    body = json.dumps(run.request_payload(), sort_keys=True).encode()
    try:
        answer = post(
            agent.replay_url,
            body,
            {
                "Content-Type": "application/json",
                "X-Recovery-Replay": str(run.replay_id),
                "X-Recovery-Signature": sign(agent.signing_secret, body),
                "User-Agent": "recovery-console/1",
            },
            allow_plain_http=agent.allow_plain_http,
            timeout=settings.REPLAY_TIMEOUT_SECONDS,
            max_bytes=REPLAY_ANSWER_MAX_BYTES + 1,
            what="the agent's replay endpoint",
        )
    except DeliveryError as exc:
        raise ReplayError(str(exc)) from exc
    if answer.status == 202:
        return None
    if not 200 <= answer.status < 300:
        raise ReplayError(
            f"The agent's replay endpoint answered {answer.status} {_reason(answer.status)}"
            + (" (replays never follow redirects)." if 300 <= answer.status < 400 else ".")
        )
    if len(answer.body) > REPLAY_ANSWER_MAX_BYTES:
        raise ReplayError(f"The runtime's answer is larger than {REPLAY_ANSWER_MAX_BYTES} bytes.")
    try:
        parsed: object = json.loads(answer.body)
    except ValueError:
        raise ReplayError(
            f"The runtime answered {answer.status} with a body that is not JSON: "
            f"{answer.body[:120].decode(errors='replace')!r}."
        ) from None
    return parsed
