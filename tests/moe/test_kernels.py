"""Triton grouped-GEMM kernels vs a float64 reference: outputs and every gradient.

On the CPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``) at tiny
sizes. The variable must be set before triton is imported, so those checks run in one
subprocess (:func:`_interpreter_main`) and the test here only reads its report; this
process never turns the interpreter on. The same cases run on CUDA at larger sizes under
``@pytest.mark.gpu``, and :func:`test_kernels_compile_for_hopper` compiles the kernels
for sm90 without a GPU (the interpreter does not check that they compile).

Errors are relative: ``max|got - ref| / max|ref|`` per tensor, the reference computed
in float64 from the same (rounded) inputs. Tolerances (:data:`TOL`): float32 1e-5
(float32 accumulation; TF32 is off unless torch allows it); bfloat16 2e-2 and float16
3e-3, about four unit roundoffs of the format (2^-8 and 2^-11): outputs and gradients
are stored in the input dtype, the input gradient sums ``k`` rounded slot rows, and the
weight gradient rounds the routing-weight-scaled ``dY`` rows before the product; the
interpreter also truncates float32 -> bfloat16 instead of rounding to nearest (up to
twice the GPU's error). The routing weights' gradient is reduced in float32 and stays
near float32 accuracy in every dtype.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sci_moe.moe.grouped import grouped_linear
from sci_moe.moe.routing import make_plan

ROOT = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")

TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 3e-3}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_MARK = "@@kernel-report "


# --------------------------------------------------------------------------- cases


def _case(name, dtype="float32", T=12, k=2, E=4, d_in=24, d_out=16, **kw):
    c = dict(name=name, dtype=dtype, T=T, k=k, E=E, d_in=d_in, d_out=d_out)
    c.update(gather=True, scatter=True, weights=True, routing="random", force={}, seed=0)
    c.update(kw)
    return c


def _mode_name(g, s, w):
    return f"{'gather' if g else 'sorted'}-{'scatter' if s else 'sorted'}-{'w' if w else 'now'}"


def interpreter_cases() -> list[dict]:
    """Tiny cases for the interpreter (T 1-24, d 16-40, E 4, k 2)."""
    cases = []
    for g in (False, True):
        for s in (False, True):
            for w in (False, True):
                cases.append(_case(f"fp32 {_mode_name(g, s, w)}", gather=g, scatter=s, weights=w))
    cases += [
        _case("fp32 empty experts", routing="empty"),
        _case("fp32 T=1", T=1),
        _case("fp32 T=1 sorted", T=1, gather=False, scatter=False, weights=False),
        _case("fp32 dropped slots", routing="dropped", T=16),
        _case("fp32 dropped slots sorted-in", routing="dropped", T=16, gather=False),
        _case("fp32 skewed (multi-tile expert)", routing="skewed", T=24),
        _case("fp32 every slot dropped", routing="all dropped", T=8),
        _case(
            "fp32 small blocks (K loop, N tiles)",
            T=20,
            d_in=40,
            d_out=40,
            routing="skewed",
            force={"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16},
        ),
    ]
    for dt in ("bfloat16", "float16"):
        short = "bf16" if dt == "bfloat16" else "fp16"
        cases += [
            _case(f"{short} sorted-sorted-now", dt, gather=False, scatter=False, weights=False),
            _case(f"{short} gather-sorted-now", dt, scatter=False, weights=False),
            _case(f"{short} gather-scatter-w", dt, d_in=32, d_out=32),
            _case(f"{short} empty experts", dt, routing="empty"),
            _case(f"{short} T=1", dt, T=1),
            _case(f"{short} dropped slots", dt, routing="dropped", T=16),
        ]
    return cases


def gpu_cases() -> list[dict]:
    """The same checks with full tiles (and many of them): every mode in bfloat16, the
    plain and fully fused modes and the edge cases in float32 and float16."""
    big = dict(T=512, E=8, d_in=256, d_out=384)
    cases = []
    for dt in DTYPES:
        modes = [(False, False, False), (True, True, True)]
        if dt == "bfloat16":
            modes = [(g, s, w) for g in (False, True) for s in (False, True) for w in (False, True)]
        for g, s, w in modes:
            cases.append(
                _case(f"{dt} {_mode_name(g, s, w)}", dt, gather=g, scatter=s, weights=w, **big)
            )
        cases += [
            _case(f"{dt} empty experts", dt, routing="empty", **big),
            _case(f"{dt} dropped", dt, routing="dropped", **big),
            _case(f"{dt} skewed", dt, routing="skewed", **big),
            _case(f"{dt} T=1", dt, T=1, E=8, d_in=256, d_out=384),
            _case(f"{dt} odd sizes", dt, T=300, E=16, k=4, d_in=200, d_out=120),
        ]
    cases.append(_case("bfloat16 many experts", "bfloat16", T=1024, E=64, k=8, d_in=128, d_out=256))
    return cases


def _routing(c: dict, gen: torch.Generator) -> torch.Tensor:
    T, k, E = c["T"], c["k"], c["E"]
    if c["routing"] == "empty":  # only the even experts are ever used
        allowed = torch.arange(0, E, 2)
        pick = torch.stack([torch.randperm(len(allowed), generator=gen)[:k] for _ in range(T)])
        return allowed[pick]
    idx = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(T)])
    if c["routing"] == "skewed":  # slot 0 always expert 2, slot 1 anywhere else
        idx[:, 0] = 2
        idx[:, 1:] = torch.where(idx[:, 1:] == 2, (idx[:, 1:] + 1) % E, idx[:, 1:])
    elif c["routing"] == "all dropped":
        idx = torch.full_like(idx, E)
    elif c["routing"] == "dropped":  # ~30 % of the slots dropped (expert id E)
        drop = torch.rand(T, k, generator=gen) < 0.3
        idx = torch.where(drop, torch.full_like(idx, E), idx)
    return idx


def _rel(got: torch.Tensor | None, ref: torch.Tensor | None) -> float:
    if ref is None or ref.numel() == 0:
        return 0.0
    got = torch.zeros_like(ref) if got is None else got
    scale = ref.abs().max().item()
    return (got.double() - ref).abs().max().item() / max(scale, 1e-30)


def run_case(c: dict, device: str) -> dict:
    """Kernel vs float64 reference for one case: relative error per tensor."""
    from sci_moe.moe.kernels import _triton, scatter_grouped_linear

    gen = torch.Generator().manual_seed(c["seed"])
    dtype = DTYPES[c["dtype"]]
    T, k, E, d_in, d_out = c["T"], c["k"], c["E"], c["d_in"], c["d_out"]
    plan = make_plan(_routing(c, gen).to(device), E)
    M = plan.num_kept
    rows = T if c["gather"] else M
    x = torch.randn(rows, d_in, generator=gen).to(device, dtype)
    W = (torch.randn(E, d_out, d_in, generator=gen) / math.sqrt(d_in)).to(device, dtype)
    w = torch.rand(T, k, generator=gen).to(device) if c["weights"] else None
    out_rows = T * k if c["scatter"] else M
    gy = torch.randn(out_rows, d_out, generator=gen).to(device, dtype)

    leaves = [x.requires_grad_(), W.requires_grad_()] + (
        [w.requires_grad_()] if c["weights"] else []
    )
    _triton.FORCE_CONFIG.clear()
    _triton.FORCE_CONFIG.update(c["force"])
    try:
        y = scatter_grouped_linear(x, W, plan, c["gather"], c["scatter"], w)
        grads = torch.autograd.grad((y * gy).sum(), leaves)
    finally:
        _triton.FORCE_CONFIG.clear()

    # float64 reference, written independently: per-row products, index_copy scatter.
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    x64, W64 = ref_leaves[:2]
    src = plan.token[:M] if c["gather"] else torch.arange(M, device=device)
    ref_rows = torch.einsum("ri,roi->ro", x64[src], W64[plan.expert[:M]])
    if c["weights"]:
        ref_rows = ref_rows * ref_leaves[2].reshape(-1)[plan.order[:M]].unsqueeze(1)
    if c["scatter"]:
        ref = x64.new_zeros(T * k, d_out).index_copy(0, plan.order[:M], ref_rows)
    else:
        ref = ref_rows
    ref_grads = torch.autograd.grad((ref * gy.double()).sum(), ref_leaves, allow_unused=True)
    names = ["dx", "dW", "dgates"][: len(leaves)]
    err = {"y": _rel(y.detach(), ref.detach())}
    for n, a, b in zip(names, grads, ref_grads, strict=True):
        err[n] = _rel(a, b)
    assert y.shape == ref.shape and y.dtype == dtype
    return err


def hook_check(device: str) -> dict:
    """``triton_grouped_linear`` (what ``grouped_linear`` calls on CUDA) vs the torch path."""
    from sci_moe.moe.kernels import triton_grouped_linear

    out = {}
    for counts, d_in, d_out in [
        ([3, 0, 5, 1], 16, 32),
        ([0, 0, 0, 9], 15, 7),
        ([1, 1, 1, 1], 8, 8),
    ]:
        cnt = torch.tensor(counts, device=device)
        offs = torch.cumsum(cnt, 0).to(torch.int32)
        x = torch.randn(int(cnt.sum()), d_in, device=device, requires_grad=True)
        W = torch.randn(4, d_out, d_in, device=device, requires_grad=True)
        g = torch.randn(x.shape[0], d_out, device=device)
        y = triton_grouped_linear(x, W, cnt, offs)
        ga = torch.autograd.grad((y * g).sum(), [x, W])
        from sci_moe.moe import kernels

        was = kernels.kernels_enabled()
        kernels.set_kernels_enabled(False)  # the torch path, also on CUDA
        try:
            y_ref = grouped_linear(x, W, cnt, offs)
        finally:
            kernels.set_kernels_enabled(was)
        gb = torch.autograd.grad((y_ref * g).sum(), [x, W])
        key = f"counts={counts} {d_in}->{d_out}"
        out[key] = max(
            _rel(y, y_ref.double()), *(_rel(a, b.double()) for a, b in zip(ga, gb, strict=True))
        )
    return out


def layer_check(device: str) -> dict:
    """Whole MoE layers through ``grouped_linear``'s Triton path vs the naive reference."""
    from sci_moe.moe import MoE
    from sci_moe.testing import assert_moe_matches_reference

    out = {}
    configs = [
        ("glu fp32", dict(expert="glu"), torch.float32, 10),
        ("mlp+bias fp32", dict(expert="adapter"), torch.float32, 10),
        ("glu bf16", dict(expert="glu"), torch.bfloat16, 10),
    ]
    for name, kw, dtype, T in configs:
        torch.manual_seed(0)
        moe = MoE(d_model=16, num_experts=4, top_k=2, d_hidden=24, **kw).to(device, dtype)
        for p in moe.parameters():  # adapters start at zero: make every gradient non-trivial
            if p.dim() > 1:
                torch.nn.init.normal_(p, std=0.2)
        try:
            assert_moe_matches_reference(moe, num_tokens=T)
            out[name] = "ok"
        except AssertionError as e:
            out[name] = str(e)
    return out


