"""Email action links: signed, single-use, expiring links to the decision a notification is about.

The token is signed with Django's ``signing`` (the SECRET_KEY): it names the recipient, the
checkpoint, the action (claim; approve or reject a four-eyes proposal) and a random nonce. It
expires after ``ACTION_LINK_MAX_AGE_SECONDS``; it is used once: the ``ActionLinkUse`` row with its
nonce is written in the transaction that carries the action out (a unique nonce refuses a second).
Opening the link only shows a confirmation page (a GET never changes anything); the action runs
on its POST, signed in as the recipient, through the same domain methods as the workbench.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core import signing
from django.db import models
from django.urls import reverse
from django.utils import timezone

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint

User = settings.AUTH_USER_MODEL
SALT = "email-action-link"
CLAIM, APPROVE, REJECT = "claim", "approve", "reject"
ACTIONS = (CLAIM, APPROVE, REJECT)


class ActionLinkUse(models.Model):
    """A link that was used: its nonce can never act again."""

    nonce = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    checkpoint = models.ForeignKey("workflows.Checkpoint", on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=16)
    used_at = models.DateTimeField(default=timezone.now)
    outcome = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"{self.action} link of {self.user} on checkpoint {self.checkpoint_id}"


@dataclass(frozen=True)
class ActionLink:
    user_id: int
    checkpoint_id: int
    action: str
    nonce: str
    decision_id: int | None = None

    def token(self) -> str:
        return signing.dumps(
            {"u": self.user_id, "c": self.checkpoint_id, "a": self.action, "n": self.nonce, "d": self.decision_id},
            salt=SALT,
            compress=True,
        )

    def url(self) -> str:
        return str(settings.CONSOLE_URL).rstrip("/") + reverse("action_link", args=[self.token()])

    @classmethod
    def mint(cls, *, user: Operator, checkpoint_id: int, action: str, decision_id: int | None = None) -> ActionLink:
        return cls(user.pk, checkpoint_id, action, secrets.token_urlsafe(16), decision_id)

    @classmethod
    def read(cls, token: str) -> ActionLink:
        """The link a token carries; signing.SignatureExpired when too old, BadSignature when forged."""
        data = signing.loads(token, salt=SALT, max_age=settings.ACTION_LINK_MAX_AGE_SECONDS)
        try:
            link = cls(
                int(data["u"]),
                int(data["c"]),
                str(data["a"]),
                str(data["n"]),
                int(data["d"]) if data.get("d") is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise signing.BadSignature("Not an action link.") from exc
        if link.action not in ACTIONS:
            raise signing.BadSignature("Not an action link.")
        return link

    def was_used(self) -> bool:
        return ActionLinkUse.objects.filter(nonce=self.nonce).exists()


def links_for(checkpoint: Checkpoint | None, user: Operator | None) -> list[tuple[str, str]]:
    """(label, url) of what ``user`` may do from an email about ``checkpoint`` right now: approve or
    reject a proposal waiting for a second operator (not theirs), or claim it while unclaimed."""
    from ..roles import can_act

    if checkpoint is None or user is None or not can_act(user):
        return []
    decision = checkpoint.current_decision()
    if decision is not None and decision.may_be_approved_by(user):
        return [
            (
                label,
                ActionLink.mint(user=user, checkpoint_id=checkpoint.pk, action=action, decision_id=decision.pk).url(),
            )
            for label, action in (("Approve the proposal", APPROVE), ("Reject the proposal", REJECT))
        ]
    if checkpoint.is_unclaimed:
        return [("Claim it", ActionLink.mint(user=user, checkpoint_id=checkpoint.pk, action=CLAIM).url())]
    return []
