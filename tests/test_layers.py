"""The import contracts that import-linter cannot check; the rest is in ``pyproject.toml``.

``lint-imports`` (run by ``make lint`` and so by ``make test``) checks the contracts of
``[tool.importlinter]`` on every static import, wherever it stands (also inside functions
and under ``TYPE_CHECKING``): the floors, bottom to top ``sci_moe._util`` <
``sci_moe.train`` < ``sci_moe.moe`` < the fields < ``sci_moe.testing`` < ``sci_moe.data``
< ``sci_moe.cli``; the fields independent of each other except the imports listed there;
no ``_private`` module imported from outside its parent package; no cycle among the
modules and subpackages of any package; no script of ``benchmarks/`` or ``scripts/``
importing another. Its unit is the module, and it reads only ``import`` statements. This
module checks the rest:

* **names**: across top-level subpackages an import goes through the public face, a
  package, never a module file, and takes no ``_private`` name; only ``__version__`` comes
  from ``sci_moe`` itself. import-linter cannot tell ``from sci_moe.moe import dispatch``
  (the function the face exports) from an import of the submodule ``moe/dispatch.py``, nor
  see names. Exempt: the bottom floor ``sci_moe._util`` (there to be imported), the builder
  modules of ``sci_moe.data`` (public modules, one builder each) and the command line,
  which may use any public module.
* **dynamic imports**: ``importlib.import_module`` and ``__import__`` with a literal name,
  an f-string or a module-level table of names, absolute or relative, and the tables of
  the one lazy loader ``sci_moe._util.lazy_exports(__name__, table)``, obey the floors of
  the ``floors`` contract and the independence of the fields; the root package loads
  nothing.
* **the contracts themselves**: they exist, and ``scripts-independent`` names every
  script (import-linter sees ``from md import x`` in a script as an external module, so
  the list of scripts must be whole).
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = pathlib.Path(__file__).resolve().parents[1]
ROOT = REPO / "sci_moe"
#: Names any module may take from the root package (it holds only the version).
ROOT_NAMES_ALLOWED = {"__version__"}
_IMPORTERS = {"import_module", "__import__"}
#: The one lazy loader: ``lazy_exports(__name__, table)`` imports the modules of ``table``
#: (checked where the table is passed); its own ``import_module`` call is the mechanism.
_LAZY_LOADER, _LAZY_MODULE = "lazy_exports", "sci_moe._util.lazy"


def import_contracts() -> dict[str, dict]:
    """The contracts of ``[tool.importlinter]`` in ``pyproject.toml``, by id."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def floors(contract: dict) -> dict[str, int]:
    """Floor of each top-level subpackage (0 = bottom) from a ``layers`` contract."""
    out = {}
    for floor, layer in enumerate(reversed(contract["layers"])):
        for name in re.split(r"[|:]", layer):
            out[name.strip().strip("()")] = floor
    return out


FLOORS = floors(import_contracts()["floors"])


@dataclass(frozen=True)
class Edge:
    source: str  # importing module, dotted
    target: str  # imported module, dotted
    line: int
    names: tuple[str, ...] = ()
    dynamic: bool = False

    def __str__(self) -> str:
        path = self.source.replace(".", "/") + ("/__init__" if _is_package(self.source) else "")
        how = "imports dynamically" if self.dynamic else "imports"
        return f"{path}.py:{self.line}: {how} {self.target}"


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


