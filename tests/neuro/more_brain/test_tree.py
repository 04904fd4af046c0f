"""Tree expert-choice routing vs a naive per-expert loop (outputs and all gradients).

Every random draw (inputs and parameters) comes from the test's own generator.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sci_moe.moe import usage_mse_loss
from sci_moe.neuro.more_brain import (
    TreeExpertChoice,
    tree_capacities,
    tree_level_diagnostics,
    tree_level_usage_loss,
)
from tests.conftest import FLOAT_TOLERANCE


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    """A draw in the default dtype (float32 or float64) from ``g``."""
    return torch.randn(*shape, generator=g, dtype=torch.get_default_dtype())


def _tree(g: torch.Generator, *args, **kwargs) -> TreeExpertChoice:
    """A tree whose every parameter is redrawn from ``g`` (no global RNG state)."""
    tree = TreeExpertChoice(*args, **kwargs)
    with torch.no_grad():
        for p in tree.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return tree


def _naive_tree(tree: TreeExpertChoice, x: torch.Tensor):
    """Per group, per level, per expert: softmax over siblings, top-k, expert on rows."""
    G, T, _ = x.shape
    caps = tree.capacities(T)
    pooled = [[] for _ in tree.experts]
    chosen = [[] for _ in tree.experts]
    for g in range(G):
        rows = [[(t, x[g, t]) for t in range(T)]]  # per parent: list of (token, row)
        parents = 1
        for level, (E, k) in enumerate(zip(tree.experts, caps, strict=True)):
            b = E // parents
            W = tree.levels[level].router.weight
            bank = tree.levels[level].experts
            new_rows, level_pool, level_chosen = [], [], []
            for e in range(E):
                p = e // b
                cand = rows[p]
                scores = []
                for _, r in cand:
                    logits = torch.stack([W[p * b + c] @ r for c in range(b)])
                    scores.append(logits.softmax(0)[e - p * b])
                scores = torch.stack(scores)
                top = torch.argsort(scores, descending=True, stable=True)[:k].tolist()
                outs = []
                for i in top:
                    tok, r = cand[i]
                    o = scores[i] * bank.forward_expert(e, r.unsqueeze(0))[0]
                    o = r + o if tree.residual else o
                    outs.append((tok, o))
                new_rows.append(outs)
                level_pool.append(torch.stack([o for _, o in outs]).sum(0))
                level_chosen.append(sorted(t for t, _ in outs))
            pooled[level].append(torch.stack(level_pool))
            chosen[level].append(level_chosen)
            rows, parents = new_rows, E
    return [torch.stack(p) for p in pooled], chosen


@pytest.mark.parametrize("experts", [(2, 4, 8), (3,), (2, 6)])
@pytest.mark.parametrize("residual", [True, False])
def test_tree_matches_naive_loop(float_dtype, experts, residual):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(0)
    tree = _tree(g, 6, experts, capacity_factor=1.0, d_hidden=5, residual=residual)
    x = _randn(g, 3, 24, 6).requires_grad_()
    levels = tree(x)
    fast = [lvl.per_expert(lvl.output).sum(2) for lvl in levels]
    ref, ref_chosen = _naive_tree(tree, x)
    for lvl, f, r, rc in zip(levels, fast, ref, ref_chosen, strict=True):
        torch.testing.assert_close(f, r, atol=tol, rtol=tol)
        tok = lvl.per_expert(lvl.token).sort(-1).values.tolist()
        assert tok == rc
    params = [x, *tree.parameters()]
    gw = [_randn(g, *f.shape) for f in fast]
    g_fast = torch.autograd.grad(sum((f * w).sum() for f, w in zip(fast, gw, strict=True)), params)
    g_ref = torch.autograd.grad(sum((r * w).sum() for r, w in zip(ref, gw, strict=True)), params)
    for a, b in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_capacity_respected_and_children_choose_from_parent():
    g = _gen(1)
    tree = _tree(g, 4, (2, 4, 8, 16), capacity_factor=1.0)
    levels = tree(_randn(g, 5, 64, 4))
    assert [lvl.capacity for lvl in levels] == [32, 16, 8, 4] == tree.capacities(64)
    prev = None
    for lvl in levels:
        counts = torch.bincount(lvl.expert, minlength=lvl.num_experts)
        assert (counts == lvl.num_groups * lvl.capacity).all()
        # within an expert and group the chosen rows are distinct
        src = lvl.per_expert(lvl.source)
        assert all(len(set(r.tolist())) == lvl.capacity for r in src.flatten(0, 1))
        if prev is not None:
            # child c's rows come from its parent's rows: source // k_prev = (g, parent)
            parent_of_row = lvl.source // prev.capacity
            grp = torch.arange(lvl.num_groups).repeat_interleave(lvl.num_experts * lvl.capacity)
            parent = lvl.expert // lvl.branching
            assert torch.equal(parent_of_row, grp * prev.num_experts + parent)
        prev = lvl
    caps = tree_capacities(100, (2, 4), 1.5)
    assert caps == [75, 56]


def test_empty_capacity_and_bad_levels_raise():
    with pytest.raises(ValueError, match="0 rows"):
        tree_capacities(8, (2, 4, 8, 16), 1.0)
    with pytest.raises(ValueError, match="multiple"):
        tree_capacities(64, (2, 3), 1.0)
    g = _gen(2)
    tree = _tree(g, 4, (2, 4, 8, 16))
    with pytest.raises(ValueError, match="0 rows"):
        tree(_randn(g, 2, 10, 4))
    with pytest.raises(ValueError, match="shape"):
        tree(_randn(g, 2, 64, 5))
    with pytest.raises(ValueError, match="capacity_factor"):
        TreeExpertChoice(4, (2,), capacity_factor=0.0)


def test_usage_mse_loss_matches_formula(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    logits = _randn(_gen(3), 3, 7, 4).requires_grad_()
    p = logits.softmax(-1)
    loss = usage_mse_loss(p)
    ref = (
        sum((sum(p[g, n, c] for n in range(7)) / 7 - 0.25) ** 2 for g in range(3) for c in range(4))
        / 12
    )
    torch.testing.assert_close(loss, ref, atol=tol, rtol=tol)
    (ga,) = torch.autograd.grad(loss, logits, retain_graph=True)
    (gb,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(ga, gb, atol=tol, rtol=tol)
    assert float(usage_mse_loss(torch.full((5, 4), 0.25))) == 0.0
    with pytest.raises(ValueError):
        usage_mse_loss(torch.ones(3))


def test_level_usage_loss_and_diagnostics():
    g = _gen(4)
    tree = _tree(g, 4, (2, 4))
    levels = tree(_randn(g, 3, 16, 4))
    lvl = levels[1]
    p = lvl.candidate_probs  # (G, P, k_prev, b)
    ref = torch.stack([((p[:, q].reshape(-1, 2).mean(0) - 0.5) ** 2) for q in range(2)]).mean()
    torch.testing.assert_close(tree_level_usage_loss(lvl), ref)
    d0 = tree_level_diagnostics(levels[0], 16)
    d1 = tree_level_diagnostics(lvl, 2 * levels[0].capacity)
    assert d0["num_experts"] == 2 and d1["capacity"] == 4
    assert d0["load_min"] == d0["load_max"] == 3 * 8
    assert 0 < d0["coverage"] <= 1 and d0["overlap"] >= 1
    assert 0 <= d1["usage_entropy"] <= 1 + 1e-12
    # one parent's rows: coverage is at most c_f=1 partition of the candidates
    assert F.relu(torch.tensor(d1["coverage"] - 1.0)) == 0