def _interpreter_main() -> None:
    """Entry point of the ``TRITON_INTERPRET=1`` subprocess: print one JSON report."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    torch.set_num_threads(1)
    import sci_moe.moe.kernels as kernels

    report = {"cases": {}, "hook": {}, "layer": {}, "seconds": {}}
    t0 = time.perf_counter()
    for c in interpreter_cases():
        report["cases"][c["name"]] = {"dtype": c["dtype"], "err": run_case(c, "cpu")}
    report["seconds"]["cases"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    report["hook"] = hook_check("cpu")
    # Route grouped_linear to the kernels on the CPU (normally CUDA only).
    kernels.use_kernels = kernels.kernel_supported
    report["layer"] = layer_check("cpu")
    report["seconds"]["hook+layer"] = time.perf_counter() - t0
    print(_MARK + json.dumps(report), flush=True)


# ------------------------------------------------------------------------- tests


def _failures(report: dict) -> list[str]:
    bad = []
    for name, r in report["cases"].items():
        tol = TOL[DTYPES[r["dtype"]]]
        for t, e in r["err"].items():
            if not e <= tol:
                bad.append(f"{name}: {t} relative error {e:.2e} > {tol:.1e}")
    for name, e in report["hook"].items():
        if not e <= TOL[torch.float32]:
            bad.append(f"grouped_linear hook {name}: relative error {e:.2e}")
    for name, msg in report["layer"].items():
        if msg != "ok":
            bad.append(f"MoE layer {name}: {msg}")
    return bad


def _summary(report: dict) -> str:
    worst: dict[tuple[str, str], float] = {}
    for r in report["cases"].values():
        for t, e in r["err"].items():
            worst[(r["dtype"], t)] = max(worst.get((r["dtype"], t), 0.0), e)
    return ", ".join(f"{d} {t} {e:.1e}" for (d, t), e in sorted(worst.items()))


@needs_triton
def test_kernels_under_interpreter():
    """All interpreter cases, the grouped_linear hook and whole layers (one subprocess)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("SCI_MOE_KERNELS", None)
    cmd = [sys.executable, "-c", "from tests.moe.test_kernels import _interpreter_main as m; m()"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    report = json.loads(lines[-1][len(_MARK) :])
    assert len(report["cases"]) == len(interpreter_cases())
    bad = _failures(report)
    assert not bad, "\n".join(bad)
    print("max relative errors:", _summary(report))


def test_cpu_path_never_uses_kernels():
    from sci_moe.moe import kernels

    x, W = torch.randn(5, 16), torch.randn(3, 8, 16)
    assert not kernels.use_kernels(x, W)
    assert not kernels.use_kernels(x.double(), W.double())


def test_switch_and_support_rules(monkeypatch):
    from sci_moe.moe import kernels

    monkeypatch.delenv("SCI_MOE_KERNELS", raising=False)
    assert kernels.kernels_enabled()
    kernels.set_kernels_enabled(False)
    try:
        assert not kernels.kernels_enabled()
    finally:
        kernels.set_kernels_enabled(None)
    monkeypatch.setenv("SCI_MOE_KERNELS", "0")
    assert not kernels.kernels_enabled()
    monkeypatch.setenv("SCI_MOE_KERNELS", "1")
    assert kernels.kernels_enabled()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x, W = torch.randn(5, 16), torch.randn(3, 8, 16)
    assert not kernels.kernel_supported(x, W)  # CPU without the interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert kernels.kernel_supported(x, W)
    assert not kernels.kernel_supported(x.double(), W.double())
    assert not kernels.kernel_supported(x, W.half())
    assert not kernels.kernel_supported(x[:, :8], W)


@needs_triton
def test_api_errors(monkeypatch):
    from sci_moe.moe.kernels import scatter_grouped_linear

    plan = make_plan(torch.tensor([[0, 1], [2, 3]]), 4)
    W = torch.randn(4, 8, 16)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="CUDA"):
        scatter_grouped_linear(torch.randn(4, 16), W, plan)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # passes the device check; fails earlier
    with pytest.raises(ValueError, match="num_kept"):
        scatter_grouped_linear(torch.randn(3, 16), W, plan)
    with pytest.raises(ValueError, match="T \\* k"):
        scatter_grouped_linear(torch.randn(3, 16), W, plan, gather_input=True)
    with pytest.raises(ValueError, match="experts"):
        scatter_grouped_linear(torch.randn(4, 16), W[:3], plan)
    with pytest.raises(ValueError, match="weights"):
        scatter_grouped_linear(torch.randn(4, 16), W, plan, weights=torch.rand(3))


