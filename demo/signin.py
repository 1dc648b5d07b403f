"""The demo's sign-in block (URL and the demo users' passwords), printed by ``seed_demo`` and again by the
fleet once everything is up: by then the processes' start-up logs have pushed the first one off screen."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .store import demo_dir

if TYPE_CHECKING:
    from workflows.shapes import Json, JsonObject

USERS = (("operator", "operator"), ("tpm", "tpm"), ("admin", "admin"))  # username, role


def passwords() -> JsonObject:
    """The demo passwords ``seed_demo`` keeps in ``var/demo/users.json`` (dev only)."""
    try:
        data: JsonObject = json.loads((demo_dir() / "users.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data


def sign_in_lines(login_url: str, known: Mapping[str, Json] | None = None) -> list[str]:
    known = passwords() if known is None else known
    lines = [
        f"Demo logins (dev only; kept in {demo_dir() / 'users.json'}): {login_url}",
        f"  {'user':<10}{'role':<10}password",
    ]
    for username, role in USERS:
        shown = known.get(username) or f"(not on file: manage.py changepassword {username})"
        lines.append(f"  {username:<10}{role:<10}{shown}")
    return lines
