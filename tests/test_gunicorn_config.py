"""One gunicorn config (console/gunicorn.py), named by every launch path, whose guard holds.

Issue 22, finding 10 (and issue 21 item 4): compose's ``-c python:console.gunicorn`` skipped the
shared-cache guard of a second file, ``gunicorn.conf.py``; with ``CACHE_URL`` unset three workers
started and each allowed the full failed-auth limit. The Dockerfile's command loaded the guard but
not the threads and keep-alive.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stack import free_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CONFIG = "python:console.gunicorn"
# scripts/bench_versions.py serves two git checkouts of the console (this one and an older one) with one
# empty config on purpose: the same server arguments for both, whatever the older tree's config says.
SAME_ARGUMENTS_FOR_TWO_VERSIONS = {"bench_versions.py"}


def _commands_in_text(text: str) -> list[str]:
    """Shell lines (Makefile recipes, Procfile entries) that start gunicorn."""
    return [
        line
        for line in text.splitlines()
        if re.search(r"(^|[\s/:])gunicorn(\s|$)", line) and not line.lstrip().startswith("#")
    ]


def _gunicorn_argvs(path: Path) -> list[list[Any]]:
    """Every list literal in a Python file whose first element names the gunicorn executable."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.List) and node.elts and "gunicorn" in ast.unparse(node.elts[0]):
            found.append([elt.value if isinstance(elt, ast.Constant) else ast.unparse(elt) for elt in node.elts])
    return found


def test_there_is_one_gunicorn_config_file():
    assert not list(ROOT.glob("gunicorn.conf.py")), "gunicorn.conf.py would be a second config (loaded by default)"
    assert (ROOT / "console" / "gunicorn.py").exists()


def test_compose_and_the_dockerfile_start_gunicorn_with_the_one_config():
    web = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    assert web[:3] == ["gunicorn", "-c", CONFIG], web
    cmd = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD"))
    assert yaml.safe_load(cmd.removeprefix("CMD"))[:3] == ["gunicorn", "-c", CONFIG], cmd


def test_every_other_launch_path_names_the_one_config():
    launches = []
    for name in ("Makefile", "Procfile.dev"):
        for line in _commands_in_text((ROOT / name).read_text()):
            launches.append((name, shlex.split(line)))
    for script in sorted((ROOT / "scripts").rglob("*.py")):
        if script.name not in SAME_ARGUMENTS_FOR_TWO_VERSIONS:
            launches += [(script.relative_to(ROOT).as_posix(), argv) for argv in _gunicorn_argvs(script)]
    found = {name.split("/")[1] for name, _ in launches if name.startswith("scripts/")}
    assert {"bench", "chaos"} <= found, found  # the walk finds the launch paths it should
    for name, argv in launches:
        assert "-c" in argv and argv[argv.index("-c") + 1] == CONFIG, (name, argv)


def _start(workers: int, cache_url: str | None, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CACHE_URL"}
    env.update(
        {
            "WEB_CONCURRENCY": str(workers),
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_ACCESS_LOG": "",
            "SECRET_KEY": "gunicorn-guard-test",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    if cache_url is not None:
        env["CACHE_URL"] = cache_url
    return subprocess.Popen(
        [str(BIN / "gunicorn"), "-c", CONFIG, "console.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize("cache_url", [None, "locmemcache://", "dummycache://"])
def test_the_compose_command_refuses_to_start_several_workers_with_a_per_process_cache(cache_url):
    server = _start(3, cache_url, free_port())
    try:
        output, _ = server.communicate(timeout=60)  # the guard runs before any worker is forked
    except subprocess.TimeoutExpired:
        server.kill()
        output, _ = server.communicate()
        pytest.fail(f"gunicorn started 3 workers with CACHE_URL={cache_url!r}:\n{output[-2000:]}")
    assert server.returncode != 0
    assert "needs a cache shared between them" in output and "CACHE_URL=redis://" in output
