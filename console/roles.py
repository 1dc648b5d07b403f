"""The console's import point for who may do what; nothing is defined here.

The role facts are the domain's (``workflows.roles``: names, who holds which role, who may
own work) and the access rules of URLs sit below both screens and API (``access.rules``).
The console's views, template tags and commands keep importing them from here, so their
imports did not move; the domain and the agent API import from the real homes, and
``tests/test_import_directions.py`` fails if anything under ``workflows/`` imports ``console``.
"""

from __future__ import annotations

from access.rules import (
    ACTORS,
    ADMIN_SITE,
    AGENT,
    AGENT_TOKEN,
    ANONYMOUS,
    PRINCIPALS,
    PUBLIC,
    READERS,
    REVIEWERS,
    Rule,
    View,
    declare,
    matrix_markdown,
    operator_required,
    principal_label,
    public,
    role_required,
    rule_of,
    signed_in,
    url_rules,
)
from workflows.roles import (
    ACTING_ROLES,
    ADMIN,
    OPERATOR,
    ROLES,
    SUPERUSER,
    TPM,
    can_act,
    can_review,
    is_admin,
    operators,
    owner_candidates,
    roles_of,
    set_role,
)

__all__ = [
    "ACTING_ROLES",
    "ACTORS",
    "ADMIN",
    "ADMIN_SITE",
    "AGENT",
    "AGENT_TOKEN",
    "ANONYMOUS",
    "OPERATOR",
    "PRINCIPALS",
    "PUBLIC",
    "READERS",
    "REVIEWERS",
    "ROLES",
    "SUPERUSER",
    "TPM",
    "Rule",
    "View",
    "can_act",
    "can_review",
    "declare",
    "is_admin",
    "matrix_markdown",
    "operator_required",
    "operators",
    "owner_candidates",
    "principal_label",
    "public",
    "role_required",
    "roles_of",
    "rule_of",
    "set_role",
    "signed_in",
    "url_rules",
]
