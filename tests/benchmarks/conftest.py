"""Shared fixtures of the benchmark-script tests: load a benchmark script as a module, expect
a refused command line."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@contextlib.contextmanager
def load_benchmark(filename: str, name: str):
    """Import ``benchmarks/<filename>`` (``"md/run.py"``, or a package's ``__init__.py`` such
    as ``"_common/__init__.py"``) as module ``name`` for the ``with`` block.

    ``benchmarks/`` and the script's own folder are on ``sys.path`` meanwhile (as when the
    script runs: it imports ``_common`` and its paper's ``_helpers``), and the module is
    registered in ``sys.modules`` (dataclasses look their module up there); all is undone
    afterwards. A package is loaded afresh with its submodules (``name.<submodule>``, its
    relative imports), and its own folder stays off ``sys.path``.
    """
    path = BENCH / filename
    package = path.name == "__init__.py"
    folders = list(dict.fromkeys([str(BENCH)] if package else [str(path.parent), str(BENCH)]))
    sys.path[:0] = folders
    if package:
        spec = importlib.util.spec_from_file_location(
            name, path, submodule_search_locations=[str(path.parent)]
        )
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            sys.modules.pop(key)
        for folder in folders:
            sys.path.remove(folder)


@contextlib.contextmanager
def refused(capsys, match: str):
    """Expect the ``with`` block to stop as a refused command line does
    (``_common.refuse``): exit status 2 and a message on stderr in which ``match`` (a
    regular expression) is found."""
    capsys.readouterr()  # what ran before is not the message
    with pytest.raises(SystemExit) as err:
        yield
    msg = capsys.readouterr().err
    assert err.value.code == 2, (err.value.code, msg)
    assert re.search(match, msg), msg
