"""benchmarks/omni_expert/full.py at toy size: a run in two pieces, its resume, the rows,
the learning curves and the verdict rules (issue 43 item 2)."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.conftest import load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("omni_expert/full.py", "omni_expert_full_under_test") as mod:
        yield mod


def test_level_verdict_rule(bench):
    base = [0.70, 0.72, 0.71, 0.69, 0.70]
    same = [b + d for b, d in zip(base, [0.001, -0.001, 0.0005, 0.0, -0.0005], strict=True)]
    v = bench.level_verdict("c", metric="m", ours=same, base=base, baseline="MoE^p", converged=True)
    assert v["verdict"] == "reproduced" and v["decisive"] and v["p_value"] < 0.05
    worse = [b - 0.05 + d for b, d in zip(base, [0.001, -0.001, 0.002, 0.0, 0.001], strict=True)]
    v = bench.level_verdict("c", metric="m", ours=worse, base=base, baseline="b", converged=False)
    assert v["verdict"] == "contradicted" and not v["decisive"]
    noisy = [b + d for b, d in zip(base, [0.05, -0.06, 0.04, -0.05, 0.03], strict=True)]
    v = bench.level_verdict("c", metric="m", ours=noisy, base=base, baseline="b", converged=True)
    assert v["verdict"] == "not decided" and not v["decisive"]


def test_toy_run_in_pieces_resume_and_verdicts(bench, tmp_path, capsys):
    path = tmp_path / "full.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "rir")]
    assert bench.main([*args, "--seeds", "1"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and list(doc["runs"]) == ["rt60=0.6/seed=0"]
    assert doc["verdicts"] == []  # one seed: no paired test yet
    first = doc["runs"]["rt60=0.6/seed=0"]
    assert bench.main([*args, "--seeds", "2", "--resume", "--plots", str(tmp_path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and doc["runs"]["rt60=0.6/seed=0"] == first
    assert [p["units"] for p in doc["machine"]["pieces"]] == [1, 1]
    assert (tmp_path / "omni_expert_full_quick_curves.png").is_file()
    tr = first["train"]
    assert set(tr) == set(bench.MODELS)
    assert all(isinstance(t["converged"], bool) and t["curve"] for t in tr.values())
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    for m in ("stoi_vocoded", "estoi_vocoded"):
        assert ("rt60=0.6/OE^p/seed=1", m) in rows and ("rt60=0.6/MoE^p", m) in rows
    assert ("OE^p", "macs_per_frame") in rows and ("OE^p", "inference_us_per_frame") in rows
    assert ("rt60=0.6/MoE", "converged_fraction") in rows
    assert ("rt60=0.6/PI-continued/seed=1", "stoi_vocoded") in rows
    assert len(doc["verdicts"]) == 8  # 4 claims x 2 metrics at one RT60
    assert all(v["seeds"] == 2 for v in doc["verdicts"])
    conv = [r for r in doc["rows"] if r["metric"] == "converged_fraction"]
    if any(r["value"] < 1 for r in conv):
        assert not any(v["decisive"] for v in doc["verdicts"])
    # a piece whose budget is spent starts no unit; the run stays incomplete
    assert bench.main([*args, "--seeds", "3", "--resume", "--max-hours", "1e-9"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is False and len(doc["runs"]) == 2
    assert [p["units"] for p in doc["machine"]["pieces"]] == [1, 1, 0]
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before
    with refused(capsys, r"other settings \(eval_every: \d+ -> 100; "):  # the full size
        bench.main(["--threads", "1", "--json", str(path), "--resume", "--seeds", "2"])
