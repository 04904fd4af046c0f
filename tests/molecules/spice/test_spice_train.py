"""Training API: schedule, exact resume, early stopping, test MAE at best validation,
upcycling during training, splits, results JSON."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from sci_moe.molecules.spice.baselines import MODEL_NAMES, build_model
from sci_moe.molecules.spice.train import (
    RESULTS_NAME,
    TrainConfig,
    evaluate,
    fit,
    load_checkpoint,
    split_indices,
)
from sci_moe.train import CHECKPOINT_NAME, lr_factor, warmup_steps
from tests.molecules.spice.test_spice_model import FA, FB, random_graph

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
    # 10 epochs of 5 batches: the engine's 50 steps, 10 of warm-up, one evaluation per epoch
    cfg = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=2, min_lr_ratio=0.01).for_batches(5)
    assert (cfg.steps, cfg.eval_every) == (50, 5)
    assert warmup_steps(cfg.steps, cfg.warmup) == 10

    def lrs(c):
        return [
            c.lr * lr_factor(s, c.steps, c.schedule, c.warmup, c.min_lr_ratio) for s in range(50)
        ]

    lr = lrs(cfg)
    assert lr[0] == pytest.approx(1e-3 / 11)  # the engine's warm-up: lr (s + 1) / (W + 1)
    assert lr[10] == pytest.approx(1e-3)  # end of warm-up: the peak
    assert all(a < b for a, b in itertools.pairwise(lr[:11]))  # rising warm-up
    assert all(a >= b for a, b in itertools.pairwise(lr[10:]))  # then decaying
    assert lr[-1] == pytest.approx(1e-5)  # min_lr_ratio * lr at the last step
    mid = lr[10 + 39 // 2]
    assert mid == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + math.cos(math.pi * 19 / 39)))
    lin = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=0, schedule="linear", min_lr_ratio=0.0)
    lin_lr = lrs(lin.for_batches(5))
    assert lin_lr[0] == pytest.approx(1e-3) and lin_lr[49] == pytest.approx(0.0)
    const = TrainConfig(epochs=10, lr=1e-3, warmup_epochs=0, schedule="constant")
    assert set(lrs(const.for_batches(5))) == {1e-3}
    # the step-counted fields follow from the epochs; a different value is refused
    with pytest.raises(ValueError, match="steps=7 does not match epochs"):
        TrainConfig(epochs=10, steps=7).for_batches(5)
    assert TrainConfig(epochs=10, steps=50).for_batches(5).steps == 50


def test_exact_resume_with_upcycling_and_noise(tmp_path, data):
    train, val, test = data
    cfg = TrainConfig(epochs=4, batch_size=3, upcycle_epochs=1, progress=False, seed=3)
    bpe = 3  # ceil(8 / 3) batches per epoch

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
    assert ck["step"] == 4 * bpe
    # upcycled after epoch 1, then every expert was trained away from expert 0
    assert not full.is_dense
    up = full.moe_layers()[0].scalar.experts.up
    assert all(not torch.equal(up[0], up[e]) for e in range(1, 4))
    saved = json.loads((tmp_path / "a" / RESULTS_NAME).read_text())
    assert saved["test_mae"] == r_full["test_mae"]


def test_exact_resume_mid_epoch_from_the_previous_checkpoint(tmp_path, data):
    """A damaged newest checkpoint: the run resumes from the previous one, in the middle
    of an epoch (its partial training-loss sums included), and still ends bitwise equal."""
    train, val, test = data
    cfg = TrainConfig(epochs=3, batch_size=3, checkpoint_every=1, progress=False, seed=1)

    def model():
        torch.manual_seed(0)
        return build_model("spice", noise_std=0.5, **OPTS)

    full = model()
    r_full = fit(full, train, val, test, cfg, out_dir=tmp_path / "a")
    part = model()
    fit(part, train, val, test, cfg, out_dir=tmp_path / "b", stop_after=1)  # steps 1-3
    ck = tmp_path / "b" / CHECKPOINT_NAME
    ck.write_bytes(ck.read_bytes()[:-10])  # checkpoint_prev.pt (step 2) is intact
    resumed = model()
    r_res = fit(resumed, train, val, test, cfg, out_dir=tmp_path / "b", resume=True)
    assert r_res["finished"] and r_res["step"] == 9
    for k, v in full.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    assert r_res["history"] == r_full["history"]


def test_resume_rejects_another_model(tmp_path, data):
    train, val, _ = data
    cfg = TrainConfig(epochs=1, batch_size=4, progress=False)
    fit(build_model("gnn2d", **OPTS), train, val, config=cfg, out_dir=tmp_path)
    with pytest.raises(ValueError, match="another model"):
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
    c = TrainConfig(epochs=5, lr=3e-3, batch_size=2).for_batches(4)
    applied = [
        c.lr * lr_factor(4 * e - 1, 20, c.schedule, c.warmup, c.min_lr_ratio)
        for e in r["history"]["epoch"]
    ]
    assert r["history"]["lr"] == pytest.approx(applied)  # the last step's LR of each epoch
    assert list(r["test_mae"].values()) == pytest.approx(evaluate(model, test)["mae"])


def test_early_stopping_counts_only_epochs_after_upcycling(data):
    train, val, _ = data
    # no improvement ever (an LR below float32 resolution); patience 1 stops at the first
    # epoch after the two dense ones, not during the dense phase
    cfg = TrainConfig(
        epochs=10, lr=1e-14, patience=1, warmup_epochs=0, upcycle_epochs=2, progress=False
    )
    r = fit(build_model("spice", upcycle=True, **OPTS), train, val, config=cfg)
    assert r["stopped_early"] and r["epochs_run"] == 3


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


def test_explicit_cpu_device_equals_the_default(data):
    train, val, test = data
    runs = []
    for device in (None, "cpu"):
        torch.manual_seed(0)
        model = build_model("random_conformer", **OPTS)
        cfg = TrainConfig(epochs=2, batch_size=4, progress=False, device=device)
        runs.append((fit(model, train, val, test, cfg), model))
    (a, ma), (b, mb) = runs
    assert a["test_mae"] == b["test_mae"] and a["history"] == b["history"]
    sa, sb = ma.state_dict(), mb.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["spice_upcycled", "random_conformer", "gnn2d"])
def test_fit_on_cuda_matches_the_cpu(name, data):
    """Training and evaluation batches, target statistics, upcycling (the AdamW moments)
    and the random conformer draws on the GPU; close to the CPU run."""
    train, val, test = data
    runs = []
    for device in ("cuda", "cpu"):
        torch.manual_seed(0)
        if name == "spice_upcycled":
            model = build_model("spice", upcycle=True, noise_std=0.0, **OPTS)
            extra = {"upcycle_epochs": 1}
        else:
            model, extra = build_model(name, **OPTS), {}
        cfg = TrainConfig(epochs=2, batch_size=4, progress=False, device=device, **extra)
        runs.append((fit(model, train, val, test, cfg), model))
    (g, mg), (c, _) = runs
    assert next(mg.parameters()).device.type == "cuda"
    assert mg.target_std.device.type == "cuda"
    for k in ("test_mae", "val_mae"):
        assert list(g[k].values()) == pytest.approx(list(c[k].values()), rel=1e-2, abs=1e-4)
    assert np.isfinite(g["history"]["train_loss"]).all()
