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
    return subprocess.run([shutil.which("docker-compose"), "--env-file", str(empty), "-f",
                           str(ROOT / "docker-compose.yml"), "config"],
                          capture_output=True, text=True, env={**environ, **env}, cwd=ROOT)


def test_the_compose_file_validates_and_runs_every_service_with_health_checks(tmp_path):
    result = config(tmp_path, SECRET_KEY="compose-check")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for service in ("postgres:", "redis:", "web:", "worker:", "beat:", "relay:", "migrate:"):
        assert f"  {service}" in text
    assert text.count("healthcheck:") >= 4
    assert "gunicorn" in text and "run_relay" in text
    assert "DATABASE_URL: postgres://" in text and "CELERY_BROKER_URL: redis://" in text


def test_the_compose_stack_refuses_to_start_without_a_secret_key(tmp_path):
    result = config(tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
