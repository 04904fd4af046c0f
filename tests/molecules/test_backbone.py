"""PaiNN backbone: equivariance per conformer, cutoff smoothness, input checks."""

from __future__ import annotations

import pytest
import torch

from sci_moe.molecules.backbone import (
    BesselBasis,
    EquivariantLayerNorm,
    PaiNNBlock,
    PaiNNMessage,
    cosine_cutoff,
    edge_geometry,
    scatter_sum,
    vectors_to_irreps,
)
from sci_moe.molecules.graph import radius_graph_per_conformer
from sci_moe.testing import assert_equivariant, cartesian_action

F = 8


def _graph(n=7):
    pos = torch.randn(n, 3) * 0.2
    conf = torch.tensor([0] * 4 + [1] * (n - 4))
    return pos, radius_graph_per_conformer(pos, conf, 0.5)


def _from_irreps(x):
    return x.reshape(x.shape[0], F, 3).transpose(1, 2)


def test_painn_block_equivariant(float_dtype):
    pos, ei = _graph()
    block = PaiNNBlock(F, num_rbf=6, cutoff=0.5).to(float_dtype)
    h = torch.randn(pos.shape[0], F)
    v = torch.randn(pos.shape[0], 3, F)

    def f(h, v, pos):
        h2, v2 = block(h, _from_irreps(v), pos, ei)
        return h2, vectors_to_irreps(v2)

    pytest.importorskip("e3nn")
    assert_equivariant(
        f,
        [h, vectors_to_irreps(v), pos],
        irreps_in=[f"{F}x0e", f"{F}x1o", "cartesian_points"],
        irreps_out=[f"{F}x0e", f"{F}x1o"],
        translation=True,
        reflection=True,
    )
    # the same on the Cartesian (P, 3, F) layout, without e3nn
    assert_equivariant(
        lambda h, v, pos: block(h, v, pos, ei),
        [h, v, pos],
        irreps_in=[None, cartesian_action(axis=-2), "cartesian_points"],
        irreps_out=[None, cartesian_action(axis=-2)],
        translation=True,
        reflection=True,
    )


def _conformer_1_only(axis, shift=None):
    """Rotate (and shift) only the points of conformer 1 (rows 4:)."""
    rotate = cartesian_action(axis)

    def act(x, rotation, translation):
        out = x.clone()
        out[4:] = rotate(x[4:], rotation, None)
        if shift is not None:
            out[4:] = out[4:] + shift
        return out

    return act


def test_conformers_transform_independently(float_dtype):
    # Rotate/reflect/translate only conformer 1: conformer 0 outputs are untouched and
    # conformer 1's vectors rotate with it, its scalars stay.
    pos, ei = _graph()
    block = PaiNNBlock(F, num_rbf=6, cutoff=0.5)
    h = torch.randn(pos.shape[0], F)
    v = torch.randn(pos.shape[0], 3, F)
    assert_equivariant(
        lambda h, v, pos: block(h, v, pos, ei),
        [h, v, pos],
        irreps_in=[None, _conformer_1_only(-2), _conformer_1_only(-1, torch.randn(3))],
        irreps_out=[None, _conformer_1_only(-2)],
        reflection=True,
    )


def test_no_message_across_conformers():
    pos, ei = _graph()
    assert (torch.tensor([0] * 4 + [1] * 3)[ei]).diff(dim=0).abs().sum() == 0
    block = PaiNNBlock(F, num_rbf=6, cutoff=0.5)
    h = torch.randn(pos.shape[0], F, requires_grad=True)
    out, _ = block(h, torch.zeros(pos.shape[0], 3, F), pos, ei)
    (g,) = torch.autograd.grad(out[:4].sum(), h)
    assert torch.all(g[4:] == 0)