def _name_tables(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``NAME = {...}`` (the values) or ``(...)``/``[...]`` of strings."""
    tables = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            items = value.values if isinstance(value, ast.Dict) else [value]
            strings = [
                n.value
                for item in items
                for n in ast.walk(item)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            for t in targets:
                if isinstance(t, ast.Name) and strings:
                    tables[t.id] = strings
    return tables


def _dynamic_names(call: ast.Call, tables: dict[str, list[str]]) -> list[tuple[str, bool]] | None:
    """``(name, is_prefix)`` of the modules a dynamic import may load; ``None``: unknown.

    Of an f-string only the literal head is known: the module is somewhere below the
    package it names (``is_prefix``). A leading ``{__name__}`` stands for the importing
    module itself.
    """
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [(arg.value, False)]
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            dots = len(head.value) - len(head.value.lstrip("."))
            return [("." * dots + head.value[dots:].rpartition(".")[0], True)]
        if isinstance(head, ast.FormattedValue) and getattr(head.value, "id", None) in (
            "__name__",
            "__package__",
        ):
            return [("{" + head.value.id + "}", True)]
        return None
    if isinstance(arg, ast.Subscript | ast.Name):
        table = tables.get(getattr(arg.value if isinstance(arg, ast.Subscript) else arg, "id", ""))
        return None if table is None else [(name, False) for name in table]
    return None


def collect_edges(root: pathlib.Path | None = None) -> list[Edge]:
    """Every import of a ``sci_moe`` module by a ``sci_moe`` module, static and dynamic.

    A dynamic import whose name cannot be told is an edge to ``"?"`` (a violation).
    """
    root = ROOT if root is None else root
    edges = []
    for path in sorted(root.rglob("*.py")):
        source = _module_name(path)
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        tables = _name_tables(tree)
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
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == _LAZY_LOADER
                and len(node.args) > 1
            ):
                table = node.args[1]
                if isinstance(table, ast.Dict):
                    names = [(v.value, False) for v in table.values if isinstance(v, ast.Constant)]
                else:
                    names = [(n, False) for n in tables.get(getattr(table, "id", ""), ["?"])]
                for name, _ in names:  # relative to the caller's package, as import_module
                    level = len(name) - len(name.lstrip("."))
                    target = _resolve(source, is_pkg, name.lstrip(".") or None, level)
                    if target == "?" or target == "sci_moe" or target.startswith("sci_moe."):
                        edges.append(Edge(source, target, node.lineno, dynamic=True))
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) in _IMPORTERS
                and node.args
                and source != _LAZY_MODULE
            ):
                names = _dynamic_names(node, tables)
                # ``import_module(".x", __name__)`` takes the module as the package
                package = node.args[1] if len(node.args) > 1 else None
                as_pkg = is_pkg or getattr(package, "id", None) == "__name__"
                for name, is_prefix in names or [("?", False)]:
                    if name == "{__name__}":
                        target = source
                    elif name == "{__package__}":
                        target = source if is_pkg else source.rpartition(".")[0]
                    elif name.startswith("."):
                        level = len(name) - len(name.lstrip("."))
                        target = _resolve(source, as_pkg, name.lstrip(".") or None, level)
                    else:
                        target = name
                    if is_prefix and target in ("", "sci_moe"):
                        target = "?"  # anything in sci_moe: no reader can check it
                    if target == "?" or target == "sci_moe" or target.startswith("sci_moe."):
                        edges.append(Edge(source, target, node.lineno, dynamic=True))
    return edges


def _top(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else None


def violations(edges: list[Edge]) -> list[str]:
    """Human-readable contract violations of ``edges`` (empty when the contracts hold)."""
    bad = []
    for e in edges:
        if e.target == "?":
            bad.append(f"{e}: a name no reader can check; use a literal name or a name table")
            continue
        src, dst = _top(e.source), _top(e.target)
        if src == dst:
            continue
        if dst is None:  # the root package
            if src is not None and not set(e.names) <= ROOT_NAMES_ALLOWED:
                bad.append(f"{e}: only {sorted(ROOT_NAMES_ALLOWED)} may come from sci_moe itself")
            continue
        if src is None:  # the root package: lint-imports checks its static imports
            if e.dynamic:
                bad.append(f"{e}: the root package loads nothing (it exports only __version__)")
            continue
        if e.dynamic:
            if dst not in FLOORS or src not in FLOORS:
                bad.append(f"{e}: sci_moe.{dst} or sci_moe.{src} is not in the floors contract")
            elif FLOORS[dst] > FLOORS[src]:
                bad.append(f"{e}: upward import (floor {src} -> {dst})")
            elif FLOORS[dst] == FLOORS[src]:
                bad.append(f"{e}: the fields are independent; import statically and list it")
        if dst != "_util":
            private_module = any(p.startswith("_") for p in e.target.split(".")[1:])
            private_name = [n for n in e.names if n.startswith("_") and not n.startswith("__")]
            # the builders of ``data`` are public modules, and the command line (the top)
            # may use any public module; fields and the core are reached through a package
            module_ok = dst == "data" or src == "cli"
            if private_module or not (module_ok or _is_package(e.target)):
                bad.append(
                    f"{e}: use the public face of sci_moe.{dst} (a package), not a module or "
                    "a _private name"
                )
            elif private_name:
                bad.append(f"{e}: takes the private name(s) {private_name} from sci_moe.{dst}")
    return bad


def test_edges_are_found():
    edges = collect_edges()
    assert len(edges) > 50
    # a function-level import is seen like a top-level one, and so is a dynamic one
    assert any(_top(e.source) == "cli" for e in edges)
    assert any(e.dynamic for e in edges)


def test_imports_use_public_faces_and_dynamic_imports_point_down():
    bad = violations(collect_edges())
    assert not bad, "import contracts broken (see pyproject.toml, tool.importlinter):\n" + (
        "\n".join(bad)
    )


def test_contracts_are_declared():
    contracts = import_contracts()
    floors_contract = contracts["floors"]
    assert floors_contract["type"] == "layers" and floors_contract["exhaustive"]
    assert floors_contract["containers"] == ["sci_moe"]
    assert [FLOORS[n] for n in ("_util", "train", "moe", "sampling", "testing", "data", "cli")] == [
        0,
        1,
        2,
        3,
        4,
        5,
        6,
    ]
    tops = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert tops == set(FLOORS), "every top-level subpackage has a floor"
    assert contracts["acyclic"]["type"] == "acyclic_siblings"
    assert set(contracts["acyclic"]["ancestors"]) == {"sci_moe", "benchmarks", "scripts"}
    assert contracts["private"]["type"] == "private_modules"


def test_scripts_contract_lists_every_script():
    contract = import_contracts()["scripts-independent"]
    scripts = {
        p.stem
        for folder in ("benchmarks", "scripts")
        for p in (REPO / folder).glob("*.py")
        if not p.stem.startswith("_")
    }
    # a paper's folder, benchmarks/<paper>/run.py (issue 41 item 5), is listed by its name,
    # a companion script beside run.py (benchmarks/<paper>/speed.py) by its own
    scripts |= {p.parent.name for p in (REPO / "benchmarks").glob("*/run.py")}
    # a helper package, benchmarks/_common/ (its folder named _*), holds no script
    scripts |= {
        p.stem
        for p in (REPO / "benchmarks").glob("*/*.py")
        if not p.stem.startswith("_") and not p.parent.name.startswith("_") and p.name != "run.py"
    }
    listed = set(contract["forbidden_modules"])
    assert listed == scripts, (
        "pyproject.toml, contract scripts-independent: list every script of benchmarks/ and "
        "scripts/, every benchmarks/<paper>/ folder with a run.py and every companion script "
        f"(missing {sorted(scripts - listed)}, gone {sorted(listed - scripts)})"
    )
    assert set(contract["source_modules"]) == {"benchmarks", "scripts"}


def _write(root: pathlib.Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    root = tmp_path / "sci_moe"
    for pkg in ("", *FLOORS, "sampling/md"):
        _write(root, f"{pkg}/__init__.py".lstrip("/"), "")
    monkeypatch.setitem(globals(), "ROOT", root)
    return root


def test_walker_rejects_modules_private_names_and_upward_dynamic_imports(fake_tree):
    _write(fake_tree, "theory/a.py", "from sci_moe.sampling.md.systems import f\n")
    _write(fake_tree, "sampling/md/systems.py", "def f():\n    pass\n")
    _write(fake_tree, "data/b.py", "import importlib\nimportlib.import_module('sci_moe.cli')\n")
    _write(fake_tree, "cli/c.py", "from sci_moe.data import x\nfrom sci_moe._util import io\n")
    _write(fake_tree, "cli/d.py", "from sci_moe.data import b\nfrom sci_moe.data._p import q\n")
    _write(fake_tree, "moe/__init__.py", "__all__ = ['dispatch']\n")
    _write(fake_tree, "moe/dispatch.py", "")
    _write(fake_tree, "theory/e.py", "from sci_moe.moe import dispatch\n")
    _write(fake_tree, "data/f.py", "from sci_moe.moe.layer import MoE\n")
    _write(fake_tree, "moe/layer.py", "")
    _write(fake_tree, "vision/g.py", "from sci_moe.moe import _helper\n")
    _write(
        fake_tree, "moe/h.py", "import importlib\nimportlib.import_module('..data', __package__)\n"
    )
    _write(fake_tree, "moe/i.py", "import importlib\nimportlib.import_module('...cli', __name__)\n")
    _write(
        fake_tree,
        "testing/__init__.py",
        "from importlib import import_module\nT = {'cli': '..cli'}\n"
        "def f(n):\n    return import_module(T[n], __name__)\n",
    )
    _write(fake_tree, "train/k.py", "def f(T, n):\n    return __import__(T[n])\n")
    _write(fake_tree, "train/o.py", "import importlib\nimportlib.import_module(f'sci_moe.{1}')\n")
    _write(
        fake_tree,
        "train/__init__.py",
        "import importlib\nT = {'a': '.i'}\n"
        "def g(n):\n    return importlib.import_module(T[n], __name__)\n",
    )
    _write(
        fake_tree, "speech/l.py", "import importlib\nimportlib.import_module('sci_moe.language')\n"
    )
    _write(
        fake_tree,
        "cli/m.py",
        "import importlib\ndef f(n):\n    return importlib.import_module(f'{__name__}.{n}')\n",
    )
    _write(fake_tree, "neuro/n.py", "from sci_moe import MoE\n")
    _write(
        fake_tree,
        "moe/lz.py",
        "from sci_moe._util import lazy_exports\nT = {'X': 'sci_moe.data', 'Y': '.dispatch'}\n"
        "__getattr__, __dir__ = lazy_exports(__name__, T)\n",
    )
    _write(
        fake_tree,
        "graphs/__init__.py",
        "from .._util import lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(__name__, {'X': '..vision', 'Y': '.m'})\n",
    )
    _write(
        fake_tree, "__init__.py", "import importlib\nimportlib.import_module('.moe', __name__)\n"
    )
    bad = "\n".join(violations(collect_edges(fake_tree)))
    assert "theory/a.py:1: imports sci_moe.sampling.md.systems: use the public face" in bad
    assert "data/b.py:2: imports dynamically sci_moe.cli: upward" in bad
    assert "cli/d.py:1" not in bad  # a public builder module
    assert "cli/d.py:2: imports sci_moe.data._p: use the public face" in bad
    assert "cli/c.py" not in bad
    assert "theory/e.py" not in bad  # the exported function, not the submodule
    assert "data/f.py:1: imports sci_moe.moe.layer: use the public face" in bad
    assert "vision/g.py:1: imports sci_moe.moe: takes the private name(s) ['_helper']" in bad
    assert "moe/h.py:2: imports dynamically sci_moe.data: upward" in bad  # relative
    assert "moe/i.py:2: imports dynamically sci_moe.cli: upward" in bad
    assert "testing/__init__.py:4: imports dynamically sci_moe.cli: upward" in bad  # a table
    assert "train/k.py:2: imports dynamically ?" in bad  # a table of the caller's
    assert "train/o.py:2: imports dynamically ?" in bad  # anything in sci_moe
    assert "train/__init__.py" not in bad  # a name table inside the package
    assert "speech/l.py:2: imports dynamically sci_moe.language: the fields" in bad
    assert "cli/m.py" not in bad  # f"{__name__}.x" stays below the module
    assert "neuro/n.py:1: imports sci_moe: only ['__version__']" in bad
    assert "moe/lz.py:3: imports dynamically sci_moe.data: upward" in bad  # a lazy table
    assert "moe/lz.py:3: imports dynamically sci_moe.moe.dispatch" not in bad
    assert "graphs/__init__.py:2: imports dynamically sci_moe.vision: the fields" in bad
    assert "graphs/__init__.py:2: imports dynamically sci_moe.graphs.m" not in bad
    assert "sci_moe/__init__.py:2: imports dynamically sci_moe.moe: the root package" in bad


_PROBES = {
    # an upward import inside a function
    "moe/layer.py": "def f():\n    from ..sampling import md\n",
    # a cycle inside a package
    "sampling/md/a.py": "from . import b\n",
    "sampling/md/b.py": "def f():\n    from .a import x\n",
    # one field using another, not listed
    "theory/t.py": "from sci_moe import sampling\n",
    # the root package imports the command line, and a lower floor imports the root
    "__init__.py": "from . import cli\n",
    "_util/u.py": "import sci_moe\n",
    # a private module from outside its package
    "cli/c.py": "from sci_moe.moe._private import z\n",
    "moe/_private.py": "z = 1\n",
}


def test_import_linter_contracts_catch_the_probes(tmp_path):
    """The repository's floors, acyclic and private contracts on a tree with planted faults."""
    contracts = import_contracts()
    lines = ['[tool.importlinter]\nroot_packages = ["sci_moe"]\n']
    for cid in ("floors", "acyclic", "private"):
        c = {k: v for k, v in contracts[cid].items() if k != "ignore_imports"}
        if cid == "acyclic":
            c["ancestors"] = ["sci_moe"]
        lines.append("[[tool.importlinter.contracts]]")
        lines += [f"{k} = {_toml(v)}" for k, v in c.items()]
    (tmp_path / "contracts.toml").write_text("\n".join(lines) + "\n")
    root = tmp_path / "sci_moe"
    for pkg in ("", *FLOORS, "sampling/md"):
        _write(root, f"{pkg}/__init__.py".lstrip("/"), "")
    for rel, text in _PROBES.items():
        _write(root, rel, text)
    exe = pathlib.Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(exe), "--no-cache", "--no-logo", "contracts.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=300,
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sci_moe.moe is not allowed to import sci_moe.sampling" in out
    assert "sci_moe.theory is not allowed to import sci_moe.sampling" in out
    assert "sci_moe._util is not allowed to import sci_moe.cli" in out  # via the root
    assert "No cycles are allowed in sci_moe.sampling.md" in out
    assert "sci_moe.cli.c -> sci_moe.moe._private" in out
    assert "Contracts: 0 kept, 3 broken." in out


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace('"', '\\"') + '"'
