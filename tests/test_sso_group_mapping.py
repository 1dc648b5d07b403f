"""The group mapping of single sign-on, without a provider: what a bad mapping says, and what a
sign-in's groups change (only the teams the mapping names; the highest role; audited once)."""

import pytest

from console.checks import single_sign_on
from tests.helpers import make_user
from tests.test_team_routing import make_team
from workflows.directory import apply_groups, parse_mapping
from workflows.models import Event
from workflows.roles import roles_of


@pytest.mark.parametrize(
    ("mapping", "said"),
    [
        (["role:operator"], "JSON object"),
        ({"ops": "role:wizard"}, "unknown role 'wizard'"),
        ({"ops": "squad:billing"}, "is not role:<name>"),
        ({"ops": ["team:"]}, "is not role:<name>"),
        ({"ops": [1]}, "a grant or a list of grants"),
    ],
)
def test_a_bad_mapping_is_refused_with_what_is_wrong(mapping, said):
    with pytest.raises(ValueError, match=said):
        parse_mapping(mapping)


def test_a_bad_mapping_fails_the_system_check_when_sso_is_on(settings):
    settings.OIDC_RP_CLIENT_ID = "console"
    settings.OIDC_GROUP_MAP = {"ops": "role:wizard"}
    settings.OIDC_OP_JWKS_ENDPOINT = ""
    ids = {e.id for e in single_sign_on()}
    assert ids == {"console.E002", "console.E003"}
    settings.OIDC_RP_CLIENT_ID = ""
    assert single_sign_on() == []


def test_the_highest_role_wins_and_unmapped_teams_are_left_alone(db):
    olga = make_user("olga", role="tpm")
    billing, trust = make_team("Billing"), make_team("Trust", olga)  # trust: set by an admin, not mapped
    mapping = {"ops": "role:operator", "tpm": "role:tpm", "admins": "role:admin", "bill": "team:billing"}
    access = apply_groups(olga, ["tpm", "ops", "bill"], mapping, claim="groups")
    assert access.role == "operator" and roles_of(olga) == {"operator"}
    assert set(olga.teams.all()) == {billing, trust}
    (event,) = Event.objects.filter(verb=Event.Verb.SSO_ACCESS_CHANGED)
    assert event.data["granted"] == ["role operator", "team billing"] and event.data["revoked"] == ["role tpm"]
    apply_groups(olga, ["ops", "bill"], mapping, claim="groups")  # nothing changed: nothing recorded
    assert Event.objects.filter(verb=Event.Verb.SSO_ACCESS_CHANGED).count() == 1
