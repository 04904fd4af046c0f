"""sci_moe.testing.assert_forces_match_energy: passes for true forces, fails for wrong ones."""

import numpy as np
import pytest
import torch

from sci_moe.sampling.md import MuellerBrown, OpenMMForces, PotentialForces, build_system
from sci_moe.testing import assert_forces_match_energy, finite_difference_forces


def _mb():
    return PotentialForces(MuellerBrown(), torch.ones(1))


def test_accepts_true_forces():
    x = torch.tensor([[[-0.5, 1.4]], [[0.6, 0.0]], [[-0.05, 0.47]]], dtype=torch.float64)
    assert_forces_match_energy(_mb().energy_and_forces, x)


@pytest.mark.parametrize("bad", ["sign", "scale"])
def test_rejects_wrong_forces(bad):
    prov = _mb()

    def wrong(x):
        e, f = prov.energy_and_forces(x)
        return e, (-f if bad == "sign" else 10.0 * f)  # sign error / nm vs Angstrom

    x = torch.tensor([[[-0.5, 1.4]]], dtype=torch.float64)
    with pytest.raises(AssertionError, match="finite differences"):
        assert_forces_match_energy(wrong, x)


def test_openmm_forces_in_kj_per_mol_per_nm():
    _, system, pos = build_system(implicit_solvent=None)
    # The Reference platform computes in double precision: finite differences of the CPU
    # platform's single-precision energies would be dominated by rounding.
    prov = OpenMMForces(system, platform="Reference")
    x = torch.as_tensor(np.asarray(pos), dtype=torch.float64)[None]
    assert_forces_match_energy(prov.energy_and_forces, x, step=1e-5, rtol=1e-4, atol=1e-3)


def test_finite_difference_input_checks():
    with pytest.raises(ValueError, match="walkers, particles, dims"):
        finite_difference_forces(lambda x: x.sum(), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="positive"):
        finite_difference_forces(lambda x: x.sum((1, 2)), torch.zeros(1, 1, 2), step=0.0)
