"""The parallel chunked scan equals the step-by-step recurrence (outputs and all gradients)."""

import pytest
import torch

from sci_moe.language.mamba import (
    linear_scan,
    selective_scan,
    selective_scan_reference,
    selective_state_step,
)


def _inputs(b, d, n, L, dtype, gen):
    def r(*s):
        return torch.randn(*s, generator=gen, dtype=dtype)

    return dict(
        u=r(b, d, L),
        delta=r(b, d, L),
        A=-torch.rand(d, n, generator=gen, dtype=dtype) * 4,
        B=r(b, n, L),
        C=r(b, n, L),
        D=r(d),
        z=r(b, d, L),
        delta_bias=r(d),
        initial_state=r(b, d, n),
    )


@pytest.mark.parametrize("L,chunk", [(1, 4), (7, 4), (16, 4), (33, 8), (20, 256)])
def test_scan_matches_reference(float_dtype, L, chunk):
    gen = torch.Generator().manual_seed(L)
    inp = _inputs(2, 5, 3, L, float_dtype, gen)
    leaves = {k: v.requires_grad_(True) for k, v in inp.items()}
    tol = 1e-5 if float_dtype == torch.float32 else 1e-11

    def run(fn, **kw):
        y, h = fn(**leaves, delta_softplus=True, return_last_state=True, **kw)
        g = torch.Generator().manual_seed(7)
        gy = torch.randn(y.shape, generator=g, dtype=y.dtype)
        gh = torch.randn(h.shape, generator=g, dtype=h.dtype)
        grads = torch.autograd.grad((y * gy).sum() + (h * gh).sum(), list(leaves.values()))
        return [y, h, *grads]

    fast = run(selective_scan, chunk_size=chunk)
    ref = run(selective_scan_reference)
    names = ["y", "last_state", *(f"grad[{k}]" for k in leaves)]
    for name, a, b in zip(names, fast, ref, strict=True):
        scale = max(1.0, b.abs().max().item())
        assert (a - b).abs().max().item() <= tol * scale, name


def test_linear_scan_is_the_recurrence(float_dtype):
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(3, 13, 2, generator=gen, dtype=float_dtype)
    b = torch.randn(3, 13, 2, generator=gen, dtype=float_dtype)
    decay, h = linear_scan(a, b, dim=1)
    hh, dd = torch.zeros(3, 2, dtype=float_dtype), torch.ones(3, 2, dtype=float_dtype)
    for t in range(13):
        hh = a[:, t] * hh + b[:, t]
        dd = dd * a[:, t]
        torch.testing.assert_close(h[:, t], hh)
        torch.testing.assert_close(decay[:, t], dd)


def test_state_step_continues_the_scan():
    gen = torch.Generator().manual_seed(1)
    inp = _inputs(2, 4, 3, 6, torch.float64, gen)
    y, h = selective_scan(**inp, delta_softplus=True, return_last_state=True)
    state = inp["initial_state"]
    for t in range(6):
        yt, state = selective_state_step(
            state,
            inp["u"][..., t],
            inp["delta"][..., t],
            inp["A"],
            inp["B"][..., t],
            inp["C"][..., t],
            inp["D"],
            inp["z"][..., t],
            inp["delta_bias"],
            delta_softplus=True,
        )
        torch.testing.assert_close(yt, y[..., t])
    torch.testing.assert_close(state, h)


def test_scan_is_stable_for_strong_decay():
    # decays exp(-1e3) underflow to 0 but nothing overflows (no exp(+cumsum) trick)
    b, d, n, L = 1, 2, 2, 64
    u = torch.ones(b, d, L)
    y = selective_scan(
        u,
        torch.full((b, d, L), 10.0),
        -torch.full((d, n), 100.0),
        torch.ones(b, n, L),
        torch.ones(b, n, L),
        chunk_size=8,
    )
    ref = selective_scan_reference(
        u,
        torch.full((b, d, L), 10.0),
        -torch.full((d, n), 100.0),
        torch.ones(b, n, L),
        torch.ones(b, n, L),
    )
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, ref)


def test_bad_shapes_raise():
    gen = torch.Generator().manual_seed(0)
    inp = _inputs(2, 4, 3, 5, torch.float32, gen)
    with pytest.raises(ValueError, match="B must have shape"):
        selective_scan(**{**inp, "B": inp["B"][:, :, :4]})
    with pytest.raises(ValueError, match="initial_state"):
        selective_scan(**{**inp, "initial_state": torch.zeros(2, 4, 2)})
    with pytest.raises(ValueError, match="chunk_size"):
        selective_scan(**inp, chunk_size=0)
    with pytest.raises(ValueError, match="u must have shape"):
        selective_scan_reference(**{**inp, "u": inp["u"][0]})
