"""Print the role matrix (README, "Security") generated from the access rules of every URL."""

from typing import Any

from django.core.management.base import BaseCommand

from console.roles import matrix_markdown


class Command(BaseCommand):
    help = "Print who may open each URL, generated from the rules the views declare (console/roles.py)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(matrix_markdown(), ending="")
