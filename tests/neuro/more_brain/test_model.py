"""MoREBrainEncoder: shapes, bad input, router-only fine-tuning, training signal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.neuro import plant_voxels
from sci_moe.neuro.more_brain import (
    MoREBrainEncoder,
    TrainConfig,
    contrastive_loss,
    finetune_routers,
    predict,
    retrieval_accuracy,
    train_encoder,
)


def _model(**kw):
    kw.setdefault("voxels_per_subject", {"a": 32, "b": 48})
    return MoREBrainEncoder(target_dim=8, d_model=6, d_hidden=8, experts=(2, 4), **kw)


def test_forward_shapes_and_levels():
    m = _model()
    out = m(torch.randn(5, 48), "b")
    assert out.embedding.shape == (5, 8)
    assert len(out.level_embeddings) == 2 and len(out.levels) == 2
    torch.testing.assert_close(out.embedding, sum(out.level_embeddings) / 2)
    assert out.usage_loss.dim() == 0
    assert [lvl.capacity for lvl in out.levels] == [24, 12]


def test_bad_input_raises():
    m = _model()
    with pytest.raises(ValueError, match="expects 32"):
        m(torch.randn(4, 48), "a")
    x = torch.randn(4, 32)
    x[1, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        m(x, "a")
    with pytest.raises(ValueError, match="unknown subject"):
        m(torch.randn(4, 32), "zz")
    with pytest.raises(ValueError, match="0 rows"):
        _model(voxels_per_subject={"a": 3})
    with pytest.raises(ValueError, match="0 rows"):
        m.add_subject("c", 3)
    with pytest.raises(ValueError, match="fusion"):
        _model(fusion="max")


def test_router_only_finetune_keeps_experts_bit_identical():
    m = _model()
    experts = [p.detach().clone() for p in m.expert_parameters()]
    heads = [p.detach().clone() for p in m.head_parameters()]
    routers = [p.detach().clone() for p in m.router_parameters()]
    old_front = m.frontend.value["a"].detach().clone()
    x, y = torch.randn(20, 40), torch.randn(20, 8)
    finetune_routers(m, "new", x, y, TrainConfig(steps=5, batch_size=8, weight_decay=0.1))
    for a, b in zip(experts, m.expert_parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(heads, m.head_parameters(), strict=True):
        assert torch.equal(a, b)
    assert all(p.requires_grad for p in m.expert_parameters())  # restored
    assert any(not torch.equal(a, b) for a, b in zip(routers, m.router_parameters(), strict=True))
    assert torch.equal(old_front, m.frontend.value["a"])  # other subjects untouched
    assert "new" in m.subjects and m.frontend.num_voxels["new"] == 40


def test_training_learns_planted_targets():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((160, 60)).astype(np.float32)
    d = plant_voxels(y, num_voxels=64, num_subjects=1, snr=4.0, branching=(2, 4), seed=1)
    x = torch.tensor(d.voxels["subj01"])
    t = torch.tensor(y)
    m = MoREBrainEncoder(
        voxels_per_subject={"subj01": 64}, target_dim=60, d_model=8, d_hidden=16, experts=(2, 4)
    )
    before = retrieval_accuracy(predict(m, x[120:], "subj01"), t[120:])[5]
    run = train_encoder(m, {"subj01": (x[:120], t[:120])}, TrainConfig(steps=60, batch_size=32))
    hist = run.history
    assert len(hist) == 60 and run.result.finished
    after = retrieval_accuracy(predict(m, x[120:], "subj01"), t[120:])[5]
    assert hist[-1] < hist[0]
    assert after > before + 0.2 and after > 5 / 40 * 2


def test_contrastive_and_retrieval():
    y = torch.eye(4)
    assert retrieval_accuracy(y, y) == {1: 1.0, 5: 1.0}
    r = retrieval_accuracy(y.roll(1, 0), y, ks=(1, 2))
    assert r[1] == 0.0
    good = contrastive_loss(10 * y, y, 0.1)
    bad = contrastive_loss(y.roll(1, 0), y, 0.1)
    assert good < bad
    with pytest.raises(ValueError):
        retrieval_accuracy(y, y[:3])


def test_train_rejects_mismatched_data():
    m = _model()
    with pytest.raises(ValueError, match="same number"):
        train_encoder(m, {"a": (torch.randn(5, 32), torch.randn(4, 8))}, TrainConfig(steps=1))
    with pytest.raises(ValueError, match="dims"):
        train_encoder(m, {"a": (torch.randn(5, 32), torch.randn(5, 9))}, TrainConfig(steps=1))


def test_router_only_finetune_with_validation_keeps_best():
    m = _model()
    x, y = torch.randn(20, 40), torch.randn(20, 8)
    xv, yv = torch.randn(10, 40), torch.randn(10, 8)
    cfg = TrainConfig(steps=6, batch_size=8, eval_every=2, monitor="val_top1")
    run = finetune_routers(m, "new", x, y, cfg, validation=(xv, yv))
    assert [e["step"] for e in run.result.evals] == [2, 4, 6]
    assert run.result.best_metric == max(e["val_top1"] for e in run.result.evals)
    kept = retrieval_accuracy(predict(m, xv, "new"), yv)[1]
    assert kept == pytest.approx(run.result.best_metric)
