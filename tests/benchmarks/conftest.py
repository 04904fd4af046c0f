"""Shared fixtures of the benchmark-script tests: load a benchmark script as a module."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@contextlib.contextmanager
def load_benchmark(filename: str, name: str):
    """Import ``benchmarks/<filename>`` (``"_common.py"``, ``"md/run.py"``) as module ``name``
    for the ``with`` block.

    ``benchmarks/`` and the script's own folder are on ``sys.path`` meanwhile (as when the
    script runs: it imports ``_common`` and its paper's ``_helpers``), and the module is
    registered in ``sys.modules`` (dataclasses look their module up there); all is undone
    afterwards.
    """
    path = BENCH / filename
    folders = list(dict.fromkeys([str(path.parent), str(BENCH)]))
    sys.path[:0] = folders
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(name, None)
        for folder in folders:
            sys.path.remove(folder)
