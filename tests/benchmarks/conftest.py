"""Shared fixtures of the benchmark-script tests: load a ``benchmarks/*.py`` file as a module."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@contextlib.contextmanager
def load_benchmark(filename: str, name: str):
    """Import ``benchmarks/<filename>`` as module ``name`` for the ``with`` block.

    ``benchmarks/`` is on ``sys.path`` meanwhile (the scripts import ``_common`` and each
    other), and the module is registered in ``sys.modules`` (dataclasses look their
    module up there); both are undone afterwards.
    """
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / filename)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(name, None)
        sys.path.remove(str(BENCH))
