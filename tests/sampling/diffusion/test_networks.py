"""Energy networks: score == -grad E, SE(3) invariance and chirality of the molecular net."""

import pytest
import torch
from e3nn.util.test import assert_equivariant

from sci_moe.sampling.diffusion import (
    InvariantEnergyNet,
    InvariantMLPEnergy,
    MLPEnergy,
    MLPScore,
    energy_and_score,
    random_rotations,
    time_features,
)
from sci_moe.testing import assert_forces_match_energy


def test_score_is_minus_grad_energy_mlp():
    net = MLPEnergy((2, 3), (16, 16)).double()
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    t = torch.rand(5, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda y: net(y, t), (x,))
    e, s = net.energy_and_score(x.detach(), t)
    (g,) = torch.autograd.grad(net(x, t).sum(), x)
    torch.testing.assert_close(s, -g)
    torch.testing.assert_close(e, net(x, t).detach())
    # central finite differences of the energy: the score is the force of E at time t
    assert_forces_match_energy(
        lambda y: net.energy_and_score(y, t), x.detach(), step=1e-6, rtol=1e-6, atol=1e-7
    )


def test_score_is_minus_grad_energy_invariant(float_dtype):
    net = InvariantEnergyNet(4, hidden=8, n_layers=2, n_rbf=6)
    x = torch.randn(3, 4, 3)
    t = torch.rand(3)
    e, s = energy_and_score(net, x, t)
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(net(xg, t).sum(), xg)
    torch.testing.assert_close(s, -g)
    assert e.shape == (3,) and s.shape == x.shape


def test_invariant_net_se3_equivariance_and_chirality():
    torch.set_default_dtype(torch.float64)
    try:
        net = InvariantEnergyNet(5, hidden=16, n_layers=3, n_rbf=8)
        t = torch.full((2,), 0.1)
        x = torch.randn(2, 5, 3)
        # energy invariant, forces (-grad) equivariant under rotations and translations;
        # positions declared even (1e) so e3nn's parity trial is the identity: the net is
        # SE(3)- not O(3)-invariant (checked below).
        assert_equivariant(
            lambda p: net(p.view(2, 5, 3), t).unsqueeze(-1),
            args_in=[x.view(2, 15)],
            irreps_in=["5x1e"],
            irreps_out=["0e"],
        )
        assert_equivariant(
            lambda p: net.score(p.view(2, 5, 3), t).reshape(2, 15),
            args_in=[x.view(2, 15)],
            irreps_in=["5x1e"],
            irreps_out=["5x1e"],
        )
        R = random_rotations(2, torch.Generator().manual_seed(0))
        shift = torch.randn(2, 1, 3)
        torch.testing.assert_close(net(x @ R.transpose(-1, -2) + shift, t), net(x, t))
        # mirror image: a different energy (chirality-aware)
        mirror = x * torch.tensor([-1.0, 1.0, 1.0])
        assert (net(mirror, t) - net(x, t)).abs().min() > 1e-6
        # score variant is equivariant
        sn = InvariantEnergyNet(5, hidden=16, n_layers=2, n_rbf=8, output="score")
        torch.testing.assert_close(sn(x @ R.transpose(-1, -2), t), sn(x, t) @ R.transpose(-1, -2))
        with pytest.raises(ValueError, match="no energy"):
            sn.energy(x, t)
    finally:
        torch.set_default_dtype(torch.float32)


def test_score_net_and_shapes():
    net = MLPScore((1, 2), (8,))
    x, t = torch.randn(4, 1, 2), torch.rand(4)
    assert net.score(x, t).shape == x.shape
    with pytest.raises(ValueError, match="shape"):
        net(torch.randn(4, 2), t)
    with pytest.raises(ValueError, match="t must"):
        net(x, torch.rand(3))
    with pytest.raises(ValueError):
        InvariantEnergyNet(1)
    with pytest.raises(ValueError):
        InvariantEnergyNet(3, output="force")


def test_time_features():
    t = torch.tensor([0.0, 0.25])
    f = time_features(t)
    assert f.shape == (2, 4)
    torch.testing.assert_close(f[1], torch.tensor([-0.25, 0.0, 1.0, 1.0]), atol=1e-6, rtol=0)
    assert time_features(t, 0.1, 0.6).shape == (2, 7)


def test_invariant_mlp_energy():
    torch.set_default_dtype(torch.float64)
    try:
        net = InvariantMLPEnergy(5, (16, 16))
        assert len(net.quads) == 5  # every quadruple of 5 particles
        x, t = torch.randn(3, 5, 3), torch.rand(3)
        R = random_rotations(3, torch.Generator().manual_seed(1))
        torch.testing.assert_close(net(x @ R.transpose(-1, -2) + 1.5, t), net(x, t))
        mirror = x * torch.tensor([1.0, -1.0, 1.0])
        assert (net(mirror, t) - net(x, t)).abs().min() > 1e-8
        assert_equivariant(
            lambda p: net.score(p.view(3, 5, 3), t).reshape(3, 15),
            args_in=[x.view(3, 15)],
            irreps_in=["5x1e"],
            irreps_out=["5x1e"],
        )
        xg = x.clone().requires_grad_(True)
        assert torch.autograd.gradcheck(lambda y: net(y, t), (xg,))
        with pytest.raises(ValueError, match="distinct"):
            InvariantMLPEnergy(5, (8,), quads=[(0, 0, 1, 2)])
        assert InvariantMLPEnergy(10, (8,)).q.shape == (7, 4)  # consecutive quads for N > 8
    finally:
        torch.set_default_dtype(torch.float32)
