"""Django admin: runbooks, agents and users are configured here; workflows, checkpoints,
decisions and events are shown read-mostly, since they change only through
the model's transitions (which record events).

The admin is a screen, so it lives with the screens in ``console/`` (it registers the
``workflows`` models; their URLs stay /admin/workflows/…): it shares the runbook form with
the console's runbook editor, and the domain below knows neither.

Every change made here is an audit event: every model registered, ours and the libraries'
(auth's groups, axes's lockouts), has an ``AuditedAdmin``, so adding, changing or deleting
a row, its inline rows included, records who, what, and the fields before and after
(``tests/test_admin_audit.py`` walks the registry). A password an admin sets for someone is
an event too, without the password. New API tokens and signing secrets are shown once, in the body of
the page that made them, never in a message (messages ride in a readable cookie).
"""

from . import configuration, records, slack  # noqa: F401  (each registers its models)
from .audited import AuditedAdmin, ReadOnlyAdmin

__all__ = ["AuditedAdmin", "ReadOnlyAdmin"]
