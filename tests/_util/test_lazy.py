"""The one lazy loader: names imported on first use, cached, listed by ``dir``."""

from __future__ import annotations

import importlib
import sys

import pytest

from sci_moe._util import lazy_exports


@pytest.fixture
def lazy_pkg(tmp_path, monkeypatch):
    """A package ``lazypkg`` whose ``heavy`` module counts its imports."""
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from sci_moe._util import lazy_exports\n"
        "LIGHT = 1\n"
        "__all__ = ['LIGHT', 'Heavy', 'sqrt']\n"
        "__getattr__, __dir__ = lazy_exports(\n"
        "    __name__, {'Heavy': '.heavy', 'sqrt': 'math', 'Typo': '.heavy'}\n"
        ")\n"
    )
    (pkg / "heavy.py").write_text(
        "import builtins\n"
        "builtins._lazypkg_imports = getattr(builtins, '_lazypkg_imports', 0) + 1\n"
        "class Heavy:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazypkg"
    for name in ("lazypkg", "lazypkg.heavy"):
        sys.modules.pop(name, None)
    import builtins

    if hasattr(builtins, "_lazypkg_imports"):
        del builtins._lazypkg_imports


def test_names_load_on_first_use_and_are_cached(lazy_pkg):
    import builtins

    mod = importlib.import_module(lazy_pkg)
    assert f"{lazy_pkg}.heavy" not in sys.modules
    assert {"LIGHT", "Heavy", "sqrt"} <= set(dir(mod))  # listed before loading
    heavy = mod.Heavy
    assert heavy is sys.modules[f"{lazy_pkg}.heavy"].Heavy  # relative to the package
    assert "Heavy" in vars(mod) and mod.Heavy is heavy  # cached in the module's globals
    assert builtins._lazypkg_imports == 1
    from lazypkg import sqrt  # absolute targets too; ``from`` imports go through it

    assert sqrt(4.0) == 2.0


def test_unknown_and_misdeclared_names_raise_attribute_error(lazy_pkg):
    mod = importlib.import_module(lazy_pkg)
    with pytest.raises(AttributeError, match=r"module 'lazypkg' has no attribute 'nope'"):
        _ = mod.nope
    assert not hasattr(mod, "nope")
    with pytest.raises(AttributeError, match=r"'Typo' is not defined in 'lazypkg\.heavy'"):
        _ = mod.Typo


def test_returns_module_hooks():
    getattr_, dir_ = lazy_exports("sci_moe._util", {})
    assert callable(getattr_) and "lazy_exports" in dir_()
    with pytest.raises(AttributeError, match="no attribute 'x'"):
        getattr_("x")
