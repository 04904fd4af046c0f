"""Router modes slot_top_m, competence, tree and the dense mask: the numbers of the
methods' formulas (bitwise where the arithmetic is the same), and the option checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sci_moe.moe import MLPExperts, Router, dispatch


def _slot_weights(logits, own, normalize):
    """FedLEASE's slot gate written out: softmax over the ``2M - 1`` slots, top-``M``
    slots, the own slots' mass in column 0, the other experts' slots after it."""
    M = (logits.shape[1] + 1) // 2
    p = logits.softmax(-1)
    sel = torch.zeros_like(p, dtype=torch.bool).scatter(1, p.topk(M, -1).indices, True)
    kept = p * sel
    w = torch.cat([kept[:, :M].sum(1, keepdim=True), kept[:, M:]], 1)
    return w / kept.sum(1, keepdim=True) if normalize else w


@pytest.mark.parametrize("normalize", [False, True])
def test_slot_top_m_is_the_slot_gate(normalize):
    torch.manual_seed(0)
    router = Router(d_model=8, num_experts=3, mode="slot_top_m", normalize=normalize, init_std=0.02)
    assert router.weight.shape == (5, 8) and router.top_k == 3
    x, own = torch.randn(6, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    r = router(x, own=own)
    assert torch.equal(r.weights, _slot_weights(x @ router.weight.t(), own, normalize))
    assert bool((r.indices[:, 0] == own).all())
    # the init is FedLEASE's randn * std
    torch.manual_seed(0)
    assert torch.equal(router.weight, torch.randn(5, 8) * 0.02)


def test_competence_is_anygraphs_rule():
    scores, usage = torch.rand(5, 4), torch.tensor([3.0, 1.0, 0.0, 2.0])
    router = Router(
        d_model=4, num_experts=4, top_k=2, mode="competence", recalibration=0.5, temperature=0.2
    )
    assert router.weight is None and not list(router.parameters())
    r = router(scores, usage=usage)
    s = scores * ((1.0 - usage / usage.sum()) * 0.5 + 1.0 - 0.25)
    top, idx = s.topk(2, dim=-1)
    assert torch.equal(r.indices, idx)
    assert torch.equal(r.weights, (top / 0.2).softmax(-1))
    assert torch.equal(r.probs, (s / 0.2).softmax(-1))
    assert torch.equal(r.logits, s / 0.2)


def _masked_gate(z, score, mask):
    if score == "softmax":
        return z.masked_fill(~mask, float("-inf")).softmax(-1)
    if score == "sigmoid":
        return torch.where(mask, z.sigmoid(), torch.zeros_like(z))
    sp = torch.where(mask, F.softplus(z), torch.zeros_like(z))
    return sp / (sp.sum(-1, keepdim=True) + 1e-9)


@pytest.mark.parametrize("score", ["softmax", "sigmoid", "norm_softplus"])
def test_dense_mask_is_the_masked_gate(score):
    torch.manual_seed(1)
    router = Router(d_model=6, num_experts=4, mode="dense", score=score, normalize=False)
    x = torch.randn(5, 6)
    mask = torch.rand(5, 4) > 0.4
    mask[:, 1] = True
    r = router(x, mask=mask)
    assert torch.equal(r.weights, _masked_gate(router.compute_logits(x), score, mask))
    assert bool((r.weights[~mask] == 0).all())
    # without a mask: unchanged
    assert torch.equal(router(x).weights, router(x, mask=None).weights)


def _naive_tree_level(x, weight, parents, groups, cf):
    """Per group, parent and child: the child's top-k of its parent's rows."""
    E = weight.shape[0]
    b = E // parents
    v = x.shape[0] // (groups * parents)
    k = min(v, int(cf * v / b))
    src, w = [], []
    for g in range(groups):
        for p in range(parents):
            rows = torch.arange((g * parents + p) * v, (g * parents + p + 1) * v)
            probs = (x[rows] @ weight[p * b : (p + 1) * b].t()).softmax(-1)  # (v, b)
            for c in range(b):
                top = probs[:, c].topk(k)
                src.append(rows[top.indices])
                w.append(top.values)
    return torch.cat(src), torch.cat(w)


def test_tree_level_is_expert_choice_within_each_parent():
    torch.manual_seed(2)
    x = torch.randn(2 * 3 * 10, 5, dtype=torch.float64)
    router = Router(d_model=5, num_experts=6, mode="tree", capacity_factor=1.5)
    r = router(x, parents=3, groups=2)
    src, w = _naive_tree_level(x, router.weight.double(), 3, 2, 1.5)
    assert torch.equal(r.source, src)
    torch.testing.assert_close(r.weights[:, 0], w)
    assert r.indices.shape == (2 * 6 * 7, 1) and r.top_k == 1  # k = floor(1.5 * 10 / 2)
    # expert e owns rows (g, e, slot); dispatch reads x[source]
    bank = MLPExperts(6, 5, 7).double()
    y = dispatch(x, r, bank)
    e0 = r.indices[0, 0].item()
    torch.testing.assert_close(y[0], r.weights[0, 0] * bank.forward_expert(e0, x[src[:1]])[0])
    # given scores (kept by the caller) give the same routing
    scores = router.tree_scores(x, 3, 2)
    assert torch.equal(router(x, parents=3, groups=2, scores=scores).source, r.source)


def test_mode_options_are_checked():
    with pytest.raises(ValueError, match="does not take"):
        Router(d_model=4, num_experts=4, mode="competence", selection_bias=True)
    with pytest.raises(ValueError, match="d_model must equal num_experts"):
        Router(d_model=3, num_experts=4, mode="competence")
    with pytest.raises(ValueError, match="capacity_factor"):
        Router(d_model=4, num_experts=4, mode="tree")
    with pytest.raises(ValueError, match="score="):
        Router(d_model=4, num_experts=4, mode="slot_top_m", score="sigmoid")
    with pytest.raises(ValueError, match="temperature"):
        Router(d_model=4, num_experts=4, mode="competence", temperature=0.0)
    topk = Router(d_model=4, num_experts=4)
    with pytest.raises(ValueError, match="own= is an option of mode='slot_top_m'"):
        topk(torch.randn(2, 4), own=0)
    with pytest.raises(ValueError, match="needs own="):
        Router(d_model=4, num_experts=2, mode="slot_top_m")(torch.randn(2, 4))
    with pytest.raises(ValueError, match="parents= and groups="):
        Router(d_model=4, num_experts=2, mode="tree", capacity_factor=1.0)(torch.randn(4, 4))
