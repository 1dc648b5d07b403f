"""A token seen recently costs no query; rotating or revoking it takes effect on the very next request."""

from unittest import mock

import pytest
from django.core.cache import cache

from tests.apitools import AgentApi
from tests.helpers import make_agent
from workflows.models import Agent


@pytest.fixture(autouse=True)
def _cache_on(settings):
    settings.AGENT_TOKEN_CACHE_SECONDS = 30


def test_a_token_seen_recently_is_resolved_without_a_query(db, django_assert_num_queries):
    agent, token = make_agent()
    assert Agent.authenticate(token) == agent
    with django_assert_num_queries(0):
        assert Agent.authenticate(token) == agent


def test_a_rotated_token_is_refused_at_once_and_the_new_one_works(db):
    agent, old = make_agent()
    assert Agent.authenticate(old) == agent
    agent = Agent.objects.get(pk=agent.pk)  # as the admin loads it
    new = agent.set_new_token()
    agent.save()
    assert Agent.authenticate(old) is None
    assert Agent.authenticate(new) == agent


@pytest.mark.parametrize("how", ["save", "queryset_update", "delete"])
def test_a_revoked_token_is_refused_at_once(db, how):
    agent, token = make_agent()
    assert Agent.authenticate(token) == agent
    if how == "save":
        agent.is_active = False
        agent.save()
    elif how == "queryset_update":
        Agent.objects.filter(pk=agent.pk).update(is_active=False)
    else:
        agent.delete()
    assert Agent.authenticate(token) is None


def test_the_api_answers_401_on_the_request_right_after_revocation(db):
    agent, token = make_agent()
    api = AgentApi(agent, token)
    assert api.post("/workflows", {"external_id": "T-1", "kind": "refund", "title": "t"}).status_code == 201
    agent.is_active = False
    agent.save()
    assert api.post("/workflows", {"external_id": "T-2", "kind": "refund", "title": "t"}).status_code == 401


def test_other_changes_to_the_agent_are_seen_at_once_too(db, alice):
    agent, token = make_agent()
    Agent.authenticate(token)
    agent.owner = alice
    agent.save()
    assert Agent.authenticate(token).owner == alice


def test_a_cache_outage_costs_a_query_never_the_request(db):
    agent, token = make_agent()
    with mock.patch.object(cache, "get", side_effect=ConnectionError("cache down")):
        assert Agent.authenticate(token) == agent


def test_the_cache_can_be_turned_off(db, settings, django_assert_num_queries):
    settings.AGENT_TOKEN_CACHE_SECONDS = 0
    agent, token = make_agent()
    Agent.authenticate(token)
    with django_assert_num_queries(1):
        assert Agent.authenticate(token) == agent
