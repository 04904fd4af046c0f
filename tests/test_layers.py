"""The layers contract of DESIGN.md: imports point down only, also inside functions.

Floors, bottom to top: ``sci_moe._util`` < ``sci_moe.train`` (the training engine) <
``sci_moe.moe`` < the fields (``molecules``,
``sampling``, ``theory``, ``language`` and every new field package) < ``sci_moe.testing`` <
``sci_moe.data`` (builders) < ``sci_moe.cli``. A module may import its own top-level
subpackage freely and anything on a lower floor; a field may use another field only through
its public face (a package, never a module file or a ``_private`` name), and the same holds
for every import across top-level subpackages (a field takes ``sci_moe.moe``'s names from
``sci_moe.moe``, not from ``sci_moe.moe.layer``), except the private bottom floor
``sci_moe._util``, which exists to be imported, the builder modules of ``sci_moe.data``
(public modules, each one builder) and the command line, which may use any public module.
The fields' graph has no cycle. Every ``import``/``from`` statement counts, wherever it
stands, and so does ``importlib.import_module("sci_moe...")`` with a literal name.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "sci_moe"

#: Floor of each top-level subpackage; anything not listed is a field (floor 2).
FLOORS = {"_util": 0, "train": 0.5, "moe": 1, "testing": 3, "data": 4, "cli": 5}
FIELD_FLOOR = 2
#: Names any module may take from the root package (it holds only the version and re-exports).
ROOT_NAMES_ALLOWED = {"__version__"}


@dataclass(frozen=True)
class Edge:
    source: str  # importing module, dotted
    target: str  # imported module, dotted
    line: int
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        path = self.source.replace(".", "/")
        return f"{path}.py:{self.line}: imports {self.target}"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(dotted: str) -> bool:
    return (ROOT.parent / dotted.replace(".", "/") / "__init__.py").is_file()


def _exported(package: str) -> set[str]:
    """Names in a package's ``__all__`` (they shadow a submodule of the same name)."""
    init = ROOT.parent / package.replace(".", "/") / "__init__.py"
    if not init.is_file():
        return set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return set()
    return set()


def _resolve(source: str, is_pkg: bool, module: str | None, level: int) -> str:
    if not level:
        return module or ""
    base = source.split(".") if is_pkg else source.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def collect_edges(root: pathlib.Path = ROOT) -> list[Edge]:
    """Every import of a ``sci_moe`` module by a ``sci_moe`` module, wherever it stands."""
    edges = []
    for path in sorted(root.rglob("*.py")):
        source = _module_name(path)
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(source, is_pkg, node.module, node.level)
                if target == "sci_moe" or target.startswith("sci_moe."):
                    names = tuple(a.name for a in node.names)
                    # ``from pkg import submodule`` imports the submodule (unless ``pkg``
                    # exports an object of that name, as ``sci_moe.moe.dispatch``)
                    exported = _exported(target)
                    for name in names:
                        if name in exported:
                            continue
                        sub = f"{target}.{name}"
                        if (ROOT.parent / (sub.replace(".", "/") + ".py")).is_file() or _is_package(
                            sub
                        ):
                            edges.append(Edge(source, sub, node.lineno))
                    edges.append(Edge(source, target, node.lineno, names))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("sci_moe"):
                        edges.append(Edge(source, alias.name, node.lineno))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.startswith("sci_moe")
            ):
                edges.append(Edge(source, node.args[0].value, node.lineno))
    return edges


