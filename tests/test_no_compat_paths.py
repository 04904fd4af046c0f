"""Version 0.1 owes no one compatibility: no shims, moved-name pointers or deprecated aliases.

Each name has one import path (issue 42, item 3). Checked on the source files, without
importing the fields.
"""

from __future__ import annotations

import ast
import pathlib

import sci_moe

ROOT = pathlib.Path(sci_moe.__file__).parent


_TREES: dict[pathlib.Path, ast.Module] = {}


def _tree(path: pathlib.Path) -> ast.Module:
    """The parsed source of ``path`` (parsed once: the files are read-only here)."""
    if path not in _TREES:
        _TREES[path] = ast.parse(path.read_text(encoding="utf-8"))
    return _TREES[path]


def _sources():
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_shim_modules():
    shims = [p.relative_to(ROOT) for p in ROOT.rglob("*_core_pending*")]
    assert not shims, f"shim modules left: {shims}"
    # the old import path of the alanine-dipeptide builders and sampling names
    assert not (ROOT / "data" / "alanine_dipeptide.py").exists()


def test_no_moved_name_pointers():
    """No ``_MOVED*`` table and no module ``__getattr__`` that only says where a name went."""
    found = []
    for p in _sources():
        tree = _tree(p)
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id.startswith("_MOVED"):
                    found.append(f"{p.relative_to(ROOT)}: {t.id}")
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                text = ast.get_source_segment(p.read_text(encoding="utf-8"), node) or ""
                if "moved" in text.lower():
                    found.append(f"{p.relative_to(ROOT)}: __getattr__ pointer")
    assert not found, found


def test_no_deprecated_expert_parallel_alias():
    import sci_moe.moe.parallel as parallel

    assert "ExpertParallelMoE" not in parallel.__all__
    assert not hasattr(parallel, "ExpertParallelMoE")


def _all_names(tree) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    return set(ast.literal_eval(node.value))
                except ValueError:
                    return set()
    return set()


def test_fields_do_not_re_export_core_names():
    """A name of :mod:`sci_moe.moe` is imported from there, not from a field's ``__all__``."""
    found = []
    for p in _sources():
        rel = p.relative_to(ROOT)
        if rel.parts[0] in ("moe", "_util") or rel == pathlib.Path("__init__.py"):
            continue
        tree = _tree(p)
        package = ["sci_moe", *rel.parts[:-1]]
        core_names = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == "sci_moe.moe" or module.startswith("sci_moe.moe."):
                core_names |= {a.asname or a.name for a in node.names}
        exported = sorted(core_names & _all_names(tree))
        if exported:
            found.append(f"{rel}: {exported}")
    assert not found, found


