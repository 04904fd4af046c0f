"""The parallel chunked scan equals the step-by-step recurrence (outputs and all gradients)."""

import copy
import pickle
import threading

import pytest
import torch

from sci_moe.language.mamba import (
    MambaBlock,
    ScanWorkspace,
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


def _grads(inp, workspace=None, retain=False):
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inp.items()}
    y, h = selective_scan_recurrent(
        **leaves, delta_softplus=True, return_last_state=True, workspace=workspace
    )
    loss = (y.square().sum() + h.sum()) / 10
    first = torch.autograd.grad(loss, list(leaves.values()), retain_graph=retain)
    if retain:  # a second backward through the same graph
        again = torch.autograd.grad(loss, list(leaves.values()))
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a, b)
    return first


def _assert_equal(got, want):
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


def test_recurrent_scan_reused_scratch_buffers_give_the_same_gradients():
    """A workspace's scratch buffers carry nothing from one call to the next."""
    gens = [torch.Generator().manual_seed(s) for s in (4, 5)]
    inps = [_inputs(2, 4, 3, 8, torch.float32, g) for g in gens]
    ws = ScanWorkspace()
    g0 = _grads(inps[0])  # fresh memory (workspace=None)
    _assert_equal(_grads(inps[0], ws), g0)
    _grads(inps[1], ws, retain=True)
    assert ws.nbytes > 0
    _assert_equal(_grads(inps[0], ws), g0)
    leaves = {k: v.clone().requires_grad_(True) for k, v in inps[0].items()}
    y = selective_scan_recurrent(**leaves, delta_softplus=True, workspace=ws)
    (gu,) = torch.autograd.grad(y.square().sum(), [leaves["u"]], create_graph=True)
    with pytest.raises(RuntimeError):  # once differentiable
        gu.sum().backward()


def test_recurrent_scan_pooled_states_stay_with_their_graph():
    """The saved states' recycled memory is not reused while a graph still holds it."""
    gens = [torch.Generator().manual_seed(s) for s in (6, 7)]
    inps = [_inputs(2, 4, 3, 8, torch.float32, g) for g in gens]
    ws = ScanWorkspace()

    def forward(inp, workspace=ws):
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inp.items()}
        y, h = selective_scan_recurrent(
            **leaves, delta_softplus=True, return_last_state=True, workspace=workspace
        )
        return y.square().sum() + h.sum(), list(leaves.values())

    def grads(inp, workspace=ws):
        loss, leaves = forward(inp, workspace)
        return torch.autograd.grad(loss, leaves)

    want = [grads(inp, None) for inp in inps]  # fresh memory
    _assert_equal(grads(inps[0]), want[0])
    loss0, leaves0 = forward(inps[0])  # graph 0 kept alive ...
    with torch.no_grad():  # ... across a no-grad call (an evaluation) ...
        selective_scan_recurrent(**inps[1], delta_softplus=True, workspace=ws)
    got1 = grads(inps[1])  # ... and a whole training step of other inputs
    got0 = torch.autograd.grad(loss0, leaves0)
    _assert_equal(got0, want[0])
    _assert_equal(got1, want[1])


def _held(ws):
    """The tensors a workspace holds (its free bases and scratch buffers)."""
    return [*ws._free, *ws._scratch.values()]


def test_recurrent_scan_workspace_holds_only_the_latest_shape():
    b, d, n = 2, 4, 3
    ws = ScanWorkspace(keep=3)
    kept = None
    for L in (5, 9, 13):
        inp = _inputs(b, d, n, L, torch.float32, torch.Generator().manual_seed(L))
        if L == 5:  # a graph of the first shape outlives the others ...
            leaves = {k: v.requires_grad_(True) for k, v in inp.items()}
            kept = selective_scan_recurrent(**leaves, delta_softplus=True, workspace=ws).sum()
        _grads(inp, ws)
        held = _held(ws)
        assert held and all(t.shape == (L, b, d, n) for t in held)
        assert len(ws._free) <= 3 and len(ws._scratch) <= 2
        assert ws.nbytes <= (2 + 3) * L * b * d * n * 4
    kept.backward()  # ... and returns its memory after: dropped, not kept
    assert all(t.shape == (13, b, d, n) for t in _held(ws))
    with torch.no_grad():  # an evaluation at another length drops the training shape
        inp = _inputs(b, d, n, 7, torch.float32, torch.Generator().manual_seed(7))
        selective_scan_recurrent(**inp, delta_softplus=True, workspace=ws)
    assert _held(ws) and all(t.shape == (7, b, d, n) for t in _held(ws))
    assert ws._scratch == {}
    ws.clear()
    assert ws.nbytes == 0 and _held(ws) == []
    with pytest.raises(ValueError, match="keep"):
        ScanWorkspace(keep=-1)


