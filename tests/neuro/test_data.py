"""Planted voxels (ground truth), voxel-matrix loader, ridge, assignment scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.neuro import (
    MoREBrainEncoder,
    RidgeDecoder,
    assignment_scores,
    load_voxel_matrix,
    plant_voxels,
    retrieval_accuracy,
    roi_labels,
    voxel_assignments,
)


def test_roi_labels_nested():
    lab = roi_labels(64, (2, 4, 8, 16))
    assert lab.shape == (4, 64)
    assert [len(set(r)) for r in lab] == [2, 4, 8, 16]
    for lo, hi in zip(lab[1:], lab[:-1], strict=True):
        assert np.array_equal(lo // 2, hi)  # children nest in their parent
    with pytest.raises(ValueError):
        roi_labels(8, (2, 4, 8, 16))


def test_planted_ground_truth_and_snr():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((400, 120))
    d = plant_voxels(y, num_voxels=64, num_subjects=2, snr=2.0, branching=(2, 4), seed=3)
    assert d.subjects == ["subj01", "subj02"]
    for s in d.subjects:
        x = d.voxels[s]
        assert x.shape == (400, 64) and x.dtype == np.float32
        # undo gain and permutation: the two subjects share the same signal
        ref = np.empty_like(x)
        ref[:, d.permutation[s]] = x / d.gain[s]
        np.testing.assert_array_equal(
            d.roi[s][:, np.argsort(d.permutation[s])], roi_labels(64, (2, 4))
        )
        var = ref.var(0)
        np.testing.assert_allclose(var.mean(), 3.0, rtol=0.1)  # snr + 1 noise
    # voxels of one planted region correlate more than voxels of different regions
    x = d.voxels["subj01"] / d.gain["subj01"]
    c = np.abs(np.corrcoef(x.T))
    lab = d.roi["subj01"][1]
    off = ~np.eye(64, dtype=bool)
    same = c[(lab[:, None] == lab[None]) & off].mean()
    diff = c[lab[:, None] != lab[None]].mean()
    assert same > 1.5 * diff, (same, diff)
    with pytest.raises(ValueError, match="snr"):
        plant_voxels(y, snr=0)
    with pytest.raises(ValueError, match="fit"):
        plant_voxels(y[:, :10], num_voxels=64)


def test_ridge_decodes_and_falls_with_snr():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((300, 90))
    accs = []
    for snr in (4.0, 0.05):
        d = plant_voxels(y, num_voxels=128, num_subjects=1, snr=snr, branching=(2, 4), seed=0)
        x = d.voxels["subj01"]
        r = RidgeDecoder().fit(x[:240], y[:240])
        accs.append(retrieval_accuracy(r.predict(x[240:]), y[240:])[1])
    assert accs[0] > 0.5 > accs[1]
    with pytest.raises(ValueError, match="columns"):
        r.predict(np.zeros((2, 3)))


def test_load_voxel_matrix(tmp_path):
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.save(tmp_path / "a.npy", x)
    np.testing.assert_array_equal(load_voxel_matrix(tmp_path / "a.npy"), x.astype(np.float32))
    np.savez(tmp_path / "b.npz", voxels=x, other=x)
    with pytest.raises(ValueError, match="key"):
        load_voxel_matrix(tmp_path / "b.npz")
    assert load_voxel_matrix(tmp_path / "b.npz", key="voxels").shape == (3, 4)
    x[0, 2] = np.nan
    np.save(tmp_path / "c.npy", x)
    with pytest.raises(ValueError, match="NaN"):
        load_voxel_matrix(tmp_path / "c.npy")
    assert load_voxel_matrix(tmp_path / "c.npy", nan="drop").shape == (3, 3)
    np.save(tmp_path / "d.npy", np.zeros(3))
    with pytest.raises(ValueError, match="matrix"):
        load_voxel_matrix(tmp_path / "d.npy")
    with pytest.raises(ValueError, match="no voxel file"):
        load_voxel_matrix(tmp_path / "missing.npy")


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
        for p in m.tree.banks.parameters():
            p.zero_()
        ident = torch.zeros(V, 4)
        ident[:, 0] = sign(roi[0])
        ident[:, 1] = sign(roi[1] % 2)
        m.frontend.identity["a"].copy_(ident)
        m.frontend.value["a"].copy_(value_scale * torch.randn(V, 4))
        w0, w1 = torch.zeros(2, 4), torch.zeros(4, 4)
        w0[:, 0] = torch.tensor([4.0, -4.0])  # expert e of level 0 <- region e
        w1[:, 1] = torch.tensor([4.0, -4.0, 4.0, -4.0])  # child 2p + c <- (region p, child c)
        m.tree.routers[0].weight.copy_(w0)
        m.tree.routers[1].weight.copy_(w1)
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