def test_radial_basis_and_cutoff():
    r = torch.linspace(0.05, 0.6, 20)
    fc = cosine_cutoff(r, 0.5)
    assert torch.all(fc[r >= 0.5] == 0) and torch.all(fc[r < 0.5] > 0)
    assert BesselBasis(4, 0.5)(r).shape == (20, 4)
    with pytest.raises(ValueError, match="cutoff"):
        BesselBasis(4, 0.0)
    with pytest.raises(ValueError, match="hidden"):
        PaiNNBlock(0)


def test_equivariant_layer_norm_and_scatter(float_dtype):
    ln = EquivariantLayerNorm(F)
    v = torch.randn(5, 3, F)
    assert_equivariant(ln, v, cartesian_action(axis=-2), cartesian_action(axis=-2), reflection=True)
    out = ln(v)
    torch.testing.assert_close(out.square().sum(1).mean(-1), torch.ones(5), atol=1e-4, rtol=0)
    s = scatter_sum(torch.ones(4, 2), torch.tensor([0, 2, 2, 0]), 3)
    assert s.tolist() == [[2, 2], [0, 0], [2, 2]]


@pytest.mark.parametrize("zero_v", [False, True])
def test_painn_message_is_the_formula(zero_v):
    # the per-component sums (and the skipped zero V, None, of a first block) give the values
    # and gradients of the written-out Eq. 7-8: gathers, (E, 3, F) broadcasts, one scatter
    torch.manual_seed(0)
    pos, ei = _graph(9)
    msg = PaiNNMessage(F, 6).double()
    pos = pos.double()
    dist, unit = edge_geometry(pos, ei)
    rbf, fcut = BesselBasis(6, 0.5)(dist), cosine_cutoff(dist, 0.5)
    h = torch.randn(9, F, dtype=torch.float64, requires_grad=True)
    v = torch.zeros(9, 3, F, dtype=torch.float64)
    if not zero_v:
        v = torch.randn(9, 3, F, dtype=torch.float64, requires_grad=True)

    def formula(h, v):
        src, dst = ei
        x = msg.phi(h)[src] * (msg.filter(rbf) * fcut.unsqueeze(-1))
        xs, xvv, xvs = x.split(F, dim=-1)
        dv = xvv.unsqueeze(1) * v[src] + xvs.unsqueeze(1) * unit.unsqueeze(-1)
        return scatter_sum(xs, dst, 9), scatter_sum(dv, dst, 9)

    g = torch.Generator().manual_seed(1)
    gh, gv = torch.randn(9, F, generator=g).double(), torch.randn(9, 3, F, generator=g).double()
    results = []
    for f in (msg, formula):
        # the first block passes no V (None) for its zero V
        args = (h, None if zero_v else v, ei, rbf, fcut, unit) if f is msg else (h, v)
        dh, dv = f(*args)
        inputs = [h, *msg.parameters()] + ([] if zero_v else [v])
        grads = torch.autograd.grad((dh * gh).sum() + (dv * gv).sum(), inputs)
        results.append((dh.detach(), dv.detach(), *grads))
    assert ei.shape[1] > 0 and results[0][1].abs().sum() > 0
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_painn_block_without_v_is_the_block_on_zero_v():
    # the first block gets v=None: bit-equal outputs and gradients to an explicit zero V
    torch.manual_seed(0)
    pos, ei = _graph(9)
    block = PaiNNBlock(F, num_rbf=6, cutoff=0.5)
    h = torch.randn(9, F)
    g = torch.Generator().manual_seed(2)
    gh, gv = torch.randn(9, F, generator=g), torch.randn(9, 3, F, generator=g)
    results = []
    for v in (None, torch.zeros(9, 3, F)):
        hi = h.clone().requires_grad_(True)
        ho, vo = block(hi, v, pos, ei)
        grads = torch.autograd.grad((ho * gh).sum() + (vo * gv).sum(), [hi, *block.parameters()])
        results.append((ho.detach(), vo.detach(), *grads))
    assert ei.shape[1] > 0 and results[0][1].abs().sum() > 0
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
