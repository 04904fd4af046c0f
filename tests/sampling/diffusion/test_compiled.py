"""The functional (optionally compiled) DSM and DSM + FP steps equal the eager autograd steps."""

import os

import pytest
import torch

from sci_moe.sampling.diffusion import VPSDE, MLPEnergy, MLPScore, Stage, TrainConfig, train
from sci_moe.sampling.diffusion import compiled as compiled_mod
from sci_moe.sampling.diffusion.compiled import make_dsm_fp_step, make_dsm_step
from sci_moe.sampling.diffusion.losses import dsm_fp_loss, dsm_loss, time_weight


def _batch(B=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(B, 1, 2, generator=g, dtype=torch.float64) * 0.4
    t = 1e-3 + (1 - 1e-3) * torch.rand(B, generator=g, dtype=torch.float64)
    noise = torch.randn(B, 1, 2, generator=g, dtype=torch.float64)
    return x0, t, noise, time_weight(t, 0.3, 1e-3, 1.0)


@pytest.mark.parametrize("cls", [MLPEnergy, MLPScore])
def test_functional_step_equals_autograd(cls):
    torch.manual_seed(0)
    net = cls((1, 2), (16, 16)).double()
    params = list(net.parameters())
    x0, t, noise, w = _batch()
    loss, grads = make_dsm_step(net, VPSDE(), params, compile=False)(x0, t, noise, w)
    ref, _ = dsm_loss(net.score, VPSDE(), x0, t, noise, w)
    ref_grads = torch.autograd.grad(ref, params, allow_unused=True)
    torch.testing.assert_close(loss, ref.detach())
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, torch.zeros_like(g) if r is None else r)


def test_params_must_belong_to_target():
    net = MLPEnergy((1, 2), (8,))
    with pytest.raises(ValueError, match="parameters of target"):
        make_dsm_step(net, VPSDE(), [torch.nn.Parameter(torch.zeros(2))], compile=False)


def _train(compile_flag, data):
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (16, 16)).double()
    cfg = TrainConfig(
        stages=[Stage(2, (1e-3, 1.0), 0.3, 0.0, lr=3e-3)],
        batch_size=64,
        progress=False,
        compile=compile_flag,
    )
    out = train(net, data, VPSDE(), cfg)
    return net, out["history"]


def test_compile_failure_falls_back_to_eager_and_trains_the_same(monkeypatch):
    """``compile=True`` with a compiler that fails: a warning, then the same weights as eager."""

    def broken(fn, **kw):
        def call(*a, **k):
            raise RuntimeError("no compiler here")

        return call

    monkeypatch.setattr(compiled_mod.torch, "compile", broken)
    data = _batch(256, seed=1)[0]
    a, ha = _train(False, data)
    with pytest.warns(RuntimeWarning, match="eager step"):
        b, hb = _train(True, data)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        # same loss, different op order: AdamW's g / sqrt(v) amplifies the last-bit
        # differences of near-zero gradients
        torch.testing.assert_close(pb, pa, rtol=1e-4, atol=1e-6)
    assert abs(ha[-1]["dsm"] - hb[-1]["dsm"]) <= 1e-5 * abs(ha[-1]["dsm"])


@pytest.mark.skipif(
    os.environ.get("SCI_MOE_COMPILE_TESTS") != "1",
    reason="torch.compile takes minutes of CPU on a loaded machine; SCI_MOE_COMPILE_TESTS=1",
)
def test_compiled_step_equals_eager():
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (8,)).double()
    params = list(net.parameters())
    x0, t, noise, w = _batch()
    ref = make_dsm_step(net, VPSDE(), params, compile=False)(x0, t, noise, w)
    got = make_dsm_step(net, VPSDE(), params, compile=True)(x0, t, noise, w)
    torch.testing.assert_close(got[0], ref[0])
    for g, r in zip(got[1], ref[1], strict=True):
        torch.testing.assert_close(g, r)


