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
