"""Who a Slack user is in the console: linked once, by a verified email address or a one-time link.

When a Slack user nobody linked presses a button, the console asks Slack who they are
(``users.info``; the app needs the ``users:read`` and ``users:read.email`` scopes). It links
them to the console user with that email address only when Slack says the person confirmed
the address (``is_email_confirmed``), the account is a live human one (not deleted, not a bot)
and exactly one active console user has the address (case-insensitive): an address two
accounts share proves neither. Anything else (unverified, no address, no match, two matches,
Slack unreachable) leaves the one-time link flow that the person confirms while signed in.
The link is recorded in the audit trail, like a confirmed one, with how it was made.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from ..models import Event
from ..models.slack import SlackLink, SlackWorkspace
from . import web

if TYPE_CHECKING:
    from ..models.base import Operator
    from ..shapes import JsonObject

log = logging.getLogger(__name__)


def who(workspace: SlackWorkspace, slack_user_id: str) -> tuple[str, str]:
    """(name, verified email) of a Slack user, for a person to recognise the account before linking it to
    themselves; ("", "") when Slack does not say (Slack down, no such user)."""
    try:
        answer = web.read(workspace, "users.info", user=slack_user_id)
    except web.SlackUnavailable:
        return "", ""
    user = answer.get("user")
    if not isinstance(user, dict) or user.get("id") != slack_user_id:
        return "", ""
    profile = user.get("profile")
    real_name = profile.get("real_name") if isinstance(profile, dict) else None
    name = str(real_name or user.get("real_name") or user.get("name") or "")[:200]
    return name, verified_email(workspace, slack_user_id, answer=answer)


def verified_email(workspace: SlackWorkspace, slack_user_id: str, *, answer: JsonObject | None = None) -> str:
    """The address Slack says this person confirmed, or "" (unconfirmed, none, a bot, deleted, or Slack down).
    ``answer``: users.info's answer, when the caller asked already."""
    if answer is None:
        try:
            answer = web.read(workspace, "users.info", user=slack_user_id)
        except web.SlackUnavailable as exc:
            log.info("users.info for %s: %s; the one-time link flow stays", slack_user_id, exc)
            return ""
    user = answer.get("user")
    if not isinstance(user, dict) or user.get("id") != slack_user_id:
        return ""
    profile = user.get("profile") if isinstance(user.get("profile"), dict) else {}
    email = str(profile.get("email") or "").strip() if isinstance(profile, dict) else ""
    if user.get("deleted") or user.get("is_bot") or user.get("is_email_confirmed") is not True or "@" not in email:
        return ""
    return email


def link_by_verified_email(workspace: SlackWorkspace, slack_user_id: str) -> SlackLink | None:
    """Link the Slack user to the one active console user with their verified address; None when not so."""
    email = verified_email(workspace, slack_user_id)
    if not email:
        return None
    matches: list[Operator] = list(get_user_model().objects.filter(is_active=True, email__iexact=email)[:2])
    if len(matches) != 1:
        log.info(
            "Slack user %s: %d active console users have their verified address; not linked",
            slack_user_id,
            len(matches),
        )
        return None
    [user] = matches
    try:
        with transaction.atomic():
            link = SlackLink.objects.create(
                workspace=workspace,
                slack_user_id=slack_user_id,
                user=user,
                how=SlackLink.How.VERIFIED_EMAIL,
                email=email,
                nonce=f"email-{secrets.token_urlsafe(24)}",
            )
            Event.record(
                None,
                Event.Verb.SLACK_LINKED,
                actor=user,
                data={
                    "workspace": workspace.team_id,
                    "slack_user": slack_user_id,
                    "how": SlackLink.How.VERIFIED_EMAIL.value,
                    "email": email,
                },
            )
    except IntegrityError:  # linked meanwhile (a second press racing this one): that link stands
        return SlackLink.objects.filter(workspace=workspace, slack_user_id=slack_user_id).first()
    return link
