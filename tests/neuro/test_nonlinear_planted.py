"""Nonlinear planted voxels (:func:`sci_moe.neuro.plant_nonlinear_voxels`): ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from sci_moe.neuro import RESPONSE_FAMILIES, plant_nonlinear_voxels, plant_voxels, roi_labels
from sci_moe.neuro.planted import _respond


def _targets(m=300, d=120, seed=0):
    return np.random.default_rng(seed).standard_normal((m, d))


def test_two_level_ground_truth_gain_and_snr():
    y = _targets()
    d = plant_nonlinear_voxels(
        y, num_voxels=64, num_subjects=2, snr=2.0, network_dims=6, region_dims=3, seed=1
    )
    assert d.subjects == ["subj01", "subj02"] and d.branching == (4, 16)
    for s in d.subjects:
        x = d.voxels[s]
        assert x.shape == (300, 64) and x.dtype == np.float32
        ref = roi_labels(64, (4, 16))
        np.testing.assert_array_equal(d.roi[s][:, np.argsort(d.permutation[s])], ref)
        np.testing.assert_array_equal(d.roi[s][0], d.roi[s][1] // 4)  # regions nest
        np.testing.assert_allclose((x / d.gain[s]).var(0).mean(), 3.0, rtol=0.1)
    assert not np.array_equal(d.permutation["subj01"], d.permutation["subj02"])


def test_responses_are_not_linear_in_the_target():
    """Without noise a linear read-out explains all of plant_voxels but not these voxels."""
    y = _targets(m=2000)

    def r2(x):
        yc = np.c_[y, np.ones(len(y))]
        coef, *_ = np.linalg.lstsq(yc, x, rcond=None)
        return 1 - (x - yc @ coef).var(0) / x.var(0)

    lin = plant_voxels(y, num_voxels=32, num_subjects=1, snr=1e8, branching=(2, 4), seed=0)
    assert r2(lin.voxels["subj01"]).min() > 0.99
    nl = plant_nonlinear_voxels(
        y, num_voxels=32, num_subjects=1, snr=1e8, network_dims=6, region_dims=3, mixing=0.0
    )
    fit = r2(nl.voxels["subj01"].astype(np.float64))
    net = nl.roi["subj01"][0]
    assert fit.mean() < 0.7
    for n in range(4):  # every family leaves part of its voxels' variance to a nonlinearity
        assert fit[net == n].mean() < 0.95, (RESPONSE_FAMILIES[n], fit[net == n])


def test_mixing_stays_within_a_region():
    """With mixing, a subject voxel is driven only by voxels of its own region."""
    y = _targets()
    d = plant_nonlinear_voxels(
        y, num_voxels=32, num_subjects=1, snr=1e8, network_dims=6, region_dims=3, mixing=0.4
    )
    x = d.voxels["subj01"] / d.gain["subj01"]
    c = np.abs(np.corrcoef(x.T))
    reg = d.roi["subj01"][1]
    off = ~np.eye(32, dtype=bool)
    assert c[(reg[:, None] == reg[None]) & off].mean() > 2 * c[reg[:, None] != reg[None]].mean()


def test_respond_families_and_errors():
    z = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(_respond("rate", z, 2.0), np.exp(2 * z))
    np.testing.assert_allclose(_respond("cubic", z, 0.0), z**3)
    np.testing.assert_allclose(_respond("saturating", z, 3.0), np.tanh(3 * z))
    assert _respond("tuning", z, 1.0).argmax() == 6  # the bump peaks at its preferred drive
    with pytest.raises(ValueError, match="family"):
        _respond("linear", z, 1.0)
    y = _targets()
    with pytest.raises(ValueError, match="snr"):
        plant_nonlinear_voxels(y, snr=0)
    with pytest.raises(ValueError, match="target dims"):
        plant_nonlinear_voxels(y, num_voxels=32)  # 4*16 + 16*8 = 192 > 120
    with pytest.raises(ValueError, match="mixing"):
        plant_nonlinear_voxels(y, network_dims=6, region_dims=3, mixing=1.0)
    with pytest.raises(ValueError, match="network_share"):
        plant_nonlinear_voxels(y, network_dims=6, region_dims=3, network_share=2.0)
