"""Signing secrets are encrypted at rest with a key from the environment (finding 7 of issue 12)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from tests.helpers import make_agent
from workflows import sealing
from workflows.models import Agent


def _stored(agent: Agent) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sealed_signing_secret FROM workflows_agent WHERE id = %s", [agent.pk])
        return cursor.fetchone()[0]


def test_the_database_holds_only_the_encrypted_secret(db):
    agent, _ = make_agent("sealed-bot")
    secret = agent.signing_secret
    stored = _stored(agent)
    assert len(secret) == 64 and secret not in stored and stored.startswith("fernet:")
    assert Agent.objects.get(pk=agent.pk).signing_secret == secret


def test_without_the_key_the_secret_cannot_be_read(db, settings):
    agent, _ = make_agent("sealed-bot")
    settings.SIGNING_SECRET_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(ValueError, match="cannot be decrypted"):
        Agent.objects.get(pk=agent.pk).signing_secret


def test_keys_rotate_old_first_then_resealed_with_the_new(db, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SIGNING_SECRET_KEYS = [old]
    agent, _ = make_agent("sealed-bot")
    secret = agent.signing_secret
    settings.SIGNING_SECRET_KEYS = [new, old]
    assert Agent.objects.get(pk=agent.pk).signing_secret == secret
    resealed = sealing.reseal(_stored(agent))
    settings.SIGNING_SECRET_KEYS = [new]
    assert sealing.unseal(resealed) == secret
