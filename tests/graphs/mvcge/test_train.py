"""Training loop and metrics: macro-F1 against scikit-learn, learning beats chance."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import f1_score

from sci_moe.graphs import make_multiview_csbm
from sci_moe.graphs.mvcge import (
    EarlyFusionGCN,
    LateFusionGCN,
    MvCGE,
    PerViewGCN,
    TrainConfig,
    macro_f1,
    train_node_classifier,
)
from sci_moe.train import seed_everything


def test_macro_f1_matches_sklearn():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (50,), generator=g)
    p = torch.randint(0, 3, (50,), generator=g)  # class 3 never predicted
    ref = f1_score(y.numpy(), p.numpy(), average="macro", labels=range(4), zero_division=0)
    assert macro_f1(p, y, 4) == pytest.approx(ref)


def test_models_learn_the_easy_csbm():
    g = make_multiview_csbm(
        num_nodes=200, mean_degree=8, contrast=(0.9, 0.9, 0.0), feature_signal=2.0, seed=0
    )
    kw = dict(in_dim=g.num_features, hidden_dim=16, num_classes=4)
    cfg = TrainConfig(steps=40, lr=0.02)
    res = train_node_classifier(MvCGE(**kw, mmd_max_nodes=32), g, cfg)
    assert res.test_accuracy > 0.5 and 0 <= res.best_epoch < 40
    assert len(res.history) == 40 and res.val_accuracy == max(
        h["val_accuracy"] for h in res.history
    )
    assert res.history[res.best_epoch]["val_accuracy"] == res.val_accuracy
    for model in (EarlyFusionGCN(**kw), LateFusionGCN(3, **kw), PerViewGCN(0, **kw)):
        assert train_node_classifier(model, g, cfg).test_accuracy > 0.35
    with pytest.raises(ValueError, match="train_mask"):
        g2 = make_multiview_csbm(num_nodes=40, seed=0)
        g2.train_mask = None
        train_node_classifier(PerViewGCN(0, **kw), g2, cfg)


def test_mvcge_exact_resume(tmp_path):
    """Dropout and the MMD node samples draw from the global generator: a run interrupted
    and resumed in a fresh model ends with bitwise the uninterrupted weights."""
    g = make_multiview_csbm(num_nodes=60, mean_degree=4, seed=1)
    kw = dict(in_dim=g.num_features, hidden_dim=8, num_classes=4, mmd_max_nodes=16)
    cfg = TrainConfig(steps=6, checkpoint_every=1)

    def model():
        seed_everything(0)
        return MvCGE(**kw)

    ref = model()
    a = train_node_classifier(ref, g, cfg, out_dir=tmp_path / "a")
    first = train_node_classifier(model(), g, cfg, out_dir=tmp_path / "b", stop_after=4)
    assert first.train["reason"] == "interrupted"
    got = model()
    b = train_node_classifier(got, g, cfg, out_dir=tmp_path / "b", resume=True)
    assert b.train["resumed_from"] == 4 and b.history == a.history
    sa, sb = ref.state_dict(), got.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert (b.test_accuracy, b.best_epoch) == (a.test_accuracy, a.best_epoch)
