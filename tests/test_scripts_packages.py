"""make chaos and make bench run packages of sections (scripts/chaos/, scripts/bench/): every section
imports, both answer --help as ``python -m``, and the chaos report reads figures across its modules.

The runs themselves take minutes of both cores: tests/test_guarantee_chaos.py runs the chaos one."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from tests.stack import ROOT


@pytest.mark.parametrize("package", ["scripts.chaos", "scripts.bench"])
def test_every_section_of_the_package_imports_and_it_answers_help_as_a_module(package):
    root = importlib.import_module(package)
    sections = [info.name for info in pkgutil.iter_modules(root.__path__)]
    assert "__main__" in sections and len(sections) >= 8, sections
    for name in sections:
        importlib.import_module(f"{package}.{name}")
    result = subprocess.run(
        [sys.executable, "-m", package, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {package} ")
    assert root.__doc__.split("\n\n")[0] in result.stdout  # the package's docstring is the description


def test_the_chaos_options_and_report_work_across_the_sections(capsys):
    from scripts.chaos.cli import kill_targets, parse_args
    from scripts.chaos.report import fault_rows

    hard = parse_args(["--hard", "--seed", "3"])
    assert (hard.kill_redis, hard.kill_postgres, hard.lossy_network, hard.clock_skew) == (True, True, True, 300.0)
    assert kill_targets(hard) == ("worker", "web", "fleet", "redis", "postgres")
    figures = {"kills": {"worker": 2, "web": 1, "fleet": 0}, "network": {}, "clock_skew_seconds": 0.0, "disk": {}}
    checks = dict.fromkeys(("decisions", "effects", "acknowledged", "dedupe", "launched", "reached"), True)
    rows = fault_rows(figures, {**checks, "dedupe": False})
    assert [(fault, injected, held) for fault, injected, _target, held in rows] == [
        ("worker SIGKILLed", "2", False),
        ("web server SIGKILLed", "1", True),
        ("agent fleet SIGKILLed mid-step", "0", True),
    ]
