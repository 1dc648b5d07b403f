"""Register an agent runtime and print its API token (shown once: only its hash is stored)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import URLValidator, validate_slug
from django.db import IntegrityError

from workflows.models import Agent
from workflows.roles import owner_candidates
from workflows.runtime import check_resume_url

if TYPE_CHECKING:
    from workflows.models.base import Operator


class Command(BaseCommand):
    help = "Register an agent runtime; prints its API token and signing secret once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="A unique slug, e.g. support-bot.")
        parser.add_argument(
            "--resume-url",
            default="",
            help="Where decisions are POSTed. Without it the agent polls GET /api/v1/checkpoints/{id}.",
        )
        parser.add_argument("--owner", default=None, help="Username of the default owner of its workflows.")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--allow-plain-http",
            action="store_true",
            help="Allow an http resume URL where https is required (an on-premise agent).",
        )

    def handle(
        self,
        *args: Any,
        name: str,
        resume_url: str,
        owner: str | None,
        description: str,
        allow_plain_http: bool = False,
        **options: Any,
    ) -> None:
        self._validate(name, resume_url, allow_plain_http)
        if Agent.objects.filter(name=name).exists():
            raise CommandError(
                f"An agent named {name!r} already exists; pick another name (its token cannot be shown again)."
            )
        try:
            agent, token = Agent.register(
                name,
                resume_url=resume_url,
                owner=self._owner(owner),
                description=description[:200],
                allow_plain_http=allow_plain_http,
            )
        except IntegrityError as exc:  # created concurrently since the check above
            raise CommandError(f"An agent named {name!r} already exists.") from exc
        self.stdout.write(self.style.SUCCESS(f"Agent {agent.name!r} created."))
        self.stdout.write(f"  token:          {token}")
        self.stdout.write(f"  signing secret: {agent.signing_secret}")
        self.stdout.write(
            "Both are shown once. The runtime sends the token as 'Authorization: Bearer <token>'"
            + (
                " and checks X-Recovery-Signature on deliveries with the secret."
                if resume_url
                else "; it polls for decisions, so the secret is only needed if it later gets a resume URL."
            )
        )

    def _validate(self, name: str, resume_url: str, allow_plain_http: bool) -> None:
        try:
            validate_slug(name)
        except ValidationError:
            raise CommandError(f"{name!r} is not a valid name: use letters, digits, '-' and '_'.") from None
        if len(name) > (Agent._meta.get_field("name").max_length or 64):
            raise CommandError("The name is longer than 64 characters.")
        if resume_url:
            try:
                URLValidator(schemes=["http", "https"])(resume_url)
            except ValidationError:
                raise CommandError(f"{resume_url!r} is not an http(s) URL.") from None
            try:
                check_resume_url(resume_url, allow_plain_http=allow_plain_http)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None

    def _owner(self, username: str | None) -> Operator | None:
        if username is None:
            return None
        User = get_user_model()
        owner = owner_candidates().filter(**{User.USERNAME_FIELD: username}).first()
        if owner is None:
            raise CommandError(
                f"No user called {username!r} may own an agent's workflows: only active operators and admins can."
            )
        return owner
