"""Training API: schedule, exact resume, early stopping, test MAE at best validation,
upcycling during training, splits, results JSON."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from sci_moe.molecules.baselines import MODEL_NAMES, build_model
from sci_moe.molecules.train import (
    CHECKPOINT_NAME,
    RESULTS_NAME,
    TrainConfig,
    evaluate,
    fit,
    load_checkpoint,
    split_indices,
)
from tests.molecules.test_spice_model import FA, FB, random_graph

OPTS = dict(
    n_targets=2,
    atom_dim=FA,
    bond_dim=FB,
    hidden=8,
    num_layers=1,
    num_rbf=4,
    num_experts=4,
    top_k=2,
    cutoff_nm=0.3,
    heads=2,
)


@pytest.fixture(scope="module")
def data():
    graphs = [random_graph(6, 2, seed=s) for s in range(12)]
    return graphs[:8], graphs[8:10], graphs[10:]


def test_lr_schedule_does_what_its_name_says():
    cfg = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=2, warmup_start=0.2, min_lr_ratio=0.01)
    lrs = [cfg.lr_at(s, 5) for s in range(50)]
    assert lrs[0] == pytest.approx(2e-4)
    assert lrs[10] == pytest.approx(1e-3)  # end of warm-up: the peak
    assert all(a < b for a, b in itertools.pairwise(lrs[:11]))  # rising warm-up
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))  # then decaying
    assert lrs[-1] == pytest.approx(1e-5)  # min_lr_ratio * lr at the last step
    mid = cfg.lr_at(10 + 39 // 2, 5)
    assert mid == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + math.cos(math.pi * 19 / 39)))
    lin = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=0, schedule="linear", min_lr_ratio=0.0)
    assert lin.lr_at(0, 5) == pytest.approx(1e-3) and lin.lr_at(49, 5) == pytest.approx(0.0)
    const = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=0, schedule="constant")
    assert {const.lr_at(s, 5) for s in range(50)} == {1e-3}


def test_exact_resume_with_upcycling_and_noise(tmp_path, data):
    train, val, test = data
    cfg = TrainConfig(epochs=4, batch_size=3, upcycle_epochs=1, progress=False, seed=3)

    def model():
        torch.manual_seed(0)
        return build_model("spice", upcycle=True, noise_std=0.5, **OPTS)

    full = model()
    r_full = fit(full, train, val, test, cfg, out_dir=tmp_path / "a")
    part = model()
    r_part = fit(part, train, val, test, cfg, out_dir=tmp_path / "b", stop_after=2)
    assert r_part["epochs_run"] == 2 and not r_part["finished"]
    resumed = model()
    r_res = fit(resumed, train, val, test, cfg, out_dir=tmp_path / "b", resume=True)
    assert r_res["epochs_run"] == 4 and r_res["finished"]
    for k, v in full.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    assert r_res["history"] == r_full["history"]
    assert r_res["test_mae"] == r_full["test_mae"]
    ck = load_checkpoint(tmp_path / "b" / CHECKPOINT_NAME)
    assert ck["epoch"] == 4
    # upcycled after epoch 1, then every expert was trained away from expert 0
    assert not full.is_dense
    up = full.moe_layers()[0].scalar_experts.up
    assert all(not torch.equal(up[0], up[e]) for e in range(1, 4))
    saved = json.loads((tmp_path / "a" / RESULTS_NAME).read_text())
    assert saved["test_mae"] == r_full["test_mae"]


def test_resume_rejects_another_model(tmp_path, data):
    train, val, _ = data
    cfg = TrainConfig(epochs=1, batch_size=4, progress=False)
    fit(build_model("gnn2d", **OPTS), train, val, config=cfg, out_dir=tmp_path)
    with pytest.raises(ValueError, match="different model"):
        fit(build_model("spice", **OPTS), train, val, config=cfg, out_dir=tmp_path, resume=True)


def test_early_stopping_and_test_at_best_validation(data):
    train, val, test = data
    # An LR below float32 resolution: validation never improves after epoch 1.
    cfg = TrainConfig(epochs=30, lr=1e-14, patience=3, warmup_epochs=0, progress=False)
    model = build_model("deepsets", **OPTS)
    r = fit(model, train, val, test, cfg)
    assert r["stopped_early"] and r["epochs_run"] == 4 and r["best_epoch"] == 1
    # a real run: best epoch is the argmin of the validation score, test at those weights
    model = build_model("single_conformer", **OPTS)
    r = fit(model, train, val, test, TrainConfig(epochs=5, lr=3e-3, batch_size=2, progress=False))
    scores = [np.mean(np.asarray(v) / model.target_std.numpy()) for v in r["history"]["val_mae"]]
    assert r["best_epoch"] == int(np.argmin(scores)) + 1
    assert list(r["test_mae"].values()) == pytest.approx(evaluate(model, test)["mae"])


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_trains(name, data):
    train, val, test = data
    r = fit(build_model(name, **OPTS), train, val, test, TrainConfig(epochs=1, progress=False))
    assert all(np.isfinite(v) for v in r["test_mae"].values()) and r["n_params"] > 0


def test_split_indices():
    a, b, c = split_indices(50, seed=123)
    assert (len(a), len(b), len(c)) == (35, 5, 10)
    assert len(set(a) | set(b) | set(c)) == 50
    a2, _, _ = split_indices(50, seed=123)
    assert np.array_equal(a, a2) and not np.array_equal(a, split_indices(50, seed=1)[0])
    with pytest.raises(ValueError, match="too few"):
        split_indices(4)


def test_config_errors(data):
    train, val, _ = data
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="plateau")
    with pytest.raises(ValueError, match="upcycle"):
        fit(build_model("spice", **OPTS), train, val, config=TrainConfig(upcycle_epochs=2))
    with pytest.raises(ValueError, match="resume"):
        fit(build_model("gnn2d", **OPTS), train, val, resume=True)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("schnet")
