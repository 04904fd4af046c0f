"""``benchmarks/more_brain/run.py``: every learned fit trains in cycles until flat (issue 45).

The training itself is replaced by fakes that return planned validation curves, so the
cycles, the best weights over the cycles, the recorded rows and the ``--resume`` settings
check are checked exactly and fast.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from .conftest import load_benchmark, refused


@pytest.fixture(scope="module")
def mb():
    with load_benchmark("more_brain/run.py", "bench_more_brain_cycles") as mod:
        yield mod


def _run(curve, steps):
    """An :class:`EncoderRun`-like result with validation curve ``[[step, top1], ...]``."""
    evals = [{"step": s, "val_top1": v, "val_top5": v} for s, v in curve]
    best = max((v for _, v in curve), default=None)
    return SimpleNamespace(
        history=[], result=SimpleNamespace(evals=evals, best_metric=best, step=steps)
    )


def _rising(cycle, steps, every):
    return [[s, 0.2 * cycle + 0.002 * s] for s in range(every, steps + 1, every)]


def test_a_fit_not_flat_after_one_cycle_gets_a_second_and_keeps_the_best(mb):
    model = torch.nn.Linear(1, 1)
    seeds = []

    def train(tc):
        c = len(seeds)
        seeds.append(tc.seed)
        assert (tc.steps, tc.eval_every, tc.schedule) == (50, 10, "cosine")
        with torch.no_grad():
            model.weight.fill_(float(c + 1))  # cycle c leaves its best weights c + 1
        if c == 0:
            return _run([[10, 0.1], [20, 0.2], [30, 0.3], [40, 0.4], [50, 0.5]], 50)
        return _run([[s, 0.45] for s in (10, 20, 30, 40, 50)], 50)  # level, below 0.5

    cfg = {**mb.settings(True), "cycles": 3}
    fit = mb.fit_until_flat(model, train, cfg, 7, 50, 10, 4)
    assert seeds == [7, 107]  # flat after the second cycle: no third
    assert fit["cycles"] == 2 and fit["steps"] == 100 and fit["flat"] is True
    assert [s for s, _ in fit["curve"]] == list(range(10, 101, 10))
    assert fit["flat"] == mb.flat(fit["curve"]) and not mb.flat(fit["curve"][:5])
    assert float(model.weight.detach()) == 1.0  # cycle 0's weights: its best top-1 (0.5) beat 0.45


def test_a_fit_at_its_cap_records_not_flat_and_the_last_best(mb):
    model = torch.nn.Linear(1, 1)
    seeds = []

    def train(tc):
        seeds.append(tc.seed)
        with torch.no_grad():
            model.weight.fill_(float(len(seeds)))
        return _run(_rising(len(seeds) - 1, 50, 10), 50)

    fit = mb.fit_until_flat(model, train, {**mb.settings(True), "cycles": 2}, 3, 50, 10, 4)
    assert seeds == [3, 103] and fit["cycles"] == 2 and fit["flat"] is False
    assert fit["steps"] == 100 and len(fit["curve"]) == 10
    assert float(model.weight.detach()) == 2.0  # the second cycle's best is the higher one


def test_settings_cycles_and_the_override(mb):
    assert mb.settings(False)["cycles"] == 4 and mb.settings(True)["cycles"] == 2
    assert mb.settings(False, 6)["cycles"] == 6
    assert {k: v for k, v in mb.settings(False, 6).items() if k != "cycles"} == {
        k: v for k, v in mb.settings(False).items() if k != "cycles"
    }
    with pytest.raises(ValueError, match="max_cycles"):
        mb.settings(True, 0)


def test_resume_refuses_the_fixed_step_state_and_other_settings(mb, tmp_path, capsys):
    path = tmp_path / "mb.json"
    state = path.with_suffix(".state.json")
    state.write_text(json.dumps({"0": {"ridge": {}}}))
    with refused(capsys, r"none stored: the fixed-step plan"):
        mb.main(["--quick", "--json", str(path), "--resume"])
    state.write_text(json.dumps({"settings": mb.settings(True)}))
    with refused(capsys, r"other settings \(cycles: 2 -> 3\)"):
        mb.main(["--quick", "--max-cycles", "3", "--json", str(path), "--resume"])


def test_run_seed_records_cycles_steps_and_flat_per_fit(mb, monkeypatch):
    """Flat MoE never flat (runs to the cap of 3), every other fit flat after 2 cycles."""
    calls = []

    def fake_train(model, data, config=None, parameters=None, *, validation=None, **kw):
        calls.append(config.seed)
        if validation is None:  # the old recipe of the linear diagnosis: no curve
            return _run([], config.steps)
        c = config.seed // 100
        steps, every = config.steps, config.eval_every
        if len(model.config.experts) == 1 or c == 0:  # flat MoE, or any first cycle
            return _run(_rising(c, steps, every), steps)
        return _run([[s, 0.002 * steps] for s in range(every, steps + 1, every)], steps)

    def fake_routers(model, subject, voxels, targets, config=None, num_voxels=None, **kw):
        if subject not in model.subjects:
            model.add_subject(subject, voxels.shape[1])
        return fake_train(model, {subject: (voxels, targets)}, config, **kw)

    train = sys.modules["_more_brain_train"]  # run_seed's module: patch where it is looked up
    monkeypatch.setattr(train, "train_encoder", fake_train)
    monkeypatch.setattr(train, "finetune_routers", fake_routers)
    cfg = mb.settings(True, 3)
    targets = np.random.default_rng(0).standard_normal((N := 700, 384)).astype(np.float32)
    assert N > mb.N_TEST + mb.N_VAL + max(cfg["new_rows"])
    out = mb.run_seed(0, cfg, targets, None)
    rows, curves = mb.rows_of({"0": out, "1": out}, cfg, [0, 1])
    got = {(r.case, r.metric): r.value for r in rows}
    fits = ["flat MoE", "MoRE-Brain", "linear MoRE-Brain"] + [
        f"new subject {n} rows {c}" for n in cfg["new_rows"] for c in mb.TRANSFER[:3]
    ]
    for case in fits:
        capped = case == "flat MoE"
        steps = cfg["ft_steps"] if case.startswith("new") else cfg["steps"]
        cycles = 3 if capped else 2
        for s in (0, 1):
            assert got[(case, f"cycles seed {s}")] == cycles, case
            assert got[(case, f"steps seed {s}")] == cycles * steps, case
            assert got[(case, f"flat seed {s}")] == (0.0 if capped else 1.0), case
        assert got[(case, "flat")] == (0.0 if capped else 1.0)
        assert [p[0] for p in curves[case]["0"]][-1] == cycles * steps
    # every learned fit's cycles drew seeds 0, 100 (and 200 for the capped flat MoE)
    assert sorted(calls) == [0] * 10 + [100] * 9 + [200]  # with the old recipe's 0