def _fp_batch(B=32, seed=0):
    x0, t, noise, w = _batch(B, seed)
    g = torch.Generator().manual_seed(seed + 1)
    return x0, t, noise, w, g


@pytest.mark.parametrize("dim_offset", [None, 1.0])
def test_functional_fp_step_equals_eager_dsm_fp_loss(dim_offset):
    """Same probes (drawn as dsm_fp_loss draws them): same loss and gradients in float64."""
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (16, 16)).double()
    params = list(net.parameters())
    x0, t, noise, w, g = _fp_batch()
    state = g.get_state()
    xi = torch.stack([torch.randn(x0.shape, generator=g, dtype=x0.dtype) for _ in range(2)])
    g.set_state(state)
    l_dsm, l_fp = dsm_fp_loss(net, VPSDE(), x0, t, noise, w, g, dim_offset=dim_offset)
    ref = l_dsm + 5e-4 * l_fp
    ref_grads = torch.autograd.grad(ref, params)
    step = make_dsm_fp_step(net, VPSDE(), params, 5e-4, dim_offset=dim_offset, compile=False)
    (loss, got_dsm, got_fp), grads = step(x0, t, noise, w, xi)
    assert abs(l_fp.item()) > 1e-3  # the FP term is not trivially zero here
    for a, b in ((loss, ref), (got_dsm, l_dsm), (got_fp, l_fp)):
        torch.testing.assert_close(a, b.detach(), rtol=1e-9, atol=1e-12)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_fp_step_needs_an_energy_network():
    net = MLPScore((1, 2), (8,))
    with pytest.raises(ValueError, match="energy network"):
        make_dsm_fp_step(net, VPSDE(), list(net.parameters()), 5e-4, compile=False)


def _train_energy(compile_flag, data, fp_weight):
    """Two epochs of a float64 2-D energy MLP, DSM + ``fp_weight`` FP; (net, history)."""
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (16, 16)).double()
    cfg = TrainConfig(
        stages=[Stage(2, (1e-3, 1.0), 0.3, fp_weight, lr=3e-3)],
        batch_size=64,
        progress=False,
        compile=compile_flag,
    )
    return net, train(net, data, VPSDE(), cfg)["history"]


def test_functional_fp_training_equals_eager(monkeypatch):
    """``compile=True`` with the compiler a no-op: the functional FP path trains as eager."""
    monkeypatch.setattr(compiled_mod.torch, "compile", lambda fn, **kw: fn)
    data = _batch(256, seed=1)[0]
    a, ha = _train_energy(False, data, 5e-3)
    b, hb = _train_energy(True, data, 5e-3)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pb, pa, rtol=1e-6, atol=1e-9)
    for ra, rb in zip(ha, hb, strict=True):
        for k in ("loss", "dsm", "fp"):
            assert abs(ra[k] - rb[k]) <= 1e-9 * max(1.0, abs(ra[k]))


@pytest.mark.skipif(
    os.environ.get("SCI_MOE_COMPILE_TESTS") != "1",
    reason="torch.compile takes CPU-seconds to minutes; SCI_MOE_COMPILE_TESTS=1",
)
def test_compiled_fp_step_equals_eager():
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (8,)).double()
    params = list(net.parameters())
    x0, t, noise, w, g = _fp_batch()
    xi = torch.randn(2, *x0.shape, generator=g, dtype=x0.dtype)
    ref = make_dsm_fp_step(net, VPSDE(), params, 5e-4, compile=False)(x0, t, noise, w, xi)
    got = make_dsm_fp_step(net, VPSDE(), params, 5e-4, compile=True)(x0, t, noise, w, xi)
    for a, b in zip(got[0], ref[0], strict=True):
        torch.testing.assert_close(a, b)
    for a, b in zip(got[1], ref[1], strict=True):
        torch.testing.assert_close(a, b)


