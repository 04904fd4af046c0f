"""``benchmarks/_common``: the flags every script shares, ``--verdicts-only`` from
``base_parser`` and the pieces of a long run (``--max-hours``, ``--resume``)."""

from __future__ import annotations

import json
import math
import time

import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def common():
    with load_benchmark("_common.py", "bench_common_cli") as mod:
        yield mod


def test_verdicts_only_needs_a_rule(common):
    plain = common.base_parser("x").parse_args([])
    assert not hasattr(plain, "verdicts_only")
    assert common.verdicts_only(plain) is None
    with pytest.raises(SystemExit):  # no rule: no flag
        common.base_parser("x").parse_args(["--verdicts-only", "a.json"])


def test_verdicts_only_rewrites_by_the_rule(common, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"benchmark": "b", "machine": {}, "rows": []}, indent=1) + "\n")
    entry = dict(
        claim="c", verdict="not decided", why="toy", metric="m", ours=1.0, baseline="b",
        baseline_value=None, seeds=5, p_value=None, converged=False, decisive=False,
    )  # fmt: skip
    calls = []

    def rule(doc):
        calls.append(doc)
        return [common.verdict_entry(**entry)]

    p = common.base_parser("x", verdicts=rule)
    assert common.verdicts_only(p.parse_args([])) is None
    assert calls == []
    assert common.verdicts_only(p.parse_args(["--verdicts-only", str(path)])) == 0
    doc = json.loads(path.read_text())
    assert [v["claim"] for v in doc["verdicts"]] == ["c"] and len(calls) == 1
    assert path.read_text().startswith('{\n "benchmark"')  # the file's own indent kept
    assert "not decided" in capsys.readouterr().out


def test_pieces(common, tmp_path):
    p = common.base_parser("x")
    common.piece_arguments(p)
    args = p.parse_args([])
    assert args.max_hours is None and not args.resume
    assert common.piece_deadline(args) == math.inf
    assert common.previous_run(args) is None
    args = p.parse_args(["--max-hours", "0", "--resume", "--json", str(tmp_path / "r.json")])
    assert common.piece_deadline(args) <= time.perf_counter()  # 0 hours: no new unit
    assert common.previous_run(args) is None  # no file yet: start afresh
    (tmp_path / "r.json").write_text(json.dumps({"runs": {"0": {}}, "complete": False}))
    assert common.previous_run(args)["runs"] == {"0": {}}