def _module_level(tree):
    """Top-level statements, including those under ``if``/``try`` (not functions, classes)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try):
            stack[:0] = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]


def test_root_package_exports_only_the_version():
    """``sci_moe`` re-exports nothing: the core is imported from :mod:`sci_moe.moe`."""
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    assert _all_names(tree) == {"__version__"}
    imports = [
        ast.unparse(n)
        for n in _module_level(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and n.module != "__future__"
    ]
    assert not imports, f"sci_moe/__init__.py imports {imports}"
    assert sci_moe.__all__ == ["__version__"] and not hasattr(sci_moe, "MoE")


def test_one_lazy_loader():
    """Module ``__getattr__``/``__dir__`` come only from ``sci_moe._util.lazy_exports``."""
    found = []
    for p in _sources():
        rel = p.relative_to(ROOT)
        for node in _module_level(_tree(p)):
            if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
                found.append(f"{rel}:{node.lineno}: def {node.name}")
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & {"__getattr__", "__dir__"}:
                call = node.value
                func = getattr(call, "func", None)
                if getattr(func, "id", getattr(func, "attr", None)) != "lazy_exports":
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, f"write lazy names as lazy_exports(__name__, table): {found}"


def _file(module: str) -> pathlib.Path | None:
    base = ROOT.parent / module.replace(".", "/")
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _absolute(module: str, is_pkg: bool, target: str | None, level: int) -> str:
    if not level:
        return target or ""
    parts = module.split(".") if is_pkg else module.split(".")[:-1]
    parts = parts[: len(parts) - level + 1]
    return ".".join([*parts, *([target] if target else [])])


def _bindings(module: str) -> dict[str, tuple[str, str]]:
    """Names a module takes from another ``sci_moe`` module: name -> (module, name there).

    Static ``from x import y`` at module level and the tables of ``lazy_exports``.
    """
    path = _file(module)
    if path is None:
        return {}
    is_pkg = path.name == "__init__.py"
    tree = _tree(path)
    tables = {}
    out = {}
    for node in _module_level(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    tables[t.id] = node.value
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            source = _absolute(module, is_pkg, node.module, node.level)
            for a in node.names:
                out[a.asname or a.name] = (source, a.name)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if getattr(call.func, "id", None) == "lazy_exports" and len(call.args) > 1:
                table = call.args[1]
                table = tables.get(table.id) if isinstance(table, ast.Name) else table
                for k, v in zip(table.keys, table.values, strict=True):
                    source = v.value.lstrip(".")
                    level = len(v.value) - len(source)
                    out[k.value] = (_absolute(module, is_pkg, source, level), k.value)
    return {k: v for k, v in out.items() if v[0] == "sci_moe" or v[0].startswith("sci_moe.")}


def _origin(module: str, name: str, depth: int = 0) -> tuple[str, str]:
    """The module that defines ``name`` as seen from ``module`` (following re-exports)."""
    source = _bindings(module).get(name)
    if source is None or depth > 20:
        return module, name
    if _file(f"{source[0]}.{source[1]}") is not None and source[1] not in _bindings(source[0]):
        return f"{source[0]}.{source[1]}", ""  # a submodule
    return _origin(*source, depth + 1)


#: Second import paths in fields another change is restructuring (issue 42), with why.
PENDING: dict[str, str] = {}


def _second_paths(root: pathlib.Path) -> list[list[str]]:
    """Names in the ``__all__`` of two public packages under ``root``, by where defined.

    ``sci_moe._util`` is private (fields re-export what their users need of it).
    """
    exporters: dict[tuple[str, str], list[str]] = {}
    for init in sorted(root.rglob("__init__.py")):
        rel = init.parent.relative_to(root.parent)
        if any(part.startswith("_") for part in rel.parts):
            continue
        package = ".".join(rel.parts)
        for name in sorted(_all_names(_tree(init))):
            origin = _origin(package, name)
            if origin[1] and not origin[0].startswith("sci_moe._util"):
                exporters.setdefault(origin, []).append(f"{package}.{name}")
    return sorted(paths for paths in exporters.values() if len(paths) > 1)


def test_each_public_name_has_one_package():
    """No package's ``__all__`` re-exports a name another public package exports."""
    found = _second_paths(ROOT)
    twice = [p for p in found if not set(p) & set(PENDING)]
    assert not twice, f"names with two import paths: {twice}"
    stale = set(PENDING) - {name for paths in found for name in paths}
    assert not stale, f"fixed: remove {sorted(stale)} from PENDING"


def test_second_paths_are_found(tmp_path, monkeypatch):
    root = tmp_path / "sci_moe"
    files = {
        "__init__.py": "",
        "_util/__init__.py": "from .s import f\n__all__ = ['f']\n",
        "_util/s.py": "def f(): pass\n",
        "moe/__init__.py": "from .layer import MoE, g\n__all__ = ['MoE', 'g']\n",
        "moe/layer.py": "MoE = g = 1\n",
        # a field re-exporting the core, its paper's names and a lazy name of the paper
        "speech/__init__.py": "from ..moe import MoE\nfrom .omni import Omni, h\n"
        "from sci_moe._util import f, lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(__name__, {'Late': '.omni.late'})\n"
        "__all__ = ['MoE', 'Omni', 'f', 'Late', 'own']\nown = 2\n",
        "speech/omni/__init__.py": "from .model import Omni\nfrom .late import Late\n"
        "__all__ = ['Omni', 'Late']\n",
        "speech/omni/model.py": "Omni = 1\nh = 2\n",
        "speech/omni/late.py": "Late = 1\n",
        # a plain module's __all__ is not a second path; a subpackage of the same name is not
        "graphs/__init__.py": "from .layer import g\nfrom . import omni\n__all__ = ['omni']\n",
        "graphs/layer.py": "from sci_moe.moe import g\n__all__ = ['g']\n",
        "graphs/omni/__init__.py": "__all__ = []\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setitem(globals(), "ROOT", root)
    assert _second_paths(root) == [
        ["sci_moe.moe.MoE", "sci_moe.speech.MoE"],
        ["sci_moe.speech.Late", "sci_moe.speech.omni.Late"],
        ["sci_moe.speech.Omni", "sci_moe.speech.omni.Omni"],
    ]