def _top(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else None


def _floor(top: str | None) -> float:
    return FLOORS.get(top, FIELD_FLOOR) if top is not None else float("inf")


def violations(edges: list[Edge]) -> list[str]:
    """Human-readable contract violations of ``edges`` (empty when the contract holds)."""
    bad = []
    for e in edges:
        src, dst = _top(e.source), _top(e.target)
        if src == dst:
            continue
        if dst is None:  # the root package
            if src is not None and not set(e.names) <= ROOT_NAMES_ALLOWED:
                bad.append(f"{e}: only {sorted(ROOT_NAMES_ALLOWED)} may come from sci_moe itself")
            continue
        if src is None:  # the root package imports down only
            continue
        if _floor(dst) > _floor(src):
            bad.append(f"{e}: upward import (floor {src} -> {dst})")
        elif dst != "_util":
            private = any(p.startswith("_") for p in e.target.split(".")[1:])
            # the builders of ``data`` are public modules, and the command line (the top)
            # may use any public module; fields and the core are reached through a package
            module_ok = dst == "data" or src == "cli"
            if private or not (module_ok or _is_package(e.target)):
                bad.append(
                    f"{e}: use the public face of sci_moe.{dst} (a package), not a module or "
                    "a _private name"
                )
    return bad


def field_cycles(edges: list[Edge]) -> list[list[str]]:
    """Cycles in the graph of fields (top-level packages on the field floor)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        src, dst = _top(e.source), _top(e.target)
        if src and dst and src != dst and _floor(src) == _floor(dst) == FIELD_FLOOR:
            graph.setdefault(src, set()).add(dst)
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_edges_are_found():
    edges = collect_edges()
    assert len(edges) > 50
    # a function-level import is seen like a top-level one
    assert any(_top(e.source) == "cli" for e in edges)


def test_imports_point_down_only():
    bad = violations(collect_edges())
    assert not bad, "layers contract broken (see DESIGN.md, Floors):\n" + "\n".join(bad)


def test_fields_have_no_cycle():
    cycles = field_cycles(collect_edges())
    assert not cycles, "import cycle between fields: " + "; ".join(" -> ".join(c) for c in cycles)


def _write(root: pathlib.Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    root = tmp_path / "sci_moe"
    for pkg in ("", "_util", "moe", "sampling", "sampling/md", "theory", "data", "cli"):
        _write(root, f"{pkg}/__init__.py".lstrip("/"), "")
    monkeypatch.setitem(globals(), "ROOT", root)
    return root


def test_contract_rejects_upward_and_private_imports(fake_tree):
    _write(fake_tree, "sampling/md/systems.py", "def f():\n    from sci_moe.data import x\n")
    _write(fake_tree, "moe/layer.py", "from ..sampling import md\n")
    _write(fake_tree, "theory/a.py", "from sci_moe.sampling.md.systems import f\n")
    _write(fake_tree, "data/b.py", "import importlib\nimportlib.import_module('sci_moe.cli')\n")
    _write(fake_tree, "cli/c.py", "from sci_moe.data import x\nfrom sci_moe._util import io\n")
    _write(fake_tree, "cli/d.py", "from sci_moe.data import b\nfrom sci_moe.data._p import q\n")
    _write(fake_tree, "moe/__init__.py", "__all__ = ['dispatch']\n")
    _write(fake_tree, "moe/dispatch.py", "")
    _write(fake_tree, "theory/e.py", "from sci_moe.moe import dispatch\n")
    _write(fake_tree, "data/f.py", "from sci_moe.moe.layer import MoE\n")
    bad = "\n".join(violations(collect_edges(fake_tree)))
    assert "sampling/md/systems.py:2: imports sci_moe.data: upward" in bad
    assert "moe/layer.py:1: imports sci_moe.sampling: upward" in bad
    assert "theory/a.py:1: imports sci_moe.sampling.md.systems: use the public face" in bad
    assert "data/b.py:2: imports sci_moe.cli: upward" in bad
    assert "cli/d.py:1" not in bad  # a public builder module
    assert "cli/d.py:2: imports sci_moe.data._p: use the public face" in bad
    assert "cli/c.py" not in bad
    assert "theory/e.py" not in bad  # the exported function, not the submodule
    assert "data/f.py:1: imports sci_moe.moe.layer: use the public face" in bad


def test_contract_finds_field_cycles(fake_tree):
    _write(fake_tree, "theory/a.py", "from sci_moe import sampling\n")
    _write(fake_tree, "sampling/b.py", "def g():\n    import sci_moe.theory\n")
    cycles = field_cycles(collect_edges(fake_tree))
    assert cycles and set(cycles[0]) == {"sampling", "theory"}
