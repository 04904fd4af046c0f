"""Merging strategies: inference relations, fine-tuning effects, FLOP accounting."""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import evaluate_scores, make_graph_collection
from sci_moe.graphs.merging import (
    AnyGraphConfig,
    AnyGraphMoE,
    MergeConfig,
    PretrainConfig,
    ensemble_forward,
    fine_tune_merging,
    infer_embeddings,
    inference_flops,
    pretrain,
    proximity_loss,
    selected_experts,
)
from sci_moe.moe import copy_expert, merged_forward


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    col = make_graph_collection(4, 2, num_nodes=(60, 100), feature_dims=(2, 12), seed=0)
    model = AnyGraphMoE(AnyGraphConfig(d_model=12, num_experts=3))
    res = pretrain(model, col.train, PretrainConfig(steps=20, batch_size=64, reassign_every=5))
    routing = model.route_graphs(res.encoded, col.train, top_k=2)
    return model, col, res.encoded, routing


def test_config_validation():
    with pytest.raises(ValueError, match="strategy"):
        MergeConfig(strategy="average")
    with pytest.raises(ValueError, match="kd_kind"):
        MergeConfig(kd_kind="l2")
    with pytest.raises(ValueError, match="top_k"):
        MergeConfig(top_k=0)


def test_inference_strategies(trained):
    model, col, encoded, routing = trained
    z = encoded[0]
    ids, w = selected_experts(routing, 0)
    assert float(w.sum()) == pytest.approx(1.0)
    top1 = infer_embeddings(model, z, ids, w, "top1")
    assert torch.equal(top1, infer_embeddings(model, z, ids, w, "rank1"))
    assert torch.equal(
        infer_embeddings(model, z, ids, w, "rank2"), model.experts.forward_expert(ids[1], z)
    )
    ens = infer_embeddings(model, z, ids, w, "ensemble")
    torch.testing.assert_close(ens, ensemble_forward(model.experts, z, ids, w))
    merged = infer_embeddings(model, z, ids, w, "kdem")
    torch.testing.assert_close(
        merged, merged_forward(model.experts, z, ids, w), atol=1e-5, rtol=1e-5
    )
    with pytest.raises(ValueError, match="top_k >= 3"):
        infer_embeddings(model, z, ids, w, "rank3")
    m = evaluate_scores(merged, col.train[0])
    assert 0 <= m["auc"] <= 1


def test_identical_experts_make_every_strategy_equal(trained):
    model, _, encoded, routing = trained
    same = AnyGraphMoE(model.config)
    same.load_state_dict(model.state_dict())
    copy_expert(same.experts, 0)
    z = encoded[1]
    ids, w = selected_experts(routing, 1)
    ref = same.experts.forward_expert(0, z)
    for s in ("top1", "ensemble", "merge"):
        torch.testing.assert_close(infer_embeddings(same, z, ids, w, s), ref, atol=1e-5, rtol=1e-5)


def _gap(model, encoded, routing):
    total = 0.0
    for g, z in enumerate(encoded):
        ids, w = selected_experts(routing, g)
        m = infer_embeddings(model, z, ids, w, "merge")
        e = infer_embeddings(model, z, ids, w, "ensemble")
        total += float((m - e).square().sum(-1).mean())
    return total


def test_kdem_and_ppem_close_the_merge_ensemble_gap(trained):
    model, col, encoded, routing = trained
    before = _gap(model, encoded, routing)
    kdem = fine_tune_merging(
        model,
        col.train,
        encoded,
        routing,
        MergeConfig(
            strategy="kdem", kd_kind="mse", kd_weight=10.0, steps=30, batch_size=64, lr=3e-3
        ),
    )
    assert _gap(kdem, encoded, routing) < before
    ppem = fine_tune_merging(
        model,
        col.train,
        encoded,
        routing,
        MergeConfig(strategy="ppem", proximity_weight=1.0, steps=30, batch_size=64, lr=3e-3),
    )
    ids, w = selected_experts(routing, 0)
    assert float(proximity_loss(ppem.experts, ids, w)) < float(
        proximity_loss(model.experts, ids, w)
    )
    assert _gap(ppem, encoded, routing) < before
    # the pre-trained model is untouched; strategies without fine-tuning return it
    assert (
        fine_tune_merging(model, col.train, encoded, routing, MergeConfig(strategy="merge"))
        is model
    )
    assert _gap(model, encoded, routing) == pytest.approx(before)


def test_inference_flops(trained):
    model = trained[0]
    one = inference_flops(model, 100, "top1", 2)
    assert inference_flops(model, 100, "ensemble", 2) / one == pytest.approx(2.0, rel=0.05)
    assert 1.0 < inference_flops(model, 100, "kdem", 2) / one < 1.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("strategy", ["kdem", "ppem"])
def test_pretrain_and_merged_fine_tuning_on_cuda(strategy):
    """CPU encodings and a CPU model in, every engine run on cuda; the losses of the first
    steps are the CPU run's (same batches, same fixed assignment)."""
    col = make_graph_collection(3, 1, num_nodes=(40, 60), feature_dims=(2, 6), seed=0)
    losses, tuned_on = {}, {}
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = AnyGraphMoE(AnyGraphConfig(d_model=8, num_experts=3))
        cfg = PretrainConfig(steps=4, batch_size=32, device=device)
        res = pretrain(model, col.train, cfg, assignment=[0, 1, 2])  # encodes on the CPU
        assert res.encoded[0].device.type == device == next(model.parameters()).device.type
        losses[device] = res.losses
        cpu_encoded = [z.cpu() for z in res.encoded]
        routing = model.route_graphs(cpu_encoded, col.train, top_k=2)  # z moved inside
        mc = MergeConfig(strategy=strategy, steps=3, batch_size=32, device=device)
        tuned = fine_tune_merging(model, col.train, cpu_encoded, routing, mc)
        ids, w = selected_experts(routing, 0)
        h = infer_embeddings(tuned, cpu_encoded[0], ids, w, strategy)
        assert h.device.type == device and bool(torch.isfinite(h).all())
        assert 0 <= evaluate_scores(h.cpu(), col.train[0])["auc"] <= 1
        tuned_on[device] = next(tuned.parameters()).device.type
    assert tuned_on == {"cpu": "cpu", "cuda": "cuda"}
    assert losses["cuda"] == pytest.approx(losses["cpu"], rel=1e-3)
