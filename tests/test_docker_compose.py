"""docker-compose.yml is a valid production stack (validated by docker-compose itself, no engine needed)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.compose


def config(tmp_path, **env):
    # An empty env file: a developer's .env (which holds a SECRET_KEY) must not leak into the check.
    empty = tmp_path / "empty.env"
    empty.write_text("")
    environ = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    return subprocess.run(
        [shutil.which("docker-compose"), "--env-file", str(empty), "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        env={**environ, **env},
        cwd=ROOT,
    )


def test_the_compose_file_validates_and_runs_every_service_with_health_checks(tmp_path):
    result = config(tmp_path, SECRET_KEY="compose-check", POSTGRES_PASSWORD="compose-check-db")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for service in ("postgres:", "redis:", "web:", "worker:", "beat:", "relay:", "migrate:"):
        assert f"  {service}" in text
    assert text.count("healthcheck:") >= 4
    assert "gunicorn" in text and "run_relay" in text
    assert "DATABASE_URL: postgres://" in text and "CELERY_BROKER_URL: redis://" in text


def test_the_compose_stack_refuses_to_start_without_a_secret_key(tmp_path):
    result = config(tmp_path, POSTGRES_PASSWORD="compose-check-db")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_the_compose_stack_has_no_default_database_password(tmp_path):
    result = config(tmp_path, SECRET_KEY="compose-check")
    assert result.returncode != 0
    assert "POSTGRES_PASSWORD" in result.stderr


def test_manage_py_check_deploy_passes_with_the_compose_production_settings(tmp_path):
    """Finding 4 of issue 12: the production settings of docker-compose.yml draw no deploy warning."""
    import secrets
    import sys

    import yaml

    from workflows import push

    key = secrets.token_urlsafe(50)
    result = config(
        tmp_path,
        SECRET_KEY=key,
        POSTGRES_PASSWORD="compose-check-db",
        CONSOLE_HOST="console.example.com",
        VAPID_PRIVATE_KEY=push.new_private_key(),
    )  # as the README says: `manage.py vapid_keys` once
    assert result.returncode == 0, result.stderr
    environment = yaml.safe_load(result.stdout)["services"]["web"]["environment"]
    assert environment["TLS"] == "true" and "SECURE_COOKIES" not in environment
    env = {"PATH": os.environ["PATH"], "VAR_DIR": str(tmp_path), **{k: str(v) for k, v in environment.items()}}
    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues" in check.stdout
