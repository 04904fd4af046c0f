"""Version 0.1 owes no one compatibility: no shims, moved-name pointers or deprecated aliases.

Each name has one import path (issue 42, item 3). Checked on the source files, without
importing the fields.
"""

from __future__ import annotations

import ast
import pathlib

import sci_moe

ROOT = pathlib.Path(sci_moe.__file__).parent


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
        tree = ast.parse(p.read_text(encoding="utf-8"))
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
        tree = ast.parse(p.read_text(encoding="utf-8"))
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
