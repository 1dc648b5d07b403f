"""Imports point one way: the screens and the agent API above the access rules, those above the domain.

    console/  (the project, its pages, the Django admin)  may import everything below
    workflows/api/ (its JSON parsing and body limit too)  the API: access and the domain
    access/   (URL access rules, the client's address)     the domain only
    workflows/ (models, roles, tasks, clocks, the demo)    nothing of ours above it

The walk reads every module with ``ast`` (nothing is imported), so it sees what an import
hides from ``sys.modules``: imports inside functions (lazy ones) and under ``TYPE_CHECKING``
both count as arrows for the layers. For cycles, the arrows that run code count (top-level
and lazy; type-only ones do not): no module may reach itself. The domain's core still has
lazy arrows that close cycles (a model calling its tasks, the audit trail recognising the
models it records); they are listed in ``KNOWN_CYCLE_ARROWS``, which may shrink and never
grow: an arrow listed but gone fails too, so the list stays true.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("access", "console", "workflows")

# A module's layer is that of the longest prefix that names it.
LAYERS = {
    "console": "ui",
    "workflows.api": "api",
    "access": "access",
    "workflows": "domain",
}
MAY_IMPORT = {
    "ui": {"ui", "api", "access", "domain"},
    "api": {"api", "access", "domain"},
    "access": {"access", "domain"},
    "domain": {"domain"},
}

# Arrows that still close a cycle inside the domain's core, each one lazy (inside a function):
# remove an entry when its arrow goes; never add one.
KNOWN_CYCLE_ARROWS = {
    # Models that hand work to a worker or a runtime after their commit.
    ("workflows.models.agents", "workflows.runtime"),
    ("workflows.models.relay", "workflows.tasks"),
    ("workflows.models.replays", "workflows.tasks"),
    ("workflows.models.notifications", "workflows.notify"),
    ("workflows.models.notifications", "workflows.runtime"),
    # Lower models that name higher ones: the audit trail recognises what it records, Stateful.move writes it.
    ("workflows.models.base", "workflows.models.events"),
    ("workflows.models.events", "workflows.models.checkpoints"),
    ("workflows.models.events", "workflows.models.decisions"),
    ("workflows.models.events", "workflows.models.replays"),
    ("workflows.models.events", "workflows.models.workflows"),
    ("workflows.models.events", "workflows.models.steps"),  # Step left workflows.py with this arrow
    # Workflow.hold_here opens the held checkpoint of an incident's hold (Workflow.fork no longer does: forking.py).
    ("workflows.models.workflows", "workflows.models.checkpoints"),
}


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function: runs when called, not when imported
    type_only: bool  # under ``if TYPE_CHECKING``: never runs

    def __str__(self) -> str:
        how = "type-only" if self.type_only else "lazy" if self.lazy else "top-level"
        return f"{self.source} -> {self.target} (line {self.line}, {how})"


def modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[Arrow]:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def owner(name: str) -> str | None:
        while name and name not in known:  # ``a.b.c`` names a module, or something inside one
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, *, lazy: bool, type_only: bool) -> Iterator[Arrow]:
        for child in ast.iter_child_nodes(node):
            inner_lazy = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = ".".join(package[: len(package) - child.level + 1]) if child.level else ""
                origin = ".".join(p for p in (base, child.module or "") if p)
                names = [f"{origin}.{alias.name}" for alias in child.names]
            for name in names:
                target = owner(name)
                if target is not None and target != module:
                    yield Arrow(module, target, getattr(child, "lineno", 0), inner_lazy, type_only)
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), lazy=inner_lazy, type_only=True)
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), lazy=inner_lazy, type_only=type_only)
            else:
                yield from visit(child, lazy=inner_lazy, type_only=type_only)

    yield from visit(ast.parse(path.read_text(), str(path)), lazy=False, type_only=False)


def arrows(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[Arrow]:
    known = modules(root, packages)
    return [arrow for module, path in known.items() for arrow in _imports(module, path, known)]


def layer(module: str) -> str:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[prefix]


def upward(found: Iterable[Arrow]) -> list[Arrow]:
    return [a for a in found if layer(a.target) not in MAY_IMPORT[layer(a.source)]]


def cycles(found: Iterable[Arrow], allowed: Iterable[tuple[str, str]] = ()) -> list[list[str]]:
    """The strongly connected groups of modules (Tarjan) over the arrows that run code, minus ``allowed``."""
    skip = set(allowed)
    edges: dict[str, set[str]] = {}
    for a in found:
        if not a.type_only and (a.source, a.target) not in skip:
            edges.setdefault(a.source, set()).add(a.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return groups


def test_no_module_imports_a_layer_above_its_own_lazy_and_type_only_imports_included() -> None:
    wrong = upward(arrows())
    assert not wrong, "Imports that point up (move the shared piece down instead):\n" + "\n".join(map(str, wrong))


def test_the_domain_never_imports_the_console_not_even_its_compatibility_names() -> None:
    found = [a for a in arrows() if layer(a.source) != "ui" and a.target.split(".")[0] == "console"]
    assert not found, "\n".join(map(str, found))


def test_no_import_cycle_but_the_listed_ones_and_those_still_exist() -> None:
    found = arrows()
    assert not cycles(found, KNOWN_CYCLE_ARROWS), "New import cycles:\n" + "\n".join(
        map(str, cycles(found, KNOWN_CYCLE_ARROWS))
    )
    running = {(a.source, a.target) for a in found if not a.type_only}
    gone = sorted(KNOWN_CYCLE_ARROWS - running)
    assert not gone, f"Remove these from KNOWN_CYCLE_ARROWS, they no longer exist: {gone}"


def test_no_cycle_at_import_time_at_all() -> None:
    """Top-level imports alone: no module reaches itself (decisions sit above checkpoints, their drafting
    above both: workflows/models/drafting.py)."""
    top = [a for a in arrows() if not a.lazy]
    assert cycles(top) == []


@pytest.mark.parametrize(
    ("where", "source", "wrong"),
    [
        ("workflows/models/thing.py", "def f():\n    from console.roles import can_act\n", True),
        (
            "workflows/models/thing.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from access import rules\n",
            True,
        ),
        ("workflows/api/thing.py", "from console import views\n", True),
        ("access/thing.py", "from workflows.api import api\n", True),
        ("access/thing.py", "from workflows.roles import ADMIN\n", False),
        ("console/thing.py", "from workflows.api import api\nfrom access import rules\n", False),
    ],
)
def test_the_walk_catches_an_arrow_planted_anywhere(tmp_path: Path, where: str, source: str, wrong: bool) -> None:
    for package in ("access", "console", "workflows/models", "workflows/api"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    for name in ("console/roles.py", "console/views.py", "access/rules.py", "workflows/roles.py"):
        (tmp_path / name).write_text("")
    (tmp_path / where).write_text(source)
    assert bool(upward(arrows(tmp_path))) is wrong


def test_the_walk_catches_a_lazy_cycle(tmp_path: Path) -> None:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "__init__.py").write_text("")
    (tmp_path / "workflows" / "a.py").write_text("from . import b\n")
    (tmp_path / "workflows" / "b.py").write_text("def f():\n    from .a import x\n")
    assert cycles(arrows(tmp_path, ["workflows"])) == [["workflows.a", "workflows.b"]]
