"""Training-free competence routing (Router mode "competence"): top-k, softmax weights,
AnyGraph's recalibration."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import Router, Routing, dispatch
from tests.moe._residual import randn, residual_bank


def competence_routing(scores, top_k, *, usage=None, **options):
    """The router of mode "competence" over ``scores.shape[-1]`` experts, applied once."""
    E = scores.shape[-1]
    router = Router(d_model=E, num_experts=E, top_k=top_k, mode="competence", **options)
    return router(scores, usage=usage)


def test_competence_routing():
    scores = torch.tensor([[0.6, 0.9, 0.7], [0.8, 0.5, 0.55]])
    r = competence_routing(scores, 2, temperature=0.1)
    assert isinstance(r, Routing)
    assert r.indices.tolist() == [[1, 2], [0, 2]]
    e = torch.exp(torch.tensor([0.9, 0.7]) / 0.1)
    torch.testing.assert_close(r.weights[0], (e / e.sum()).to(r.weights.dtype))
    assert r.probs.shape == (2, 3)
    # AnyGraph's recalibration: the heavily used expert 1 loses to expert 2
    usage = torch.tensor([1.0, 10.0, 1.0])
    r = competence_routing(scores, 1, usage=usage, recalibration=0.8)
    factor = (1 - usage / usage.sum()) * 0.8 + 1 - 0.4
    assert r.indices[:, 0].tolist() == (scores * factor).argmax(1).tolist()
    assert r.indices[0, 0] == 2
    with pytest.raises(ValueError, match="top_k"):
        competence_routing(scores, 4)
    with pytest.raises(ValueError, match="usage"):
        competence_routing(scores, 1, recalibration=0.5)
    with pytest.raises(ValueError, match="temperature"):
        competence_routing(scores, 1, temperature=0.0)
    with pytest.raises(ValueError, match="shape"):
        competence_routing(scores[0], 1)


def test_competence_routing_feeds_dispatch():
    bank = residual_bank(E=3)
    x = randn(2, 6, seed=1)
    r = competence_routing(torch.tensor([[0.6, 0.9, 0.7], [0.8, 0.5, 0.55]]), 2)
    y = dispatch(x, r, bank)
    ref = torch.stack(
        [
            sum(
                r.weights[t, j] * bank.forward_expert(int(r.indices[t, j]), x[t : t + 1])[0]
                for j in range(2)
            )
            for t in range(2)
        ]
    )
    torch.testing.assert_close(y, ref)