def test_recurrent_scan_workspace_keeps_at_most_keep_free_bases():
    inps = [_inputs(2, 4, 3, 6, torch.float32, torch.Generator().manual_seed(s)) for s in range(4)]
    ws = ScanWorkspace(keep=2)
    graphs = []
    for inp in inps:  # four live graphs: eight saved tensors in use
        leaves = {k: v.requires_grad_(True) for k, v in inp.items()}
        graphs.append(selective_scan_recurrent(**leaves, delta_softplus=True, workspace=ws))
    assert ws._free == []
    del graphs, leaves  # all eight come back; two are kept
    assert len(ws._free) == 2


def test_recurrent_scan_workspace_copies_are_fresh():
    ws = ScanWorkspace(keep=3)
    _grads(_inputs(2, 4, 3, 6, torch.float32, torch.Generator().manual_seed(0)), ws)
    assert ws.nbytes > 0
    for other in (copy.copy(ws), copy.deepcopy(ws), pickle.loads(pickle.dumps(ws))):
        assert isinstance(other, ScanWorkspace) and other is not ws
        assert other.keep == 3 and other.nbytes == 0


def test_recurrent_scan_workspace_shared_by_threads():
    """Threads sharing one workspace get the gradients of fresh memory."""
    inps = [_inputs(2, 4, 3, 16, torch.float32, torch.Generator().manual_seed(s)) for s in range(4)]
    want = [_grads(inp) for inp in inps]
    ws = ScanWorkspace()
    errors = []

    def work(i):
        try:
            for _ in range(5):
                _assert_equal(_grads(inps[i], ws), want[i])
        except Exception as err:  # reported by the assert below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    like = torch.empty(16, 2, 4, 3)
    first = ws.take_scratch(0, like)  # a buffer in use is nobody else's
    second = ws.take_scratch(0, like)
    assert first.data_ptr() != second.data_ptr()
    ws.put_scratch(0, first)
    assert ws.take_scratch(0, like) is first


def test_block_workspace_is_its_own():
    """One workspace per block: not shared, not copied, not in state_dict."""
    torch.manual_seed(3)
    blocks = [MambaBlock(d_model=8, d_state=3, scan="recurrent") for _ in range(2)]
    assert blocks[0].scan_workspace is not blocks[1].scan_workspace
    x = torch.randn(2, 6, 8)
    for block in blocks:
        block(x).square().sum().backward()
    ptrs = [{t.data_ptr() for t in _held(b.scan_workspace)} for b in blocks]
    assert ptrs[0] and ptrs[1] and not ptrs[0] & ptrs[1]
    assert not any("workspace" in k for k in blocks[0].state_dict())
    twin = copy.deepcopy(blocks[0])
    assert twin.scan_workspace is not blocks[0].scan_workspace
    assert twin.scan_workspace.nbytes == 0
    twin.zero_grad()
    blocks[0].zero_grad()
    twin(x).square().sum().backward()
    blocks[0](x).square().sum().backward()
    for p, q in zip(twin.parameters(), blocks[0].parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)
    assert not {t.data_ptr() for t in _held(twin.scan_workspace)} & {
        t.data_ptr() for t in _held(blocks[0].scan_workspace)
    }
    fresh = MambaBlock(d_model=8, d_state=3, scan="recurrent")
    fresh.load_state_dict(blocks[0].state_dict())
    fresh(x).square().sum().backward()
    for p, q in zip(fresh.parameters(), blocks[0].parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)


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