def test_functional_fp_step_applies_to_the_alanine_expert():
    """The 5-bead InvariantMLPEnergy (the shipped model's small-t expert, positions
    (B, 5, 3)) goes through the functional DSM + FP step with the eager loss and gradients."""
    from sci_moe.sampling.diffusion import InvariantMLPEnergy

    torch.manual_seed(0)
    net = InvariantMLPEnergy(5, (16, 16), t_range=(1e-5, 0.099)).double()
    params = list(net.parameters())
    g = torch.Generator().manual_seed(3)
    B = 24
    x0 = torch.randn(B, 5, 3, generator=g, dtype=torch.float64)
    t = 1e-5 + 0.099 * torch.rand(B, generator=g, dtype=torch.float64)
    noise = torch.randn(B, 5, 3, generator=g, dtype=torch.float64)
    w = time_weight(t, 0.03, 1e-5, 0.099)
    state = g.get_state()
    xi = torch.stack([torch.randn(x0.shape, generator=g, dtype=x0.dtype) for _ in range(2)])
    g.set_state(state)
    l_dsm, l_fp = dsm_fp_loss(net, VPSDE(), x0, t, noise, w, g)
    ref_grads = torch.autograd.grad(l_dsm + 1e-3 * l_fp, params)
    step = make_dsm_fp_step(net, VPSDE(), params, 1e-3, compile=False)
    (loss, got_dsm, got_fp), grads = step(x0, t, noise, w, xi)
    assert abs(l_fp.item()) > 1e-3
    torch.testing.assert_close(loss, (l_dsm + 1e-3 * l_fp).detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(got_dsm, l_dsm.detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(got_fp, l_fp.detach(), rtol=1e-9, atol=1e-10)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


def _update_pair(fused):
    """Two copies of a net: one stepped by the in-graph update, one by clip + AdamW + EMA."""
    torch.manual_seed(0)
    a = MLPEnergy((1, 2), (16, 16)).double()
    b = MLPEnergy((1, 2), (16, 16)).double()
    b.load_state_dict(a.state_dict())
    pa, pb = list(a.parameters()), list(b.parameters())
    oa = torch.optim.AdamW(pa, lr=1e-2, weight_decay=0.1)
    ob = torch.optim.AdamW(pb, lr=1e-2, weight_decay=0.1, fused=fused or None)
    return (a, pa, oa), (b, pb, ob)


@pytest.mark.parametrize("fused", [False, True])
def test_in_graph_adamw_update_equals_optimizer_step(fused):
    """``optimizer=``: clip, AdamW and EMA in the step equal ``clip_grad_value_`` +
    ``AdamW.step`` + the trainer's EMA lerp over 12 steps (changing lr and decay), and the
    optimiser's own state (step count, moments) is what it updated."""
    (a, pa, oa), (b, pb, ob) = _update_pair(fused)
    upd = make_dsm_step(a, VPSDE(), pa, compile=False, optimizer=oa, grad_clip=0.01)
    ref = make_dsm_step(b, VPSDE(), pb, compile=False)
    ema_a = [p.detach().clone() for p in pa]
    ema_b = [p.detach().clone() for p in pb]
    clipped = False
    for k in range(12):
        batch = _batch(seed=k)
        lr, decay = 1e-2 * (1 - k / 12), min(0.9, (1 + k) / (10 + k))
        loss_a = upd(*batch, lr=lr, ema=ema_a, decay=decay)
        loss_b, grads = ref(*batch)
        clipped |= any(bool((g.abs() > 0.01).any()) for g in grads)
        for p, g in zip(pb, grads, strict=True):
            p.grad = g
        torch.nn.utils.clip_grad_value_(pb, 0.01)
        ob.param_groups[0]["lr"] = lr
        ob.step()
        with torch.no_grad():
            torch._foreach_lerp_(ema_b, [p.detach() for p in pb], 1 - decay)
        torch.testing.assert_close(loss_a, loss_b, rtol=1e-9, atol=1e-12)
    assert clipped  # the clip was active
    for x, y in zip([*pa, *ema_a], [*pb, *ema_b], strict=True):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-12)
    assert not torch.equal(pa[0], _update_pair(fused)[0][1][0])  # it did train
    for q, r in zip(pa, pb, strict=True):
        sa, sb = oa.state[q], ob.state[r]
        assert float(sa["step"]) == float(sb["step"]) == 12
        torch.testing.assert_close(sa["exp_avg_sq"], sb["exp_avg_sq"], rtol=1e-9, atol=1e-15)


def test_in_graph_update_rejects_other_optimizers():
    net = MLPEnergy((1, 2), (8,))
    params = list(net.parameters())
    with pytest.raises(ValueError, match="AdamW"):
        make_dsm_step(net, VPSDE(), params, compile=False, optimizer=torch.optim.SGD(params, 0.1))
    with pytest.raises(ValueError, match="exactly params"):
        make_dsm_step(net, VPSDE(), params[:1], compile=False, optimizer=torch.optim.AdamW(params))
    with pytest.raises(ValueError, match="amsgrad"):
        opt = torch.optim.AdamW(params, amsgrad=True)
        make_dsm_step(net, VPSDE(), params, compile=False, optimizer=opt)


def test_functional_plain_training_equals_eager(monkeypatch):
    """``compile=True`` with the compiler a no-op: plain DSM training through the functional
    step (its gradients to the engine's fused AdamW, clip, EMA, cosine lr) gives eager
    training's weights and losses."""
    monkeypatch.setattr(compiled_mod.torch, "compile", lambda fn, **kw: fn)
    data = _batch(256, seed=1)[0]
    a, ha = _train(False, data)
    b, hb = _train(True, data)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        # the energy's output bias has a zero DSM gradient (the score ignores it): AdamW
        # turns its rounding-level gradients into lr-sized steps, hence the atol
        torch.testing.assert_close(pb, pa, rtol=1e-6, atol=1e-6)
    for ra, rb in zip(ha, hb, strict=True):
        assert abs(ra["dsm"] - rb["dsm"]) <= 1e-9 * max(1.0, abs(ra["dsm"]))


@pytest.mark.skipif(
    os.environ.get("SCI_MOE_COMPILE_TESTS") != "1",
    reason="torch.compile takes CPU-seconds to minutes; SCI_MOE_COMPILE_TESTS=1",
)
@pytest.mark.parametrize("fp", [0.0, 5e-3])
def test_compiled_training_equals_eager(fp):
    """The real compiled steps (plain and DSM + FP), their gradients to the engine's AdamW,
    train as eager (float64)."""
    data = _batch(256, seed=1)[0]
    a, ha = _train_energy(False, data, fp)
    b, hb = _train_energy(True, data, fp)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pb, pa, rtol=1e-4, atol=1e-6)
    for k in ("dsm", "fp"):
        assert abs(ha[-1][k] - hb[-1][k]) <= 1e-5 * max(1e-9, abs(ha[-1][k]))


@pytest.mark.parametrize("flag", [True, False])
def test_cpp_wrapper_option_holds_for_the_train_call_only(monkeypatch, flag):
    """``compile_cpp_wrapper`` is the inductor's ``cpp_wrapper`` while the compiled steps
    run (where they compile) and is restored afterwards."""
    import torch._inductor.config as inductor_config

    seen = []

    def spy(fn, **kw):
        def call(*a, **k):
            seen.append(inductor_config.cpp_wrapper)
            return fn(*a, **k)

        return call

    monkeypatch.setattr(compiled_mod.torch, "compile", spy)
    before = inductor_config.cpp_wrapper
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (8, 8)).double()
    cfg = TrainConfig(
        stages=[Stage(1, (1e-3, 1.0), 0.3, 0.0)],
        batch_size=32,
        max_batches_per_epoch=2,
        progress=False,
        compile=True,
        compile_cpp_wrapper=flag,
    )
    train(net, _batch(64)[0], VPSDE(), cfg)
    assert seen == [flag, flag]
    assert inductor_config.cpp_wrapper == before
