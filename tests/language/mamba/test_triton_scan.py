"""Triton selective scan vs the step-by-step reference: outputs and every gradient.

On the CPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``) at tiny
sizes. The variable must be set before triton is imported, so those checks run in one
subprocess (:func:`_interpreter_main`) and the test here reads its JSON report; this
process never turns the interpreter on. The same checks run on CUDA at larger sizes
under ``@pytest.mark.gpu`` (``benchmarks/gpu_check.sh`` runs every ``gpu`` test).

Errors are relative, ``max|got - ref| / max|ref|`` per tensor, against
:func:`selective_scan_reference` in float64 from the same (rounded) inputs. Tolerances:
float32 1e-5 (float32 state and sums); bfloat16 2e-2 (inputs, outputs and input
gradients are stored in bfloat16, about four unit roundoffs of 2^-8).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sci_moe.language.mamba import (
    MambaBlock,
    RoMBlock,
    selective_scan,
    selective_scan_reference,
    triton_scan_supported,
    use_triton_scan,
)
from sci_moe.moe.kernels import kernels_enabled, set_kernels_enabled

ROOT = Path(__file__).resolve().parents[3]
HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
TOL = {"float32": 1e-5, "bfloat16": 2e-2}
NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state")
_MARK = "@@scan-report "


def _case(name, b=2, d=5, n=3, L=7, dtype="float32", block_d=2, **kw):
    c = dict(name=name, b=b, d=d, n=n, L=L, dtype=dtype, block_d=block_d)
    c.update(z=True, D=True, bias=True, init=True, softplus=True, strided=False, seed=0)
    c.update(kw)
    return c


def interpreter_cases() -> list[dict]:
    """Tiny cases (d <= 8, n <= 4, L <= 9); ``block_d`` 2 gives several channel programs."""
    nothing = dict(z=False, D=False, bias=False, init=False, softplus=False)
    return [
        _case("all options, 3 channel blocks (masked tail)"),
        _case("no z/D/bias/init/softplus", b=1, d=4, n=4, L=5, block_d=0, **nothing),
        _case("L=1", L=1),
        _case("strided B, C, z (as MambaBlock passes them)", d=8, n=4, L=9, strided=True),
        _case("bfloat16 inputs", d=4, n=3, L=6, dtype="bfloat16"),
    ]


def gpu_cases() -> list[dict]:
    """Larger cases for CUDA (default block sizes)."""
    return [
        _case("gpu float32", b=3, d=96, n=16, L=300, block_d=0),
        _case("gpu float32 no z/init", b=2, d=70, n=5, L=129, z=False, init=False, block_d=0),
        _case("gpu float32 strided", b=2, d=64, n=16, L=200, strided=True, block_d=0),
        _case("gpu bfloat16", b=2, d=64, n=16, L=64, dtype="bfloat16", block_d=0),
    ]


def _inputs(c: dict, device: str) -> dict:
    gen = torch.Generator().manual_seed(c["seed"])
    b, d, n, L = c["b"], c["d"], c["n"], c["L"]

    def r(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64)

    inp = dict(u=r(b, d, L), delta=r(b, d, L), A=-torch.rand(d, n, generator=gen) * 4)
    if c["strided"]:  # (b, L, n) storage read as (b, n, L), like x_proj's split output
        inp["B"], inp["C"] = r(b, L, n).transpose(1, 2), r(b, L, n).transpose(1, 2)
    else:
        inp["B"], inp["C"] = r(b, n, L), r(b, n, L)
    inp["D"] = r(d) if c["D"] else None
    inp["z"] = (r(b, L, d).transpose(1, 2) if c["strided"] else r(b, d, L)) if c["z"] else None
    inp["delta_bias"] = r(d) if c["bias"] else None
    inp["initial_state"] = r(b, d, n) if c["init"] else None
    dtype = getattr(torch, c["dtype"])
    out = {}
    for k, v in inp.items():
        if v is None:
            out[k] = None
            continue
        # A, D, bias and the state stay float32 (as MambaBlock keeps them)
        t = v.to(dtype if k in ("u", "delta", "B", "C", "z") else torch.float32)
        out[k] = t.to(device)
    return out


def _rel(got, ref) -> float:
    if got is None and ref is None:
        return 0.0
    scale = max(ref.abs().max().item(), 1e-30)
    return (got.double() - ref).abs().max().item() / scale


def run_case(c: dict, device: str) -> dict:
    """Relative errors of ``y``, the last state and every input gradient."""
    import sci_moe.language.mamba._triton_scan as k

    k.FORCE_BLOCK_D = c["block_d"]
    inp = _inputs(c, device)
    gen = torch.Generator().manual_seed(1)
    y_shape, h_shape = (c["b"], c["d"], c["L"]), (c["b"], c["d"], c["n"])
    gy = torch.randn(y_shape, generator=gen, dtype=torch.float64).to(device)
    gh = torch.randn(h_shape, generator=gen, dtype=torch.float64).to(device)

    def run(fn, cast, **kw):
        leaves = {
            k_: None if v is None else cast(v.detach()).requires_grad_(True)
            for k_, v in inp.items()
        }
        y, h = fn(**leaves, delta_softplus=c["softplus"], return_last_state=True, **kw)
        live = [v for v in leaves.values() if v is not None]
        loss = (y.double() * gy).sum() + (h.double() * gh).sum()
        grads = iter(torch.autograd.grad(loss, live))
        return {"y": y, "last_state": h} | {
            f"grad[{k_}]": None if v is None else next(grads) for k_, v in leaves.items()
        }

    try:
        got = run(selective_scan, lambda t: t, backend="triton")
    finally:
        k.FORCE_BLOCK_D = 0
    ref = run(selective_scan_reference, lambda t: t.double())
    return {name: _rel(got[name], ref[name]) for name in got}


def _block_error(y, g, y_ref, g_ref, floor: float) -> float:
    errs = [_rel(y, y_ref)]
    for a, b in zip(g, g_ref, strict=True):
        errs.append((a - b).abs().max().item() / max(b.abs().max().item(), floor))
    return max(errs)


def block_check(device: str) -> dict:
    """MambaBlock and RoMBlock choose the kernels automatically: same outputs and grads.

    Both float32 runs (torch path, kernel path) are measured against a float64 run of the
    torch path; the kernel path must be as accurate as the torch path (within 2x, or
    1e-5), since two float32 computations of a whole block's backward may differ from
    each other by more than either differs from the exact result's rounding allows to
    pin down with one fixed tolerance (it depends on the CPU's vector kernels).
    """
    import copy

    import sci_moe.language.mamba.scan_kernel as sk

    out = {}
    torch.manual_seed(0)
    for name, block in (
        ("MambaBlock", MambaBlock(d_model=8, d_state=4)),
        ("RoMBlock", RoMBlock(d_model=8, d_state=4, num_experts=2, top_k=1)),
    ):
        block = block.to(device)
        x = torch.randn(2, 6, 8, device=device)
        results = []
        for auto, dtype in ((False, torch.float64), (False, torch.float32), (True, torch.float32)):
            model = copy.deepcopy(block).to(dtype)
            calls = []
            real = sk.triton_selective_scan

            def counted(*a, _real=real, _calls=calls, **kw):
                _calls.append(1)
                return _real(*a, **kw)

            sk.triton_selective_scan = counted
            set_kernels_enabled(auto)  # the one kernel switch of the core
            try:
                y = model(x.to(dtype))
                y = y[0] if isinstance(y, tuple) else y
                y.square().sum().backward()
            finally:
                sk.triton_selective_scan = real
                set_kernels_enabled(None)
            grads = [p.grad.detach().double() for p in model.parameters() if p.grad is not None]
            results.append((y.detach().double(), grads, len(calls)))
        (y64, g64, _), (y0, g0, n0), (y1, g1, n1) = results
        # per tensor, floored at 1e-3 of the largest gradient: the router's gradient
        # is ~1e-9 here (top-1 of 2 softmax experts), pure rounding at its own scale
        floor = 1e-3 * max(g.abs().max().item() for g in g64)

        err_torch, err_kernel = (
            _block_error(y, g, y64, g64, floor) for y, g in ((y0, g0), (y1, g1))
        )
        out[name] = {
            "err": err_kernel / max(2.0 * err_torch, TOL["float32"]) * TOL["float32"],
            "err_kernel": err_kernel,
            "err_torch": err_torch,
            "kernel_calls": [n0, n1],
        }
    return out


def _interpreter_main() -> None:
    """Entry point of the ``TRITON_INTERPRET=1`` subprocess: print one JSON report."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    torch.set_num_threads(1)
    import sci_moe.language.mamba.scan_kernel as sk

    report = {"cases": {c["name"]: run_case(c, "cpu") for c in interpreter_cases()}}
    # the automatic choice is CUDA-only; let it take CPU tensors here
    sk.use_triton_scan = lambda *ts: kernels_enabled() and sk.triton_scan_supported(*ts)
    report["blocks"] = block_check("cpu")
    print(_MARK + json.dumps(report), flush=True)


def _failures(cases: list[dict], errors: dict, blocks: dict) -> list[str]:
    bad = []
    for c in cases:
        for t, e in errors[c["name"]].items():
            if not e <= TOL[c["dtype"]]:
                bad.append(f"{c['name']}: {t} relative error {e:.2e} > {TOL[c['dtype']]:.0e}")
    for name, r in blocks.items():
        if not r["err"] <= TOL["float32"]:
            bad.append(
                f"{name}: kernel path error {r['err_kernel']:.2e} vs float64, torch path's "
                f"{r['err_torch']:.2e}: more than 2x the torch path's (or {TOL['float32']:.0e})"
            )
        if r["kernel_calls"][0] != 0 or r["kernel_calls"][1] < 1:
            bad.append(f"{name}: kernel calls (off, on) = {r['kernel_calls']}")
    return bad


# ------------------------------------------------------------------------- tests


@needs_triton
def test_triton_scan_under_interpreter():
    """Every interpreter case and the blocks' automatic choice (one subprocess)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("SCI_MOE_KERNELS", None)
    code = "from tests.language.mamba.test_triton_scan import _interpreter_main as m; m()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    report = json.loads(lines[-1][len(_MARK) :])
    cases = interpreter_cases()
    assert set(report["cases"]) == {c["name"] for c in cases}
    bad = _failures(cases, report["cases"], report["blocks"])
    assert not bad, "\n".join(bad)


def test_cpu_never_picks_the_kernels(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    u = torch.randn(1, 3, 4)
    assert not use_triton_scan(u) and not triton_scan_supported(u)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_scan_supported(u)  # the interpreter may run them, when asked to
    assert not use_triton_scan(u)  # but the automatic choice stays on the torch path
    assert not triton_scan_supported(u.double())
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(1, 3, 4, generator=gen), torch.randn(1, 3, 4, generator=gen)]
    args += [-torch.rand(3, 2, generator=gen), torch.randn(1, 2, 4, generator=gen)]
    args += [torch.randn(1, 2, 4, generator=gen)]
    assert torch.equal(selective_scan(*args), selective_scan(*args, backend="torch"))


def test_kernel_switch_of_the_core_forces_the_torch_scan(monkeypatch):
    """``sci_moe.moe.kernels.set_kernels_enabled(False)`` sends ``backend="auto"`` to the torch
    scan even where the kernels would be chosen (the one switch for every kernel)."""
    import sci_moe.language.mamba.scan_kernel as sk

    # Make the CPU look like a device the kernels run on, and record kernel calls.
    monkeypatch.delenv("SCI_MOE_KERNELS", raising=False)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(sk, "triton_scan_supported", lambda *ts: True)
    monkeypatch.setattr(sk, "triton_scan_available", lambda: True)
    calls = []

    def kernel(*args):
        calls.append(1)
        return args[0]

    monkeypatch.setattr(sk, "triton_selective_scan", kernel)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(1, 3, 4, generator=gen), torch.randn(1, 3, 4, generator=gen)]
    args += [-torch.rand(3, 2, generator=gen), torch.randn(1, 2, 4, generator=gen)]
    args += [torch.randn(1, 2, 4, generator=gen)]
    assert use_triton_scan(args[0]) and kernels_enabled()
    selective_scan(*args)
    assert calls == [1]  # enabled: the automatic choice takes the kernels
    set_kernels_enabled(False)
    try:
        assert not use_triton_scan(args[0])
        y = selective_scan(*args)
    finally:
        set_kernels_enabled(None)
    assert calls == [1]  # disabled: the torch scan, no kernel call
    assert torch.equal(y, selective_scan(*args, backend="torch"))
    monkeypatch.setenv("SCI_MOE_KERNELS", "0")  # the environment form of the same switch
    assert not use_triton_scan(args[0])


def test_backend_errors(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    args = [torch.randn(1, 3, 4), torch.randn(1, 3, 4), -torch.rand(3, 2)]
    args += [torch.randn(1, 2, 4), torch.randn(1, 2, 4)]
    with pytest.raises(ValueError, match="backend must be one of"):
        selective_scan(*args, backend="cuda")
    with pytest.raises(ValueError, match="backend='torch'"):
        selective_scan(*args, backend="triton")  # CPU tensors without the interpreter
    with pytest.raises(ValueError, match="B must have shape"):
        selective_scan(*args[:3], args[3][..., :3], args[4], backend="triton")


@pytest.mark.gpu
@needs_triton
def test_triton_scan_on_cuda():
    cases = gpu_cases()
    errors = {c["name"]: run_case(c, "cuda") for c in cases}
    blocks = block_check("cuda")
    bad = _failures(cases, errors, blocks)
    assert not bad, "\n".join(bad)
    u = torch.randn(1, 4, 8, device="cuda")
    assert use_triton_scan(u)


_IO = ("u_ptr", "delta_ptr", "b_ptr", "c_ptr", "z_ptr", "y_ptr", "dy_ptr")


def _compile_for(fn, consts: dict, capability: int = 90):
    """Compile ``fn`` ahead of time for an NVIDIA target (no GPU needed; triton's ptxas).

    bfloat16 sequence tensors (``u, delta, B, C, z, y, dy``), float32 parameters, states
    and gradients; 16-divisible pointers, as a launch specialises them.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = "*bf16" if name in _IO else "*fp32"
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[name] = "i32"
    src = ASTSource(fn, sig, consts, attrs)
    target = GPUTarget("cuda", capability, 32)
    return triton.compile(src, target=target, options=dict(num_warps=4, num_stages=2))


@needs_triton
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kernels_compile_for_hopper():
    """Forward and backward compile for sm90 (the interpreter does not check that)."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("the interpreter is on in this process")
    nvidia = pytest.importorskip("triton.backends.nvidia")
    ptxas = os.environ.get("TRITON_PTXAS_PATH") or Path(nvidia.__file__).parent / "bin" / "ptxas"
    if not Path(ptxas).is_file():
        pytest.skip("triton's ptxas is not available")
    from sci_moe.language.mamba import _triton_scan as K

    consts = dict(HAS_Z=True, SOFTPLUS=True, BLOCK_D=32, BLOCK_N=16)
    fwd = _compile_for(K._scan_fwd_kernel, dict(consts, STORE_STATES=True))
    bwd = _compile_for(K._scan_bwd_kernel, consts)
    for kernel in (fwd, bwd):
        assert ".target sm_90" in kernel.asm["ptx"]
        assert kernel.asm.get("cubin")
