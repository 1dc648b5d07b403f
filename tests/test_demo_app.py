"""The demo fleet, the volume generator and their commands live in the demo app, outside the shipped domain:
installed by make run (DEBUG) and the suite, not by a production deployment; nothing in workflows/ or
console/ imports it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import get_commands

PRINT_APPS = "from django.conf import settings; print(' '.join(settings.INSTALLED_APPS))"


@pytest.mark.parametrize(
    ("environment", "installed"),
    [
        ({"DEBUG": "false", "SECRET_KEY": "x" * 40}, False),  # docker-compose.yml's production settings
        ({"DEBUG": "true"}, True),  # make run's .env
        ({"DEBUG": "false", "SECRET_KEY": "x" * 40, "DEMO_APPS": "true"}, True),  # make test, the chaos run
    ],
)
def test_the_demo_app_is_installed_with_debug_or_demo_apps_only(tmp_path, environment, installed):
    env_file = tmp_path / "empty.env"  # not the developer's .env
    env_file.write_text("")
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DEMO_APPS", "SECRET_KEY")}
    printed = subprocess.run(
        [sys.executable, "-c", PRINT_APPS],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
        env={**base, **environment, "ENV_FILE": str(env_file), "DJANGO_SETTINGS_MODULE": "console.settings"},
    )
    assert ("demo" in printed.stdout.split()) is installed, printed.stdout


def test_the_suite_has_the_demo_commands_from_the_demo_app():
    commands = get_commands()
    for name in ("seed_demo", "run_demo_fleet", "generate_volume"):
        assert commands[name] == "demo", name


@pytest.mark.parametrize("package", ["workflows", "console"])
def test_the_shipped_packages_never_import_the_demo_app(package):
    found = []
    for path in sorted((settings.BASE_DIR / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            found += [
                f"{path.relative_to(settings.BASE_DIR)}: {name}"
                for name in names
                if name == "demo" or name.startswith("demo.")
            ]
    assert found == []
