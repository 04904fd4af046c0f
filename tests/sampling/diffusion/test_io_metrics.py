"""Model files (contract B) and the ScoreMD metrics."""

import json
import math

import numpy as np
import pytest
import torch
from safetensors import safe_open

from sci_moe.sampling.diffusion import (
    VPSDE,
    EnergyAtTime,
    InvariantEnergyNet,
    MLPEnergy,
    MLPScore,
    TimeMixture,
    bond_wasserstein,
    js_divergence,
    load_diffusion_model,
    load_energy_model,
    pmf_error,
    save_energy_model,
)


def test_roundtrip_invariant_net(tmp_path):
    net = InvariantEnergyNet(5, hidden=8, n_layers=2, n_rbf=4).eval()
    path = save_energy_model(
        net,
        tmp_path / "m.safetensors",
        sde=VPSDE(),
        kT=2.49,
        scale=5.0,
        masses=[12.0, 14.0, 12.0, 12.0, 14.0],
        atom_names=["C", "N", "CA", "C", "N"],
        extra={"note": "test"},
    )
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["sci_moe"])
    assert meta["kind"] == "energy-diffusion"
    energy, masses, names, pdb = load_energy_model(path)
    assert isinstance(energy, EnergyAtTime) and pdb is None
    assert names == ["C", "N", "CA", "C", "N"] and masses.shape == (5,)
    x = torch.randn(3, 5, 3) * 0.2
    t = torch.full((3,), 1e-5)
    torch.testing.assert_close(energy(x), 2.49 * net(5.0 * x, t))
    # forces = kT * scale * score
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(energy(xg).sum(), xg)
    torch.testing.assert_close(-g, 2.49 * 5.0 * net.score(5.0 * x, t), rtol=1e-4, atol=1e-4)


def test_roundtrip_mixture(tmp_path):
    ranges = [(0.3, 1.0), (1e-5, 0.3)]
    moe = TimeMixture(
        [MLPScore((1, 2), (8,), t_range=ranges[0]), MLPEnergy((1, 2), (8,), t_range=ranges[1])],
        ranges,
    )
    save_energy_model(moe, tmp_path / "m.safetensors", sde=VPSDE(0.1, 10.0), kT=23.0)
    model, sde, cfg = load_diffusion_model(tmp_path / "m.safetensors")
    assert isinstance(model, TimeMixture) and sde.beta_max == 10.0 and cfg["kT"] == 23.0
    x, t = torch.randn(4, 1, 2), torch.tensor([0.9, 0.5, 0.1, 0.01])
    torch.testing.assert_close(model.score(x, t), moe.score(x, t))


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_energy_model(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="metadata"):
        load_energy_model(tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match="masses"):
        save_energy_model(
            MLPEnergy((1, 2), (4,)), tmp_path / "x.safetensors", sde=VPSDE(), kT=1.0, masses=[0.0]
        )


def _naive_pmf(ref, smp, n_bins, limits, baseline=1e-6):
    """Loop reference of ScoreMD's rms_fe_sq_error (dict of occupied bins)."""

    def probs(a):
        grids = [np.linspace(lo, hi, n_bins - 1) for lo, hi in limits]
        d = {}
        for row in a:
            key = tuple(int(np.digitize(row[i], grids[i])) for i in range(2))
            d[key] = d.get(key, 0) + 1 / len(a)
        return d

    p, q = probs(ref), probs(smp)
    keys = set(p) | set(q)
    w = {k: (p.get(k, baseline) + q.get(k, baseline)) / 2 for k in keys}
    z = sum(w.values())
    return sum(
        w[k] / z * (math.log(q.get(k, baseline)) - math.log(p.get(k, baseline))) ** 2 for k in keys
    )


def test_metrics():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3000, 2))
    b = rng.normal(size=(3000, 2)) + np.array([0.5, 0.0])
    lim = ((-4, 4), (-4, 4))
    assert js_divergence(a, a, 32, lim) == pytest.approx(0.0, abs=1e-12)
    assert js_divergence(a, a + 100, 32, None) == pytest.approx(math.log(2), rel=1e-6)
    assert 0 < js_divergence(a, b, 32, lim) < math.log(2)
    assert pmf_error(a, a, 16, lim) == pytest.approx(0.0, abs=1e-12)
    assert pmf_error(a, b, 16, lim) == pytest.approx(_naive_pmf(a, b, 16, lim), rel=1e-10)
    pos = rng.normal(size=(500, 3, 3))
    shifted = pos.copy()
    shifted[:, 1] = pos[:, 0] + 1.1 * (pos[:, 1] - pos[:, 0])
    w = bond_wasserstein(pos, shifted, [(0, 1), (0, 2)])
    d = np.linalg.norm(pos[:, 1] - pos[:, 0], axis=-1)
    assert w[0] == pytest.approx(0.1 * d.mean(), rel=1e-6) and w[1] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="shape"):
        js_divergence(a[:, :1], a)


def test_energy_at_time_of_a_ranged_mixture_is_its_owner_bitwise():
    """EnergyAtTime evaluates the expert owning t_eval directly: the mixture's numbers."""
    torch.manual_seed(0)
    ranges = [(0.3, 1.0), (1e-5, 0.3)]
    moe = TimeMixture(
        [MLPEnergy((3, 2), (8,), t_range=ranges[0]), MLPEnergy((3, 2), (8,), t_range=ranges[1])],
        ranges,
    )
    for t_eval, owner in ((1e-5, 1), (0.5, 0)):
        wrapped = EnergyAtTime(moe, kT=2.5, scale=3.0, t_eval=t_eval)
        assert wrapped._expert == owner
        x = torch.randn(4, 3, 2)
        t = torch.full((4,), t_eval)
        assert torch.equal(wrapped(x), 2.5 * moe.energy(3.0 * x, t))
    score_first = TimeMixture(
        [MLPScore((3, 2), (8,), t_range=ranges[0]), MLPEnergy((3, 2), (8,), t_range=ranges[1])],
        ranges,
    )
    assert EnergyAtTime(score_first, t_eval=0.5)._expert is None  # no energy there: no shortcut
