"""The shipped alanine-dipeptide energy model loads and gives finite, consistent forces."""

import numpy as np
import pytest
import torch

from sci_moe.sampling.diffusion import ALANINE_MODEL, load_energy_model
from sci_moe.sampling.md import BACKBONE_ATOMS, ModelForces, build_system, phi_psi
from sci_moe.testing import assert_forces_match_energy

pytestmark = pytest.mark.skipif(not ALANINE_MODEL.exists(), reason="model file not built")


def test_shipped_alanine_model():
    energy, masses, names, pdb = load_energy_model(ALANINE_MODEL)
    assert len(names) == 5 and masses.shape == (5,) and pdb is None
    _, _, pos = build_system()
    beads = torch.tensor(np.asarray(pos)[list(BACKBONE_ATOMS)], dtype=torch.float32)[None]
    assert np.isfinite(phi_psi(np.asarray(pos)[None])).all()
    x = beads.repeat(2, 1, 1)
    x[1] += 0.002 * torch.randn(5, 3)
    e, f = ModelForces(energy, masses).energy_and_forces(x)
    assert torch.isfinite(e).all() and torch.isfinite(f).all()
    # forces are -grad of the energy (central differences, float64)
    provider = ModelForces(energy.double(), masses)
    assert_forces_match_energy(
        provider.energy_and_forces, x.double(), step=1e-5, rtol=1e-4, atol=1e-3
    )
    energy.float()
    # invariant to rigid motions
    c, s = np.cos(0.7), np.sin(0.7)
    R = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(energy(x @ R.T + 0.3), energy(x), rtol=1e-4, atol=1e-3)
