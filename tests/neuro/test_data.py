"""Planted voxels (ground truth) and the voxel-matrix loader."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.neuro import load_voxel_matrix, plant_voxels, roi_labels


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
