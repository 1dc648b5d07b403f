"""Who a person is at the identity provider: the (issuer, subject) pair an ID token names.

Single sign-on finds the console's user by this pair, never by an e-mail address or a user
name (both can be reassigned at the provider, or typed into a local account by anyone).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

User = settings.AUTH_USER_MODEL


class SignInIdentity(models.Model):
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="sign_in_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_identity")]
        verbose_name_plural = "sign-in identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class SignInSession(models.Model):
    """A console session opened through the provider: what its back-channel logout ends (by the
    provider's session id ``sid``, or every session of the subject)."""

    identity = models.ForeignKey(SignInIdentity, on_delete=models.CASCADE, related_name="sessions")
    session_key = models.CharField(max_length=40, unique=True)
    sid = models.CharField(max_length=255, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"session of {self.identity}"
