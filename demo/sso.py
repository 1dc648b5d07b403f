"""``make run SSO=1``: single sign-on against a real OpenID Connect provider on loopback, for trying it out.

The provider is the test suite's (django-oauth-toolkit in a Django project of its own,
``tests/oidc_provider/``), run as one more honcho process on ``SSO_PORT`` (the console's port + 1).
This module is the profile: the client the console is registered as, the people at the provider and
their groups, the group mapping the console applies, and the console's ``OIDC_*`` variables.

    python -m demo.sso prepare --port 8001 --console http://127.0.0.1:8000   # key, client secret, people
    python -m demo.sso env --port 8001 --console http://127.0.0.1:8000       # the console's variables (sh)
    python -m demo.sso serve --port 8001 --console http://127.0.0.1:8000     # the provider (honcho's "sso")

Secrets and passwords are made once, kept owner-only in ``var/sso/`` (dev only) and printed.
``manage.py seed_sso`` creates the teams the mapping names in the console.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import sys
from pathlib import Path
from typing import TypedDict

ROOT = Path(__file__).resolve().parent.parent
CLIENT_ID = "recovery-console-dev"
PROVIDER_NAME = "the demo identity provider"
GROUP_CLAIM = "groups"
# IdP group -> what it gives in the console (workflows/directory.py reads it at every sign-in).
GROUP_MAP: dict[str, list[str]] = {
    "rc-operators": ["role:operator"],
    "rc-tpm": ["role:tpm"],
    "rc-admins": ["role:admin"],
    "support": ["team:support"],
    "billing": ["team:billing"],
    "billing-leads": ["team:billing", "lead:billing"],
}
# The teams the mapping names, with the workflow kinds each one owns (routing rules), for seed_sso.
TEAMS = {"support": ("Support", ["refund", "ticket_triage"]), "billing": ("Billing", ["billing_dispute"])}
# Who is at the provider: username, groups (the console gives the role and teams the mapping says).
PEOPLE = (
    ("olivia", ["rc-operators", "support"]),  # operator in Support
    ("lena", ["rc-operators", "billing-leads"]),  # operator, lead of Billing
    ("tariq", ["rc-tpm"]),  # TPM
    ("ada", ["rc-admins", "support", "billing"]),  # admin in both teams
    ("mallory", ["marketing"]),  # in no mapped group: refused
)


def home(var_dir: Path | None = None) -> Path:
    return (var_dir or Path(os.environ.get("VAR_DIR", ROOT / "var"))) / "sso"


def _private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


class Person(TypedDict):
    """One person the provider signs in (``PEOPLE``), with the password made for them."""

    username: str
    email: str
    groups: list[str]
    password: str


class Profile(TypedDict, total=False):
    """What ``prepare`` keeps in ``profile.json``: the client secret and the people."""

    client_secret: str
    people: list[Person]


def prepare(where: Path) -> Profile:
    """The provider's signing key, the client secret and the people's passwords: made once, then reused."""
    key = where / "key.pem"
    if not key.exists():
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _private(key, pem.decode())
    try:
        profile: Profile = json.loads((where / "profile.json").read_text())
    except (FileNotFoundError, ValueError):
        profile = {}
    profile.setdefault("client_secret", secrets.token_urlsafe(32))
    known = {p["username"]: p for p in profile.get("people", [])}
    profile["people"] = [
        {
            "username": name,
            "email": f"{name}@sso.demo.invalid",
            "groups": groups,
            "password": (known[name]["password"] if name in known else "") or secrets.token_urlsafe(9),
        }
        for name, groups in PEOPLE
    ]
    _private(where / "profile.json", json.dumps(profile, indent=2) + "\n")
    return profile


def provider_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def console_env(profile: Profile, port: int) -> dict[str, str]:
    """The console's single sign-on variables (README "Single sign-on") for this provider."""
    url = provider_url(port)
    return {
        "OIDC_PROVIDER_NAME": PROVIDER_NAME,
        "OIDC_RP_CLIENT_ID": CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": profile["client_secret"],
        "OIDC_OP_ISSUER": f"{url}/o",
        "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{url}/o/authorize/",
        "OIDC_OP_TOKEN_ENDPOINT": f"{url}/o/token/",
        "OIDC_OP_USER_ENDPOINT": f"{url}/o/userinfo/",
        "OIDC_OP_JWKS_ENDPOINT": f"{url}/o/.well-known/jwks.json",
        "OIDC_RP_SCOPES": "openid email profile groups",
        "OIDC_GROUP_CLAIM": GROUP_CLAIM,
        "OIDC_GROUP_MAP": json.dumps(GROUP_MAP),
    }


def provider_command(where: Path, port: int, console: str) -> tuple[list[str], dict[str, str]]:
    """How to start the provider: its command line and environment."""
    profile = json.loads((where / "profile.json").read_text())
    (where / "people.json").write_text(json.dumps(profile["people"]))
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(where / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY": str(where / "key.pem"),
        "OIDC_PROVIDER_ISSUER": f"{provider_url(port)}/o",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return (
        [
            sys.executable,
            "-m",
            "tests.oidc_provider.serve",
            str(port),
            CLIENT_ID,
            profile["client_secret"],
            f"{console.rstrip('/')}/oidc/callback/",
            str(where / "people.json"),
        ],
        env,
    )


def sign_in_lines(profile: Profile, port: int, console: str) -> list[str]:
    mapping = {group: ", ".join(grants) for group, grants in GROUP_MAP.items()}
    lines = [
        f"Single sign-on (dev only; kept in {home()}/profile.json): {console.rstrip('/')}/login/ → "
        f'"Sign in with {PROVIDER_NAME}" (provider at {provider_url(port)})',
        f"  {'user':<10}{'password':<16}groups → console",
    ]
    for person in profile["people"]:
        grants = "; ".join(f"{g}: {mapping[g]}" for g in person["groups"] if g in mapping) or "nothing (refused)"
        lines.append(f"  {person['username']:<10}{person['password']:<16}{grants}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m demo.sso", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("prepare", "env", "serve"))
    parser.add_argument("--port", type=int, required=True, help="The provider's port.")
    parser.add_argument("--console", required=True, help="The console's base URL (for the redirect URI).")
    args = parser.parse_args(argv)
    where = home()
    if args.action == "prepare":
        prepare(where)
    elif args.action == "env":
        for name, value in console_env(prepare(where), args.port).items():
            print(f"export {name}={shlex.quote(value)}")
    else:
        profile = prepare(where)
        command, env = provider_command(where, args.port, args.console)
        print("\n".join(sign_in_lines(profile, args.port, args.console)), flush=True)
        # Replaced, not a child: honcho (or a test) stopping this process stops the provider itself.
        os.execvpe(command[0], command, env)  # noqa: S606  # our own interpreter and module, no shell


if __name__ == "__main__":
    main()
