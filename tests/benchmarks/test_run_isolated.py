"""``benchmarks/_common.run_isolated``: the child's result, its environment, its failures."""

from __future__ import annotations

import os

import pytest

from tests.benchmarks.conftest import BENCH, load_benchmark

CHILD = """
import os, sys
sys.path.insert(0, {bench!r})
from _common import child_result
print("echoed line")
if os.environ.get("RUN_ISOLATED_FAIL"):
    raise SystemExit(3)
child_result({{"value": os.environ.get("RUN_ISOLATED_PROBE")}})
"""


@pytest.fixture(scope="module")
def common():
    with load_benchmark("_common/__init__.py", "bench_common") as mod:
        yield mod


@pytest.fixture
def child(tmp_path):
    path = tmp_path / "child.py"
    path.write_text(CHILD.format(bench=str(BENCH)))
    return path


def test_child_result_and_env(common, child, capsys):
    env = dict(os.environ) | {"RUN_ISOLATED_PROBE": "42"}
    assert common.run_isolated([child], env=env) == {"value": "42"}
    assert "echoed line" in capsys.readouterr().out
    inherited = dict(os.environ)
    inherited.pop("RUN_ISOLATED_PROBE", None)
    assert common.run_isolated([child], env=inherited) == {"value": None}


def test_failing_child_raises(common, child):
    env = dict(os.environ) | {"RUN_ISOLATED_FAIL": "1"}
    with pytest.raises(SystemExit, match="exit 3"):
        common.run_isolated([child], env=env)


def test_print_rows_prints_every_field(common, capsys):
    common.print_rows([common.Row("a/b", "ms_per_step", 1.5, "ms", "a/c", 0.75)], title="T")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "T"
    assert out[1].split() == ["case", "metric", "value", "unit", "ratio"]
    assert out[-1].split() == ["a/b", "ms_per_step", "1.5", "ms", "0.75"]


def test_warn_if_busy_prints_the_warning_it_returns(common, capsys, monkeypatch):
    # warn_if_busy looks busy_warning up in its own module, _common.machine
    monkeypatch.setattr(common.machine, "busy_warning", lambda: "warning: busy")
    assert common.warn_if_busy() == "warning: busy"
    assert capsys.readouterr().out == "warning: busy\n"
    monkeypatch.setattr(common.machine, "busy_warning", lambda: None)
    assert common.warn_if_busy() is None
    assert capsys.readouterr().out == ""
