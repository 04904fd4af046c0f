"""The batched Fokker-Planck estimator equals the reference loop (loss and every gradient)."""

import pytest
import torch

from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, fp_loss, fp_residual_probe


def _setup(shape=(1, 2), B=32, seed=0):
    torch.manual_seed(seed)
    model = MLPEnergy(shape, hidden=(16, 16)).double()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, *shape, generator=g, dtype=torch.float64)
    t = 1e-3 + torch.rand(B, generator=g, dtype=torch.float64) * 0.9
    return model, x, t


@pytest.mark.parametrize("shape", [(1, 2), (3, 3)])
def test_batched_fp_loss_equals_reference(shape):
    model, x, t = _setup(shape)
    sde = VPSDE()
    w = torch.linspace(0.5, 1.5, len(t), dtype=torch.float64)
    out = {}
    for batched in (False, True):
        gen = torch.Generator().manual_seed(11)
        model.zero_grad(set_to_none=True)
        loss = fp_loss(model, sde, x, t, w, gen, batched=batched)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        out[batched] = (loss.detach(), grads, gen.get_state())
    (l0, g0, s0), (l1, g1, s1) = out[False], out[True]
    torch.testing.assert_close(l1, l0, rtol=1e-6, atol=0)
    for a, b in zip(g1, g0, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-12)
    assert torch.equal(s0, s1)  # same random numbers consumed


def test_batched_residual_equals_reference_three_probes():
    model, x, t = _setup()
    sde = VPSDE()
    r = [
        fp_residual_probe(
            model,
            sde,
            x,
            t,
            n_probes=3,
            generator=torch.Generator().manual_seed(5),
            batched=b,
            create_graph=False,
        ).detach()
        for b in (False, True)
    ]
    assert r[1].shape == (3, len(t))
    torch.testing.assert_close(r[1], r[0], rtol=1e-6, atol=1e-9)


def test_joint_dsm_fp_loss_equals_separate_calls():
    from sci_moe.sampling.diffusion.losses import dsm_fp_loss, dsm_loss

    model, x0, t = _setup((3, 3))
    sde = VPSDE()
    noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(2), dtype=x0.dtype)
    w = torch.linspace(0.5, 1.5, len(t), dtype=torch.float64)
    out = []
    for joint in (False, True):
        gen = torch.Generator().manual_seed(11)
        model.zero_grad(set_to_none=True)
        if joint:
            l_dsm, l_fp = dsm_fp_loss(model, sde, x0, t, noise, w, gen)
        else:
            l_dsm, xt = dsm_loss(model.score, sde, x0, t, noise, w)
            l_fp = fp_loss(model, sde, xt, t, w, gen, batched=False)
        (l_dsm + 1e-2 * l_fp).backward()
        out.append((l_dsm.detach(), l_fp.detach(), [p.grad.clone() for p in model.parameters()]))
    (d0, f0, g0), (d1, f1, g1) = out
    torch.testing.assert_close(d1, d0, rtol=1e-9, atol=0)
    torch.testing.assert_close(f1, f0, rtol=1e-6, atol=0)
    for a, b in zip(g1, g0, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-12)
