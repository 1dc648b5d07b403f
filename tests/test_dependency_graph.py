"""The dependency picture in the README (docs/dependencies.svg) is drawn from the code, and stays true."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("dependency_graph", ROOT / "scripts" / "dependency_graph.py")
assert spec and spec.loader
graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(graph)


def test_the_committed_picture_is_the_one_the_code_draws_now() -> None:
    drawn = graph.svg(graph.layer_arrows())
    assert (ROOT / "docs" / "dependencies.svg").read_text() == drawn, (
        "docs/dependencies.svg is stale: run .venv/bin/python scripts/dependency_graph.py and commit it"
    )


def test_the_readme_shows_the_picture() -> None:
    assert "docs/dependencies.svg" in (ROOT / "README.md").read_text()


def test_a_new_import_changes_the_picture_and_an_upward_one_is_drawn_red(tmp_path: Path) -> None:
    for package in ("access", "console", "workflows", "demo"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "migrations"))
    shutil.copytree(
        ROOT / "clients" / "python" / "src" / "recovery_client",
        tmp_path / "clients" / "python" / "src" / "recovery_client",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    before = graph.layer_arrows(tmp_path)
    assert before == graph.layer_arrows()
    (tmp_path / "workflows" / "planted.py").write_text("def f():\n    from console import views\n")
    after = graph.layer_arrows(tmp_path)
    assert after[("domain", "console")] == before[("domain", "console")] + 1
    assert 'stroke="#c00"' in graph.svg(after) and 'stroke="#c00"' not in graph.svg(before)
