"""Issue 21's layout rule, kept: no module of the apps, the scripts or the client package runs past 600 lines,
so a module that grows is split by job before it bends (migrations are generated and left out)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("access", "console", "workflows", "demo", "scripts", "clients/python/src")
LIMIT = 600


def _long_modules(root: Path, limit: int = LIMIT) -> dict[str, int]:
    sizes = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for app in APPS
        for path in (root / app).rglob("*.py")
        if "migrations" not in path.parts
    }
    return {name: lines for name, lines in sorted(sizes.items()) if lines > limit}


def test_no_module_is_over_600_lines() -> None:
    assert _long_modules(ROOT) == {}


def test_the_rule_sees_a_module_that_grows_past_it(tmp_path: Path) -> None:
    (tmp_path / "workflows" / "models").mkdir(parents=True)
    (tmp_path / "workflows" / "models" / "big.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "workflows" / "small.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "workflows" / "migrations").mkdir()
    (tmp_path / "workflows" / "migrations" / "0001_initial.py").write_text("x = 1\n" * 5000)
    assert _long_modules(tmp_path) == {"workflows/models/big.py": LIMIT + 1}
