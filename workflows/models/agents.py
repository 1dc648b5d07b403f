"""Agent runtimes: who may report workflows, and where decisions are delivered."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models

from .base import hash_token

User = settings.AUTH_USER_MODEL


class Agent(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=12, editable=False, help_text="First characters, to recognise a token.")
    resume_url = models.URLField(blank=True, help_text="Decisions are POSTed here; empty means the agent polls.")
    signing_secret = models.CharField(max_length=64, editable=False,
                                      help_text="HMAC-SHA256 key for X-Recovery-Signature.")
    owner = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                              help_text="Default owner of this agent's workflows.")
    silence_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Open a checkpoint when a running workflow is silent this long.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def register(cls, name: str, *, resume_url: str = "", owner: Any = None,
                 description: str = "") -> tuple[Agent, str]:
        """Create an agent; returns it with its token, which is never stored in clear."""
        agent = cls(name=name, resume_url=resume_url, owner=owner, description=description,
                    signing_secret=secrets.token_hex(32))
        token = agent.set_new_token()
        agent.save()
        return agent, token

    def set_new_token(self) -> str:
        token = "rc_" + secrets.token_urlsafe(32)
        self.token_hash = hash_token(token)
        self.token_prefix = token[:10]
        return token

    @classmethod
    def authenticate(cls, token: str) -> Agent | None:
        return cls.objects.filter(token_hash=hash_token(token), is_active=True).first()

    @property
    def silence_limit(self) -> timedelta:
        return timedelta(seconds=self.silence_seconds or settings.AGENT_SILENCE_SECONDS)
