"""Print a new VAPID key pair for Web Push: the line to put in the environment, and the public key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.test import override_settings

from workflows import push


class Command(BaseCommand):
    help = (
        "Generate a VAPID key for Web Push. Put the VAPID_PRIVATE_KEY line in the environment (.env or the "
        "deployment's secrets) once; a new key later orphans every device subscribed with the old one."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        private = push.new_private_key()
        with override_settings(VAPID_PRIVATE_KEY=private):
            public = push.public_key()
        self.stdout.write(f"VAPID_PRIVATE_KEY={private}\n")
        self.stdout.write(f"# public key (browsers get it from the console; nothing to configure): {public}\n")
