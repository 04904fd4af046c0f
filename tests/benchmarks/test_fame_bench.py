"""benchmarks/fame/run.py: the flatness rule and the verdict rule on a made-up JSON."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .conftest import load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fame/run.py", "fame_run") as mod:
        yield mod


def test_flat_rule(bench):
    # best-so-far 1.0 up to step 80 (the last 20 % starts after it), 0.995 at 100: 0.5 %
    head = [[20, 2.0], [40, 1.5], [60, 1.2], [80, 1.0]]
    assert bench.flat([*head, [100, 0.995]])
    assert not bench.flat([*head, [100, 0.9]])  # 10 % better: not flat
    assert bench.flat([[20, 1.0], [40, 1.1], [60, 1.3], [80, 1.2], [100, 1.1]])  # no new best
    assert not bench.flat([[20, 2.0], [80, 1.0], [100, 0.995]])  # under five evaluations
    assert not bench.flat([[100, 1.0]])


def _doc(bench, fame_err, flm_err):
    rows = []
    seeds = [0, 1, 2]
    for name, errs in (
        ("FAME K=1", fame_err),
        ("FAME K=2", fame_err),
        ("FLM", flm_err),
        ("GRU", [e + 1 for e in flm_err]),
    ):
        for d in bench.DROPS:
            case = f"regime drop={d}% {name}"
            rows.append({"case": case, "metric": "relative_l2", "value": sum(errs) / 3})
            rows += [
                {"case": case, "metric": f"relative_l2 seed {s}", "value": e}
                for s, e in zip(seeds, errs, strict=True)
            ]
        if name.startswith("FAME"):
            rows.append({"case": f"regime {name}", "metric": "flat_fraction", "value": 1.0})
    return {"machine": {"seeds": seeds, "task_seeds": {"regime": seeds}}, "rows": rows}


def test_verdict_rule_reproduced_and_contradicted(bench):
    good = bench.verdicts(_doc(bench, [0.30, 0.31, 0.29], [0.60, 0.62, 0.61]))
    first = good[0]
    assert first["claim"].startswith("FAME beats the functional linear model")
    assert first["verdict"] == "reproduced" and first["converged"]
    bad = bench.verdicts(_doc(bench, [0.60, 0.62, 0.61], [0.30, 0.31, 0.29]))
    assert bad[0]["verdict"] == "contradicted"
    assert {v["claim"] for v in good} >= {"more experts help: K = 2 vs K = 1 (regime task)"}


def test_seeds_flag_sets_the_plan(bench, monkeypatch, tmp_path):
    seen = {}

    def fake_run(args, cfg, state, deadline):
        seen.update(cfg)
        return False

    monkeypatch.setattr(bench, "run", fake_run)
    assert bench.main(["--quick", "--seeds", "3", "--json", str(tmp_path / "f.json")]) == 0
    assert seen["seeds"] == 3
    with pytest.raises(SystemExit) as err:
        bench.main(["--quick", "--seeds", "1"])
    assert err.value.code == 2


def test_resume_refuses_a_state_of_another_plan(bench, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "run", lambda args, cfg, state, deadline: False)
    path = tmp_path / "f.json"
    (tmp_path / "f.state.json").write_text('{"regime|FAME K=1|0": {"steps": 500}}')
    with refused(capsys, r"without its plan record \(none stored: a fixed-step run"):
        bench.main(["--quick", "--json", str(path), "--resume"])
    assert bench.main(["--quick", "--json", str(tmp_path / "g.json")]) == 0
    assert bench.main(["--quick", "--json", str(tmp_path / "g.json"), "--resume"]) == 0
    with refused(capsys, r"written with another plan \(gru_min_steps: 30 -> 600; "):
        bench.main(["--json", str(tmp_path / "g.json"), "--resume"])  # full vs quick plan


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fame_and_gru_fits_on_cuda(bench):
    cfg = bench.settings(True)
    cfg.update(n_train=8, n_val=4, n_test=4, gru_steps=4, gru_min_steps=2)
    cfg.update(steps={"regime": 4}, min_steps={"regime": 2})
    cfg["train"]["eval_every"] = 2
    with load_benchmark("fame/_fame_fit.py", "fame_fit_under_test") as fit:
        data = fit.load_task("regime", 0, cfg)
        units = {
            (name, device): fit.fit_unit("regime", name, 0, data, cfg, device)
            for name in ("FAME K=2", "GRU")
            for device in ("cuda", "cpu")
        }
    for name in ("FAME K=2", "GRU"):
        on_gpu, on_cpu = units[name, "cuda"], units[name, "cpu"]
        assert all(np.isfinite(v) for v in on_gpu["error"].values())
        assert on_gpu["error"]["0"] == pytest.approx(on_cpu["error"]["0"], rel=0.05)
