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
    with load_benchmark("_common/__init__.py", "bench_common_cli") as mod:
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


def test_check_resume_settings(common):
    check = common.check_resume_settings
    now = {"seeds": 10, "lr": 0.01, "split": (0.7, 0.3), "enc": {"dim": 8, "layers": 2}}
    stored = json.loads(json.dumps(now))  # as the state file holds it: tuples are lists
    check(stored, now, "x.state.json")  # the same settings pass
    # every differing key named with its stored and current value, nested keys dotted
    changed = dict(stored, seeds=5, lr=0.001, enc={"dim": 4, "layers": 2})
    with pytest.raises(ValueError) as err:
        check(changed, now, "b/x.state.json")
    assert str(err.value) == (
        "--resume: b/x.state.json was written with other settings (enc.dim: 4 -> 8; "
        "lr: 0.001 -> 0.01; seeds: 5 -> 10); resume with the same settings or write to "
        "another --json"
    )
    with pytest.raises(ValueError, match=r"another plan \(gone: 1 -> unset; seeds: unset"):
        check({"gone": 1}, {"seeds": 10}, "p", what="plan")
    # an old state without the record: said so, with what wrote it when given
    with pytest.raises(ValueError, match=r"without its settings record \(none stored: an old"):
        check(None, now, "x.state.json")
    with pytest.raises(ValueError, match=r"\(none stored: a fixed-step run\); write to another"):
        check(None, now, "x.state.json", before="a fixed-step run")
    # a key new since the stored state: its default passes, another value does not
    old = {k: v for k, v in stored.items() if k != "lr"}
    check(old, now, "x.state.json", defaults={"lr": 0.01})
    with pytest.raises(ValueError, match=r"\(lr: unset -> 0.01\)"):
        check(old, now, "x.state.json")  # no default: a difference
    with pytest.raises(ValueError, match=r"\(lr: 0.001 -> 0.01\)"):
        check(old, now, "x.state.json", defaults={"lr": 0.001})
    # a stored file checked outside --resume, with its own remedy
    with pytest.raises(ValueError) as err:
        check({"a": 1}, {"a": 2}, "enc.pt", flag=None, fix="remove it")
    assert str(err.value) == "enc.pt was written with other settings (a: 1 -> 2); remove it"


def test_refuse_exits_2_with_the_message_on_stderr(common, capsys):
    with pytest.raises(SystemExit) as err:
        common.refuse("--resume: x.json was written with other settings (a: 1 -> 2)")
    assert err.value.code == 2  # argparse's status for a bad command line
    out = capsys.readouterr()
    assert out.err == "--resume: x.json was written with other settings (a: 1 -> 2)\n"
    assert out.out == ""


def test_device_is_opt_in_and_checked_by_setup(common, capsys):
    assert not hasattr(common.base_parser("x").parse_args([]), "device")
    args = common.base_parser("x", device=True).parse_args([])
    assert args.device == "cpu"
    common.setup(args)
    bad = common.base_parser("x", device=True).parse_args(["--device", "gpu"])
    with pytest.raises(SystemExit) as exc:
        common.setup(bad)
    assert exc.value.code == 2
    assert "'cpu', 'cuda' or 'cuda:N'" in capsys.readouterr().err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU refusal")
def test_cuda_without_a_gpu_stops_a_script_with_status_2(common, capsys):
    args = common.base_parser("x", device=True).parse_args(["--device", "cuda"])
    with pytest.raises(SystemExit) as exc:
        common.setup(args)
    assert exc.value.code == 2
    assert "no CUDA device" in capsys.readouterr().err
