"""Agent runtimes: who may report workflows, and where decisions are delivered."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import models, transaction

from ..sealing import Sealed
from .base import hash_token

if TYPE_CHECKING:
    from collections.abc import Collection

    from .base import Operator

User = settings.AUTH_USER_MODEL
log = logging.getLogger(__name__)


def _token_key(token_hash: str) -> str:
    return f"recovery-console:agent-token:{token_hash}"


def forget_tokens(token_hashes: Iterable[str]) -> None:
    """Drop cached agents now and again after the commit, so no request re-caches the old row in between."""
    keys = [_token_key(h) for h in set(token_hashes) if h]

    def drop() -> None:
        try:
            cache.delete_many(keys)
        except Exception:  # the TTL still bounds how long a revoked token can be seen
            log.exception(
                "Could not drop cached agent tokens; they expire within %ss", settings.AGENT_TOKEN_CACHE_SECONDS
            )

    drop()
    transaction.on_commit(drop)


class AgentQuerySet(models.QuerySet["Agent"]):
    def update(self, **kwargs: Any) -> int:
        hashes = list(self.values_list("token_hash", flat=True))
        updated = super().update(**kwargs)
        forget_tokens(hashes + [kwargs.get("token_hash", "")])
        return updated


class Agent(models.Model):
    # What a list that names the agent never reads: its secrets and its settings (queue and incident rows).
    NOT_IN_A_LIST = ("description", "token_hash", "sealed_signing_secret", "capabilities", "fork_edits", "kinds")

    class Capability(models.TextChoices):
        """What a runtime can do beyond API v1; agents advertise them, and the UI hides what they cannot."""

        REPLAY = "replay", "Replay a step range without side effects"
        FORK = "fork", "Restart from a step as a new workflow"
        FAILOVER = "failover", "Take over another agent's workflows as a standby"
        # Recovery drills (models/drills.py): the runtime carries out drill faults; a sandbox takes its money.
        DRILL = "drill", "Carry out recovery drill faults"
        DRILL_SANDBOX = "drill_sandbox", "Run drilled money effects against a sandbox"

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=12, editable=False, help_text="First characters, to recognise a token.")
    resume_url = models.URLField(blank=True, help_text="Decisions are POSTed here; empty means the agent polls.")
    allow_plain_http = models.BooleanField(
        default=False,
        help_text="Deliver over plain http even where https is required: only for an on-premise "
        "agent on a network you trust.",
    )
    # Encrypted at rest (workflows/sealing.py); read and set it through ``signing_secret``.
    sealed_signing_secret = models.CharField(
        max_length=400, editable=False, blank=True, help_text="HMAC-SHA256 key for X-Recovery-Signature, encrypted."
    )
    signing_secret = Sealed("sealed_signing_secret")
    owner = models.ForeignKey(
        User,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Default owner of this agent's workflows.",
    )
    silence_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Open a checkpoint when a running workflow is silent this long."
    )
    # db_default too: bulk loaders (demo/volume.py's COPY) name only the columns they fill.
    capabilities = models.JSONField(
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        help_text="Advertised by the agent (or set here): replay, fork, failover.",
    )
    replay_url = models.URLField(
        blank=True, db_default="", help_text="Replay requests are POSTed here (signed like decisions)."
    )
    runtime_version = models.CharField(
        max_length=200, blank=True, db_default="", help_text="As the agent last reported it."
    )
    fork_edits = models.JSONField(
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        help_text="Step kinds whose edited input the runtime applies when a fork restarts at such a step "
        "(advertised with its capabilities); an edit of any other kind is refused.",
    )
    kinds = models.JSONField(
        default=list,
        db_default=models.Value([], models.JSONField()),
        blank=True,
        help_text="Workflow kinds this runtime runs, for standby matching; empty: any kind.",
    )
    # Incidents (models/incidents.py): this many checkpoints sharing a failure signature within the window.
    incident_window_minutes = models.PositiveIntegerField(
        default=15,
        db_default=15,
        blank=True,
        help_text="Checkpoints with one failure signature within this many minutes… (empty: 15)",
    )
    incident_threshold = models.PositiveIntegerField(
        default=5,
        db_default=5,
        blank=True,
        help_text="…become one incident once there are this many (0: never group; empty: 5).",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AgentQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        # Any change (rotation, deactivation, a new owner or endpoint) is seen by the next request.
        forget_tokens([self.token_hash, getattr(self, "_stored_token_hash", "")])
        self._stored_token_hash = self.token_hash

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        forget_tokens([self.token_hash])
        return super().delete(*args, **kwargs)

    def clean(self) -> None:
        """The admin refuses resume and replay URLs requests could never go to (workflows/runtime.py's rules)."""
        from ..runtime import check_resume_url  # the runtime module imports the models

        for field in ("resume_url", "replay_url"):
            if not getattr(self, field):
                continue
            try:
                check_resume_url(getattr(self, field), allow_plain_http=self.allow_plain_http)
            except ValidationError as exc:
                raise ValidationError({field: exc.messages}) from None

    @classmethod
    def from_db(cls, db: str | None, field_names: Collection[str], values: Collection[Any]) -> Agent:
        agent = super().from_db(db, field_names, values)
        agent._stored_token_hash = agent.__dict__.get("token_hash", "")  # what a rotation must forget
        return agent

    @classmethod
    def register(
        cls,
        name: str,
        *,
        resume_url: str = "",
        owner: Operator | None = None,
        description: str = "",
        allow_plain_http: bool = False,
    ) -> tuple[Agent, str]:
        """Create an agent; returns it with its token, which is never stored in clear."""
        agent = cls(
            name=name, resume_url=resume_url, owner=owner, description=description, allow_plain_http=allow_plain_http
        )
        agent.signing_secret = secrets.token_hex(32)  # a property (sealed at rest), so not a constructor field
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
        """The active agent holding this token. A token seen in the last AGENT_TOKEN_CACHE_SECONDS costs
        no query: every save or delete of the agent (rotation, revocation) drops it from the cache."""
        token_hash = hash_token(token)
        key = _token_key(token_hash)
        try:
            agent: Agent | None = cache.get(key)
        except Exception:  # a cache outage costs a query, never the API
            log.warning("Agent token cache unavailable; reading the database", exc_info=True)
            return cls.objects.filter(token_hash=token_hash, is_active=True).first()
        if agent is not None:
            return agent
        agent = cls.objects.filter(token_hash=token_hash, is_active=True).first()
        if agent is not None and settings.AGENT_TOKEN_CACHE_SECONDS:
            try:
                cache.add(key, agent, timeout=settings.AGENT_TOKEN_CACHE_SECONDS)
            except Exception:
                log.warning("Agent token cache unavailable; not caching", exc_info=True)
        return agent

    def advertise(
        self,
        capabilities: list[str],
        *,
        runtime_version: str | None = None,
        kinds: list[str] | None = None,
        fork_edits: list[str] | None = None,
    ) -> None:
        """What the runtime says it supports; None leaves a field as it was."""
        self.capabilities = [c for c in capabilities if c in self.Capability.values]
        fields = ["capabilities"]
        if runtime_version is not None:
            self.runtime_version, fields = runtime_version, [*fields, "runtime_version"]
        if kinds is not None:
            self.kinds, fields = kinds, [*fields, "kinds"]
        if fork_edits is not None:
            self.fork_edits, fields = sorted(set(fork_edits)), [*fields, "fork_edits"]
        self.save(update_fields=fields)

    def can(self, capability: str) -> bool:
        return not self.cannot(capability)

    def cannot(self, capability: str) -> str:
        """Why this agent cannot do ``capability`` (a sentence for the operator), or "" when it can."""
        label = self.Capability(capability).label.lower()
        if not self.is_active:
            return f"{self.name} is deactivated."
        if capability not in (self.capabilities or []):
            return f"{self.name} does not advertise “{label}”: its runtime has not said it supports it."
        if capability == self.Capability.REPLAY and not self.replay_url:
            return f"{self.name} has no replay endpoint configured (an admin sets it on the agent)."
        return ""

    def cannot_edit(self, step_kind: str) -> str:
        """Why this agent cannot apply an operator's edited input to a ``step_kind`` step in a fork, or ""."""
        if step_kind in (self.fork_edits or []):
            return ""
        said = ", ".join(self.fork_edits or []) or "none"
        article = "an" if step_kind[:1] in "aeiou" else "a"
        return (
            f"{self.name} does not apply an edited input to {article} {step_kind} step in a fork (the step kinds it "
            f"says it edits: {said}); fork without an edited input, or from a step it can edit."
        )

    def runs_kind(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds

    @property
    def silence_limit(self) -> timedelta:
        return timedelta(seconds=self.silence_seconds or settings.AGENT_SILENCE_SECONDS)