def _compile_for(fn, dtype: str, consts: dict, unit_strides: list[str], capability: int):
    """Compile ``fn`` ahead of time for an NVIDIA target (no GPU needed; triton's ptxas).

    Mimics what a launch specialises: 16-divisible pointers, strides and sizes, and
    unit strides as constants.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, attrs = {}, {}
    floats = {"ends_ptr": "*i32", "scale_ptr": "*fp32", "dg_ptr": "*fp32"}
    for i, n in enumerate(fn.arg_names):
        if n in consts or n in unit_strides:
            sig[n] = "constexpr"
        elif n.endswith("_ptr"):
            idx = "idx" in n or n in ("tile_expert_ptr", "tile_end_ptr", "counts_ptr")
            sig[n] = floats.get(n, "*i64" if idx else f"*{dtype}")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[n] = "i32"
            if n.startswith("stride") or n in ("N", "K"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn, sig, {**consts, **dict.fromkeys(unit_strides, 1)}, attrs)
    stages = 4 if capability >= 90 else 3
    target = GPUTarget("cuda", capability, 32)
    return triton.compile(src, target=target, options=dict(num_warps=8, num_stages=stages))


@needs_triton
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kernels_compile_for_hopper():
    """The bf16 kernels compile for sm90 (wgmma) with a pipelined main loop, no GPU needed.

    The interpreter does not check that a kernel compiles; this does, for the forward
    (gather + scatter + routing weights), the input/gate gradient and the weight gradient.
    """
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("the interpreter is on in this process")
    nvidia = pytest.importorskip("triton.backends.nvidia")
    ptxas = os.environ.get("TRITON_PTXAS_PATH") or Path(nvidia.__file__).parent / "bin" / "ptxas"
    if not Path(ptxas).is_file():
        pytest.skip("triton's ptxas is not available")
    from sci_moe.moe.kernels import _triton as K

    base = dict(EVEN_K=True, PRECISION="ieee", DOT_F32=False, BLOCK_M=128, BLOCK_N=128)
    base.update(BLOCK_K=64, GROUP_M=8, A_IDX=True, C_IDX=True, HAS_SCALE=True, WRITE_C=True)
    fwd = dict(base, G_IDX=False, DGATE=False)
    dx = dict(base, G_IDX=True, DGATE=True)
    dw = dict(X_IDX=True, DY_IDX=True, HAS_SCALE=True, PRECISION="ieee", DOT_F32=False)
    dw.update(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128)
    built = {
        "forward": _compile_for(
            K._scatter_gemm_kernel, "bf16", fwd, ["stride_ak", "stride_bk", "stride_cn"], 90
        ),
        "dx+dgates": _compile_for(
            K._scatter_gemm_kernel,
            "bf16",
            dx,
            ["stride_ak", "stride_bn", "stride_cn", "stride_gn"],
            90,
        ),
        "dW": _compile_for(
            K._grouped_xty_kernel, "bf16", dw, ["stride_xk", "stride_dyn", "stride_wk"], 90
        ),
    }
    for name, kernel in built.items():
        ttgir = kernel.asm["ttgir"]
        assert "warp_group_dot" in ttgir, f"{name}: no wgmma"
        assert "async_copy_global_to_local" in ttgir, f"{name}: main loop not pipelined"
        assert kernel.metadata.shared <= 227 * 1024, f"{name}: {kernel.metadata.shared} B smem"


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@needs_triton
@pytest.mark.parametrize("case", gpu_cases(), ids=lambda c: c["name"])
def test_kernels_cuda(case):
    err = run_case(case, "cuda")
    tol = TOL[DTYPES[case["dtype"]]]
    assert all(e <= tol for e in err.values()), err


@pytest.mark.gpu
@needs_triton
def test_grouped_linear_hook_cuda(monkeypatch):
    from sci_moe.moe import kernels

    monkeypatch.delenv("SCI_MOE_KERNELS", raising=False)
    x, W = torch.randn(8, 16, device="cuda"), torch.randn(4, 8, 16, device="cuda")
    assert kernels.use_kernels(x, W)
    errs = hook_check("cuda")
    assert all(e <= TOL[torch.float32] for e in errs.values()), errs


@pytest.mark.gpu
@needs_triton
def test_layers_cuda():
    res = layer_check("cuda")
    assert all(v == "ok" for v in res.values()), res


@pytest.mark.gpu
@needs_triton
def test_deterministic_cuda():
    from sci_moe.moe.kernels import scatter_grouped_linear

    c = _case("det", "bfloat16", T=2048, E=16, k=4, d_in=512, d_out=256)
    plan = make_plan(_routing(c, torch.Generator().manual_seed(0)).cuda(), c["E"])
    x = torch.randn(c["T"], 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    W = torch.randn(16, 256, 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.rand(c["T"], 4, device="cuda", requires_grad=True)
    g = torch.randn(c["T"] * 4, 256, device="cuda", dtype=torch.bfloat16)
    runs = []
    for _ in range(2):
        y = scatter_grouped_linear(x, W, plan, True, True, w)
        runs.append([y, *torch.autograd.grad((y * g).sum(), [x, W, w])])
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)
