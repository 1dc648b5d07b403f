"""Roles and team membership from the identity provider's groups, applied at every sign-in.

The mapping (``OIDC_GROUP_MAP``) names, for each group of the provider, what it grants::

    {"rc-operators": ["role:operator"], "rc-tpm": "role:tpm", "rc-admins": "role:admin",
     "billing": ["team:billing"], "billing-leads": ["team:billing", "lead:billing"]}

At each sign-in the user gets exactly what their current groups grant: the highest role granted
(admin > operator > TPM; none: no role), membership of each team the mapping names (teams it
does not name are left as an admin set them), and the lead of a team named by ``lead:``. So
someone removed from a group at the provider loses what it granted at their next sign-in.
Every change is an audit event naming the claim and the groups it carried.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import transaction

from .models import Event, Team
from .roles import ADMIN, OPERATOR, ROLES, TPM, roles_of, set_role

if TYPE_CHECKING:
    from .models.base import Operator

KINDS = ("role", "team", "lead")
RANK = (ADMIN, OPERATOR, TPM)  # the highest role granted wins


def parse_mapping(raw: object) -> dict[str, list[tuple[str, str]]]:
    """The mapping as (kind, name) pairs per group; ValueError naming the first bad entry."""
    if not isinstance(raw, Mapping):
        raise ValueError('OIDC_GROUP_MAP must be a JSON object: {"group": ["role:operator", "team:slug"]}.')
    parsed: dict[str, list[tuple[str, str]]] = {}
    for group, grants in raw.items():
        items = [grants] if isinstance(grants, str) else grants
        names = [i for i in items if isinstance(i, str)] if isinstance(items, list) else []
        if not isinstance(items, list) or len(names) != len(items):
            raise ValueError(f'OIDC_GROUP_MAP[{group!r}]: a grant or a list of grants such as "role:operator".')
        pairs = []
        for item in names:
            kind, _, name = item.partition(":")
            if kind not in KINDS or not name:
                raise ValueError(f"OIDC_GROUP_MAP[{group!r}]: {item!r} is not role:<name>, team:<slug> or lead:<slug>.")
            if kind == "role" and name not in ROLES:
                raise ValueError(f"OIDC_GROUP_MAP[{group!r}]: unknown role {name!r} (one of {', '.join(ROLES)}).")
            pairs.append((kind, name))
        parsed[str(group)] = pairs
    return parsed


@dataclass
class Access:
    """What a sign-in changed, for the trail and the caller."""

    role: str | None
    granted: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)


def apply_groups(user: Operator, groups: Iterable[str], mapping: Mapping[str, object], *, claim: str) -> Access:
    """Give ``user`` exactly the role and managed team memberships ``groups`` grant; audit the change."""
    rules = parse_mapping(mapping)
    held = sorted({str(g) for g in groups})
    grants = {pair for g in held for pair in rules.get(g, [])}
    role = next((r for r in RANK if ("role", r) in grants), None)
    managed = {name for pairs in rules.values() for kind, name in pairs if kind in ("team", "lead")}
    access = Access(role)
    with transaction.atomic():
        _apply_role(user, role, access)
        for team in Team.objects.filter(slug__in=managed).select_for_update():
            _apply_team(
                user,
                team,
                member=("team", team.slug) in grants or ("lead", team.slug) in grants,
                lead=("lead", team.slug) in grants,
                access=access,
            )
        if access.granted or access.revoked:
            Event.record(
                user,
                Event.Verb.SSO_ACCESS_CHANGED,
                actor=user,
                data={
                    "granted": access.granted,
                    "revoked": access.revoked,
                    "claim": claim,
                    "groups": [g[:200] for g in held[:50]],
                },
            )
    return access


def _apply_role(user: Operator, role: str | None, access: Access) -> None:
    had = sorted(roles_of(user) & set(ROLES))
    if role is not None and had != [role]:
        set_role(user, role)
    elif role is None and had:
        user.groups.remove(*user.groups.filter(name__in=ROLES))
        if user.is_staff and not user.is_superuser:
            user.is_staff = False
            user.save(update_fields=["is_staff"])
    user.__dict__.pop("_console_roles", None)
    access.granted += [f"role {role}"] if role is not None and role not in had else []
    access.revoked += [f"role {r}" for r in had if r != role]


def _apply_team(user: Operator, team: Team, *, member: bool, lead: bool, access: Access) -> None:
    is_member = team.members.filter(pk=user.pk).exists()
    if member and not is_member:
        team.members.add(user)
        access.granted.append(f"team {team.slug}")
    elif not member and is_member:
        team.members.remove(user)
        access.revoked.append(f"team {team.slug}")
    if lead and team.lead_id != user.pk:
        Team.objects.filter(pk=team.pk).update(lead=user)
        access.granted.append(f"lead of {team.slug}")
    elif not lead and team.lead_id == user.pk:
        Team.objects.filter(pk=team.pk).update(lead=None)
        access.revoked.append(f"lead of {team.slug}")
