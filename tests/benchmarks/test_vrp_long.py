"""benchmarks/vrp/train_long.py and evaluate.py at toy size: training in pieces (resumed
mid-stage equals uninterrupted), the learning curves, shipping, the reference cache filled in
pieces, the evaluation's rows and verdicts (issue 46 item 1)."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.conftest import load_benchmark, refused

pytest.importorskip("pyvrp")


@pytest.fixture(scope="module")
def train_long():
    with load_benchmark("vrp/train_long.py", "vrp_train_long_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def evaluate():
    with load_benchmark("vrp/evaluate.py", "vrp_evaluate_under_test") as mod:
        yield mod


def _common_args(tmp_path, name):
    return [
        "--quick",
        "--threads",
        "1",
        "--references",
        str(tmp_path / "cache" / "refs.json"),
        "--run-dir",
        str(tmp_path / name),
        "--json",
        str(tmp_path / f"{name}.json"),
    ]


def test_train_in_pieces_equals_one_piece_then_evaluate(train_long, evaluate, tmp_path, capsys):
    from sci_moe.vrp.moses import load_policy

    whole = _common_args(tmp_path, "whole")
    assert train_long.main([*whole, "--seeds", "2", "--plot", str(tmp_path / "c.png")]) == 0
    doc = json.loads((tmp_path / "whole.json").read_text())
    assert doc["complete"] and (tmp_path / "c.png").is_file()
    total = sum(doc["settings"]["steps"])
    for run in doc["runs"].values():
        assert set(run) == {"unified", "moses", "basis"}
        for rec in run.values():
            assert rec["complete"] and rec["curve"][-1]["update"] == total
            assert {"curve_gap", "curve_gap_savings", "val_cost"} <= set(rec["curve"][-1])
            assert isinstance(rec["converged"], bool)
    assert set(doc["runs"]["0"]["moses"]["stages"]) == {"backbone", "expert", "gated"}
    assert set(doc["runs"]["0"]["basis"]["stages"]) == {"backbone", "expert"}
    # pieces of 7 updates pause mid-stage; resuming ends where one piece did (the device
    # given explicitly, the default's, changes nothing and is no setting)
    parts = _common_args(tmp_path, "parts")
    for i in range(20):
        device = ["--device", "cpu"] if i % 2 else []
        argv = [*parts, "--seeds", "1", "--stop-after", "7", "--resume", *device]
        assert train_long.main(argv) == 0
        piece = json.loads((tmp_path / "parts.json").read_text())
        if piece["complete"]:
            break
    assert piece["complete"] and piece["machine"]["device"] == "cpu"
    assert "device" not in piece["settings"]
    for model, rec in piece["runs"]["0"].items():
        assert rec["curve"] == doc["runs"]["0"][model]["curve"], model
    with refused(capsys, r"other settings \(.*steps: .*\); resume with the same flags"):
        train_long.main([*parts, "--seeds", "1", "--resume", "--steps", "3", "3", "3"])
    ship = tmp_path / "pkg" / "moses.pt"
    assert (
        train_long.main([*whole, "--seeds", "2", "--resume", "--ship", "--ship-to", str(ship)]) == 0
    )
    pol, meta = load_policy(ship)
    assert pol.mode == "gated" and meta["model"] == "moses" and "converged" in meta
    # the evaluation: references in pieces, then the models, rows and verdicts
    ev = [
        "--quick",
        "--threads",
        "1",
        "--run-dir",
        str(tmp_path / "whole"),
        "--train-json",
        str(tmp_path / "whole.json"),
        "--references",
        str(tmp_path / "cache" / "refs.json"),
        "--chunk",
        "1",
        "--variants",
        "CVRP",
        "OVRPB",
        "VRPBLTW",
    ]
    assert evaluate.main([*ev, "--references-only", "--max-hours", "1e-9"]) == 0
    assert evaluate.main([*ev, "--references-only"]) == 0
    out = tmp_path / "eval.json"
    assert evaluate.main([*ev, "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["benchmark"] == "vrp_evaluate" and doc["benchmark"] == "vrp_train_long"
    assert res["complete"] and sorted(res["runs"]) == ["0", "1"]
    claims = [v["claim"] for v in res["verdicts"]]
    assert len(claims) == 4 and all(v["verdict"] for v in res["verdicts"])
    metrics = {r["metric"] for r in res["rows"]}
    assert {"gap_vs_pyvrp_0.01s", "gap_vs_pyvrp_0.02s", "wall_s_per_instance"} <= metrics
    assert "wilcoxon_p_pyvrp_0.01s" in metrics
    assert evaluate.main([*ev, "--json", str(out), "--resume"]) == 0
    assert json.loads(out.read_text())["runs"] == res["runs"]
    with refused(capsys, r"eval.json was written with other settings \(augmentations: 8 -> 4\)"):
        evaluate.main([*ev, "--json", str(out), "--resume", "--augment", "4"])


def test_the_default_run_dir_is_committed_not_ignored(train_long, evaluate):
    """Both scripts default to one run folder, inside the repository and not ignored by
    git: a run in pieces over several sessions keeps its finished policies and the
    unfinished model's checkpoint only if they are committed."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    run_dir = sys.modules["_vrp"].RUN_DIR
    assert not run_dir.is_absolute() and run_dir.parts[:3] == ("benchmarks", "vrp", "results")
    for mod in (train_long, evaluate):
        assert mod.main.__globals__["_vrp"].RUN_DIR == run_dir
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = Path(__file__).resolve().parents[2]
    probe = run_dir / "seed0" / "moses.pt"
    res = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=root)
    assert res.returncode == 1, f"{probe} is ignored by git"
