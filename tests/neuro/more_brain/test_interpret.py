"""Voxel -> expert assignments of an encoder, scored against planted regions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.neuro import plant_voxels, roi_labels
from sci_moe.neuro.more_brain import MoREBrainEncoder, assignment_scores, voxel_assignments


def _planted_router_encoder(roi: np.ndarray, value_scale: float) -> MoREBrainEncoder:
    """An encoder whose routers pick the planted regions ``roi`` (shape (2, V), 2 -> 4).

    Voxel ``v``'s token is ``c_v + x_v a_v`` with identity ``c_v = (+-1, +-1, 0, 0)``: the
    first sign says its level-0 region, the second which child of that region it is in.
    The level-0 router scores ``+-coordinate 0``, the level-1 router ``+-coordinate 1``
    and the experts output 0 (rows pass unchanged), so with ``value_scale = 0`` every
    expert chooses exactly its planted region; ``a_v`` of size ``value_scale`` lets some
    samples route a voxel elsewhere, and the assignment is the most frequent choice.
    """
    V = roi.shape[1]
    m = MoREBrainEncoder(
        voxels_per_subject={"a": V}, target_dim=4, d_model=4, d_hidden=4, experts=(2, 4)
    )
    sign = lambda b: torch.as_tensor(1.0 - 2.0 * b, dtype=torch.float32)  # noqa: E731
    with torch.no_grad():
        for p in (q for lvl in m.tree.levels for q in lvl.experts.parameters()):
            p.zero_()
        ident = torch.zeros(V, 4)
        ident[:, 0] = sign(roi[0])
        ident[:, 1] = sign(roi[1] % 2)
        m.frontend.identity["a"].copy_(ident)
        m.frontend.value["a"].copy_(value_scale * torch.randn(V, 4))
        w0, w1 = torch.zeros(2, 4), torch.zeros(4, 4)
        w0[:, 0] = torch.tensor([4.0, -4.0])  # expert e of level 0 <- region e
        w1[:, 1] = torch.tensor([4.0, -4.0, 4.0, -4.0])  # child 2p + c <- (region p, child c)
        m.tree.levels[0].router.weight.copy_(w0)
        m.tree.levels[1].router.weight.copy_(w1)
    return m


@pytest.mark.parametrize("value_scale", [0.0, 0.5])
def test_voxel_assignments_recover_planted_routing(value_scale):
    d = plant_voxels(np.random.default_rng(0).normal(size=(40, 12)), 32, 1, branching=(2, 4))
    roi = d.roi["subj01"]  # permuted voxel order, as a subject sees it
    torch.manual_seed(0)
    model = _planted_router_encoder(roi, value_scale)
    x = torch.as_tensor(d.voxels["subj01"])
    assign = voxel_assignments(model, x, "a", batch_size=16)  # several batches counted
    assert [a.shape for a in assign] == [(32,), (32,)]
    for level in (0, 1):
        np.testing.assert_array_equal(assign[level], roi[level])
        score = assignment_scores(assign[level], roi[level])
        assert score["ari"] > 0.9 and score["nmi"] > 0.9
        assert abs(score["ari_chance"]) < 0.2  # a random assignment fails the threshold
        shuffled = np.random.default_rng(1).permutation(assign[level])
        assert assignment_scores(shuffled, roi[level])["ari"] < 0.9
    if value_scale:  # the routing differed between samples: the majority decided
        with torch.no_grad():
            chosen = model(x, "a").levels[0].token.view(40, 2, 16)[:, 0].sort(1).values
        assert not bool((chosen == chosen[:1]).all())


def test_voxel_assignments_unassigned_and_untrained_model():
    m = MoREBrainEncoder(
        voxels_per_subject={"a": 32},
        target_dim=4,
        d_model=4,
        d_hidden=4,
        experts=(2, 4),
        capacity_factor=0.5,
    )
    with torch.no_grad():
        m.frontend.value["a"].zero_()  # the same 8 + 8 voxels chosen in every sample
    assign = voxel_assignments(m, torch.randn(10, 32), "a")
    assert assign[0].max() <= 2 and assign[1].max() <= 4
    assert int((assign[0] == 2).sum()) == 16  # never chosen -> E_0 ("unassigned")
    with pytest.raises(ValueError):
        assignment_scores(roi_labels(32, (2, 4))[0][:5], roi_labels(32, (2, 4))[0])
