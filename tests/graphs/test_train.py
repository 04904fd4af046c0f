"""Training loop and metrics: macro-F1 against scikit-learn, learning beats chance."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import f1_score

from sci_moe.graphs import (
    EarlyFusionGCN,
    LateFusionGCN,
    MvCGE,
    PerViewGCN,
    TrainConfig,
    macro_f1,
    make_multiview_csbm,
    train_node_classifier,
)


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
    cfg = TrainConfig(epochs=40, lr=0.02)
    res = train_node_classifier(MvCGE(**kw, mmd_max_nodes=32), g, cfg)
    assert res.test_accuracy > 0.5 and 0 <= res.best_epoch < 40
    for model in (EarlyFusionGCN(**kw), LateFusionGCN(3, **kw), PerViewGCN(0, **kw)):
        assert train_node_classifier(model, g, cfg).test_accuracy > 0.35
    with pytest.raises(ValueError, match="train_mask"):
        g2 = make_multiview_csbm(num_nodes=40, seed=0)
        g2.train_mask = None
        train_node_classifier(PerViewGCN(0, **kw), g2, cfg)
