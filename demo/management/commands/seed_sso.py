"""The teams ``make run SSO=1``'s group mapping names (demo/sso.py), with the workflow kinds each owns.

Idempotent; teams and rules someone edited since are left as they are. Membership and leads are not
seeded: they come from the identity provider's groups at each sign-in."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from demo.sso import TEAMS
from workflows.models import RoutingRule, Team


class Command(BaseCommand):
    help = "Create the teams the demo single sign-on profile maps groups to (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            for slug, (name, kinds) in TEAMS.items():
                team, created = Team.objects.get_or_create(slug=slug, defaults={"name": name})
                if created:
                    for kind in kinds:
                        RoutingRule.objects.create(team=team, workflow_kind=kind)
        self.stdout.write(f"Teams for single sign-on: {', '.join(sorted(TEAMS))}")
