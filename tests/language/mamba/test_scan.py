"""The parallel chunked scan equals the step-by-step recurrence (outputs and all gradients)."""

import pytest
import torch

from sci_moe.language.mamba import (
    MambaBlock,
    linear_scan,
    selective_scan,
    selective_scan_recurrent,
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


@pytest.mark.parametrize("L", [1, 2, 9, 33])
@pytest.mark.parametrize("optional", [True, False])
def test_recurrent_scan_matches_reference(float_dtype, L, optional):
    """The fused recurrent scan: outputs and every gradient equal the reference's."""
    gen = torch.Generator().manual_seed(L)
    inp = _inputs(3, 5, 4, L, float_dtype, gen)
    if not optional:  # no D, z, bias or initial state, and no softplus
        inp = {k: v for k, v in inp.items() if k in ("u", "delta", "A", "B", "C")}
        inp["delta"] = inp["delta"].abs()
    leaves = {k: v.requires_grad_(True) for k, v in inp.items()}
    tol = 1e-5 if float_dtype == torch.float32 else 1e-11

    def run(fn):
        y, h = fn(**leaves, delta_softplus=optional, return_last_state=True)
        g = torch.Generator().manual_seed(7)
        gy = torch.randn(y.shape, generator=g, dtype=y.dtype)
        gh = torch.randn(h.shape, generator=g, dtype=h.dtype)
        grads = torch.autograd.grad((y * gy).sum() + (h * gh).sum(), list(leaves.values()))
        return [y, h, *grads]

    fast, ref = run(selective_scan_recurrent), run(selective_scan_reference)
    names = ["y", "last_state", *(f"grad[{k}]" for k in leaves)]
    for name, a, b in zip(names, fast, ref, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        scale = max(1.0, b.abs().max().item())
        assert (a - b).abs().max().item() <= tol * scale, name


def test_recurrent_scan_partial_gradients_and_empty_sequence():
    gen = torch.Generator().manual_seed(3)
    inp = _inputs(2, 4, 3, 6, torch.float64, gen)
    u = inp["u"].requires_grad_(True)  # only u needs a gradient
    y = selective_scan_recurrent(**{**inp, "u": u}, delta_softplus=True)
    (gu,) = torch.autograd.grad(y.sum(), [u])
    yr = selective_scan_reference(**{**inp, "u": u}, delta_softplus=True)
    (gr,) = torch.autograd.grad(yr.sum(), [u])
    torch.testing.assert_close(y, yr)
    torch.testing.assert_close(gu, gr)
    empty = {k: v[..., :0] if k in ("u", "delta", "B", "C", "z") else v for k, v in inp.items()}
    y0, h0 = selective_scan_recurrent(**empty, return_last_state=True)
    assert y0.shape == (2, 4, 0)
    torch.testing.assert_close(h0, inp["initial_state"])
    with pytest.raises(ValueError, match="B must have shape"):
        selective_scan_recurrent(**{**inp, "B": inp["B"][:, :, :4]})


def test_recurrent_scan_reused_scratch_buffers_give_the_same_gradients():
    """Backward's per-thread scratch buffers carry nothing from one call to the next."""
    gens = [torch.Generator().manual_seed(s) for s in (4, 5)]
    inps = [_inputs(2, 4, 3, 8, torch.float32, g) for g in gens]

    def grads(inp, retain=False):
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inp.items()}
        y, h = selective_scan_recurrent(**leaves, delta_softplus=True, return_last_state=True)
        loss = (y.square().sum() + h.sum()) / 10
        first = torch.autograd.grad(loss, list(leaves.values()), retain_graph=retain)
        if retain:  # a second backward through the same graph
            again = torch.autograd.grad(loss, list(leaves.values()))
            for a, b in zip(first, again, strict=True):
                assert torch.equal(a, b)
        return first

    g0 = grads(inps[0])
    grads(inps[1], retain=True)
    for a, b in zip(g0, grads(inps[0]), strict=True):
        assert torch.equal(a, b)
    leaves = {k: v.clone().requires_grad_(True) for k, v in inps[0].items()}
    y = selective_scan_recurrent(**leaves, delta_softplus=True)
    (gu,) = torch.autograd.grad(y.square().sum(), [leaves["u"]], create_graph=True)
    with pytest.raises(RuntimeError):  # once differentiable
        gu.sum().backward()


def test_recurrent_scan_pooled_states_stay_with_their_graph():
    """The saved states' recycled memory is not reused while a graph still holds it."""
    gens = [torch.Generator().manual_seed(s) for s in (6, 7)]
    inps = [_inputs(2, 4, 3, 8, torch.float32, g) for g in gens]

    def forward(inp):
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inp.items()}
        y, h = selective_scan_recurrent(**leaves, delta_softplus=True, return_last_state=True)
        return y.square().sum() + h.sum(), list(leaves.values())

    def grads(inp):
        loss, leaves = forward(inp)
        return torch.autograd.grad(loss, leaves)

    want = [grads(inp) for inp in inps]
    loss0, leaves0 = forward(inps[0])  # graph 0 kept alive ...
    with torch.no_grad():  # ... across a no-grad call (an evaluation) ...
        selective_scan_recurrent(**inps[1], delta_softplus=True)
    got1 = grads(inps[1])  # ... and a whole training step of other inputs
    got0 = torch.autograd.grad(loss0, leaves0)
    for got, exp in ((got0, want[0]), (got1, want[1])):
        for a, b in zip(got, exp, strict=True):
            assert torch.equal(a, b)


def test_block_scans_agree_and_auto_is_recurrent_on_cpu(monkeypatch):
    import sci_moe.language.mamba.block as block_module

    torch.manual_seed(2)
    block = MambaBlock(d_model=8, d_state=3, chunk_size=4).double()
    assert block.config.scan == "auto"
    x = torch.randn(2, 11, 8, dtype=torch.float64)
    outs = {}
    for scan in ("auto", "parallel", "recurrent", "reference"):
        block.config.scan = scan
        y, state = block(x, return_state=True)
        grads = torch.autograd.grad(y.square().sum(), list(block.parameters()))
        outs[scan] = [y, state.ssm, *grads]
    for scan in ("parallel", "recurrent", "reference"):
        for a, b in zip(outs[scan], outs["reference"], strict=True):
            torch.testing.assert_close(a, b)
    for a, b in zip(outs["auto"], outs["recurrent"], strict=True):
        assert torch.equal(a, b)
    calls = []
    real = block_module.selective_scan_recurrent
    monkeypatch.setattr(
        block_module, "selective_scan_recurrent", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    block.config.scan = "auto"
    block(x)
    assert calls == [1]


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
