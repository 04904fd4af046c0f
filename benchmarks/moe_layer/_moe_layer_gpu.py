"""The GPU section of the MoE layer benchmark (``python benchmarks/moe_layer/run.py --gpu``).

Needs CUDA; bfloat16, one process, CUDA-event timing, median of ``max(--repeats, 10)``
steps after 3 warm-up steps (the first compiles the Triton kernels), at d in
{1024, 2048, 4096} and E in {8, 64, 128} (``--quick``: three of them). It first measures
the device's dense bf16 GEMM rate (``8192^3`` ``torch.mm``), then per case:

* **GEMM**: the experts' first grouped GEMM alone (``T k`` rows, ``d -> 2 ffn``),
  forward and forward + backward: sci-moe's Triton kernel on expert-sorted rows, the
  same kernel gathering token rows through the indices (no permuted copy),
  ``torch._grouped_mm`` (CUTLASS, sm90+), and one dense ``mm`` of equal FLOPs.
* **layer** (forward + backward of the whole layer): ``sci-moe triton`` (the ``MoE``
  layer; ``grouped_linear`` picks the kernels on CUDA), ``sci-moe fused`` (the same
  weights through :func:`~sci_moe.moe.kernels.scatter_grouped_linear`: gather fused
  into the first GEMM, routing weights and the per-slot scatter into the second),
  ``sci-moe grouped_mm`` (the layer with the kernels switched off, i.e.
  ``torch._grouped_mm``), ``transformers grouped_mm`` (``MixtralSparseMoeBlock`` with
  ``config._experts_implementation = "grouped_mm"``) and ``dense`` (one SwiGLU MLP of
  hidden ``k * d`` plus the router, as in ``run.py``).

Each figure is reported as TFLOP/s of model FLOPs and as the fraction of the measured
dense GEMM rate, with the peak memory a step adds. Outputs are cross-checked (bf16,
relative 3e-2) before timing. Run: ``python benchmarks/moe_layer/run.py --gpu [--quick]
[--json PATH]``; ``benchmarks/gpu_check.sh`` runs it with the GPU tests.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
import torch.nn.functional as F
from _common import Row, machine_info, print_table, write_json
from _moe_layer import BENCHMARK, Step, _leaf, mixtral_block

from sci_moe.moe import DenseSwiGLU, MoE

G_TRITON, G_FUSED, G_GMM = "sci-moe triton", "sci-moe fused", "sci-moe grouped_mm"
G_HF, G_DENSE = "transformers grouped_mm", "dense"
GPU_TOL = 3e-2  # bf16 agreement (relative to the largest entry) required before timing


@dataclass(frozen=True)
class GpuCase:
    """One bfloat16 problem of the GPU section."""

    name: str
    T: int
    d: int
    ffn: int
    E: int
    k: int

    @property
    def label(self) -> str:
        return f"{self.name}[T={self.T},d={self.d},ffn={self.ffn},E={self.E},k={self.k}]"

    def flops_per_token(self) -> int:
        """Model FLOPs of forward + backward for one token (as :meth:`Case.flops_per_token`)."""
        return 3 * (2 * self.d * self.E + 6 * self.k * self.d * self.ffn)


def make_gpu_cases(quick: bool) -> list[GpuCase]:
    """d in {1024, 2048, 4096} x E in {8, 64, 128}; ``ffn = d / 2``, k = 2 (E=8) or 8."""
    grid = [
        GpuCase(f"d{d}-E{E}", 8192, d, d // 2, E, 2 if E == 8 else 8)
        for d in (1024, 2048, 4096)
        for E in (8, 64, 128)
    ]
    if quick:
        return [c for c in grid if (c.d, c.E) in ((1024, 8), (1024, 64), (2048, 128))]
    return grid


def _cuda_times(fn, repeats: int, warmup: int = 3) -> list[float]:
    """Seconds per call of ``fn`` (CUDA events), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def _peak_mib(fn) -> float:
    """Memory one call of ``fn`` allocates above what was allocated before it (MiB)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def dense_gemm_rate(repeats: int) -> float:
    """Measured bf16 ``torch.mm`` rate of the device, FLOP/s (8192^3)."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    sec = statistics.median(_cuda_times(lambda: torch.mm(a, b), repeats, warmup=5))
    return 2 * n**3 / sec


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = want.float().abs().max().item()
    return (got.float() - want.float()).abs().max().item() / max(scale, 1e-30)


def _agree(name: str, got: torch.Tensor, want: torch.Tensor) -> float:
    err = _rel_err(got, want)
    if not err <= GPU_TOL:
        raise SystemExit(f"{name}: relative error {err:.3g} > {GPU_TOL}; not timing a wrong result")
    return err


def gpu_gemm(case: GpuCase, moe: MoE, x: torch.Tensor, repeats: int) -> list[dict]:
    """The first expert GEMM alone (``T k`` rows, ``d -> 2 ffn``): four implementations."""
    from sci_moe.moe.kernels import scatter_grouped_linear, triton_grouped_linear

    with torch.no_grad():
        routing = moe.router(x)
    plan = routing.plan
    W = moe.experts.gate_up.detach().clone().requires_grad_(True)
    rows = plan.num_kept
    xs = x[plan.token[:rows]].detach().clone().requires_grad_(True)
    xt = x.detach().clone().requires_grad_(True)
    dense_w = W[0].detach().clone().requires_grad_(True)
    offs = plan.offsets

    impls = {
        "triton (sorted rows)": (lambda: triton_grouped_linear(xs, W, plan.counts, offs), xs),
        "triton (gather via indices)": (
            lambda: scatter_grouped_linear(xt, W, plan, gather_input=True),
            xt,
        ),
        "torch._grouped_mm": (lambda: torch._grouped_mm(xs, W.transpose(-2, -1), offs=offs), xs),
        "dense mm": (lambda: F.linear(xs, dense_w), xs),
    }
    ref = impls["torch._grouped_mm"][0]().detach()
    flops = 2 * rows * case.d * 2 * case.ffn
    out = []
    for name, (fn, inp) in impls.items():
        if name != "dense mm":
            _agree(f"{case.label} GEMM {name} vs torch._grouped_mm", fn().detach(), ref)
        g = torch.randn(rows, 2 * case.ffn, device="cuda", dtype=torch.bfloat16)

        def step(fn=fn, inp=inp, g=g):
            inp.grad = W.grad = dense_w.grad = None
            (fn() * g).sum().backward()

        with torch.no_grad():
            fwd = statistics.median(_cuda_times(fn, repeats))
        both = statistics.median(_cuda_times(step, repeats))
        out.append({"impl": name, "fwd_tflops": flops / fwd / 1e12})
        out[-1]["fwd_bwd_tflops"] = 3 * flops / both / 1e12
    return out


def _fused_forward(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    """The layer's routed experts with gather and combine fused into the kernels."""
    from sci_moe.moe.kernels import scatter_grouped_linear

    routing = moe.router(x)
    plan = routing.plan
    bank = moe.experts
    h = scatter_grouped_linear(x, bank.gate_up, plan, gather_input=True)
    y = scatter_grouped_linear(
        bank._glu(h), bank.down, plan, scatter_output=True, weights=routing.weights
    )
    return y.view(x.shape[0], routing.top_k, -1).sum(1)


def gpu_layer(case: GpuCase, seed: int, repeats: int) -> tuple[dict, dict]:
    """Forward + backward of each layer contestant: seconds per step and peak MiB."""
    from sci_moe.moe import kernels

    torch.manual_seed(seed)
    moe = MoE(
        d_model=case.d,
        num_experts=case.E,
        top_k=case.k,
        d_hidden=case.ffn,
        expert="glu",
        check_finite=False,
    ).to("cuda", torch.bfloat16)
    dense = DenseSwiGLU(case.d, case.ffn, case.E, case.k).to("cuda", torch.bfloat16)
    x = torch.randn(case.T, case.d, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(case.T, case.d, device="cuda", dtype=torch.bfloat16)
    contestants = {
        G_TRITON: Step(moe, _leaf(x), g),
        G_FUSED: Step(moe, _leaf(x), g, lambda v: _fused_forward(moe, v)),
        G_GMM: Step(moe, _leaf(x), g),
        G_DENSE: Step(dense, _leaf(x), g),
    }
    try:
        block = mixtral_block(moe, case, "grouped_mm")
        shape = (1, case.T, case.d)
        contestants[G_HF] = Step(
            block, _leaf(x), g, lambda v: block(v.view(shape)).view(case.T, case.d)
        )
    except Exception as e:  # transformers missing or too old
        print(f"{case.label}: transformers grouped_mm block unavailable ({e})")

    def run(who, backward=True):
        kernels.set_kernels_enabled(who != G_GMM)
        try:
            step = contestants[who]
            if backward:
                return step()
            with torch.no_grad():
                return step.call(step.x)
        finally:
            kernels.set_kernels_enabled(None)

    want = run(G_TRITON, backward=False)
    for who in (G_FUSED, G_GMM, G_HF):
        if who in contestants:
            got = run(who, backward=False)
            _agree(f"{case.label} {who} vs {G_TRITON} output", got, want)
    sec, mem = {}, {}
    for who in contestants:
        sec[who] = statistics.median(_cuda_times(lambda who=who: run(who), repeats))
        mem[who] = _peak_mib(lambda who=who: run(who))
    return sec, mem


def gpu_main(args) -> int:
    """The GPU section (``--gpu``): see the module docstring."""
    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device")
    torch.manual_seed(args.seed)
    import sci_moe
    from sci_moe.moe import kernels

    repeats = max(args.repeats, 10)
    extra = {"sci_moe": sci_moe.__version__, "quick": args.quick, "repeats": repeats}
    try:
        import triton

        extra["triton"] = triton.__version__
    except ImportError:
        extra["triton"] = None
    try:
        import transformers

        extra["transformers"] = transformers.__version__
    except ImportError:
        extra["transformers"] = None
    machine = machine_info(seed=args.seed, **extra)
    machine["cuda_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    machine["cuda_runtime"] = torch.version.cuda
    if not kernels.triton_available():
        raise SystemExit("the GPU section needs triton (pip install 'sci-moe[triton]')")
    peak = dense_gemm_rate(repeats)
    machine["dense_bf16_gemm_tflops"] = round(peak / 1e12, 1)
    print(
        f"moe_layer --gpu: {machine['cuda']} (sm{machine['cuda_capability'].replace('.', '')}), "
        f"torch "
        f"{torch.__version__}, triton {extra['triton']}, transformers {extra['transformers']}"
        f"; measured dense bf16 GEMM {peak / 1e12:.0f} TFLOP/s; {repeats} repeats",
        flush=True,
    )
    rows: list[Row] = []
    gemm_table, layer_table = [], []
    for case in make_gpu_cases(args.quick):
        torch.manual_seed(args.seed)
        moe = MoE(d_model=case.d, num_experts=case.E, top_k=case.k, d_hidden=case.ffn)
        moe = moe.to("cuda", torch.bfloat16)
        x = torch.randn(case.T, case.d, device="cuda", dtype=torch.bfloat16)
        for r in gpu_gemm(case, moe, x, repeats):
            frac = r["fwd_bwd_tflops"] * 1e12 / peak
            gemm_table.append([case.label, r["impl"], r["fwd_tflops"], r["fwd_bwd_tflops"], frac])
            tag = f"gpu GEMM {case.label} {r['impl']}"
            rows.append(Row(tag, "fwd_tflops", r["fwd_tflops"], "TFLOP/s"))
            rows.append(Row(tag, "fwd_bwd_tflops", r["fwd_bwd_tflops"], "TFLOP/s"))
            rows.append(Row(tag, "fraction_of_dense_gemm", frac, "1"))
        del moe, x
        sec, mem = gpu_layer(case, args.seed, repeats)
        fpt = case.flops_per_token()
        for who, s in sec.items():
            tflops = case.T * fpt / s / 1e12
            frac = tflops * 1e12 / peak
            vs_gmm = sec[G_GMM] / s
            layer_table.append([case.label, who, 1e3 * s, tflops, frac, vs_gmm, mem[who]])
            tag = f"gpu layer {case.label} {who}"
            vs = f"gpu layer {case.label} {G_GMM}"
            rows.append(Row(tag, "model_tflops", tflops, "TFLOP/s", vs, vs_gmm))
            rows.append(Row(tag, "fraction_of_dense_gemm", frac, "1"))
            rows.append(Row(tag, "peak_step_mib", mem[who], "MiB"))
            print(f"{case.label} {who}: {1e3 * s:.2f} ms/step, {tflops:.0f} TFLOP/s", flush=True)
        torch.cuda.empty_cache()

    print()
    print_table(
        ["case", "GEMM (T k x d -> 2 ffn)", "fwd TFLOP/s", "fwd+bwd TFLOP/s", "x dense GEMM"],
        gemm_table,
        title=f"expert GEMM alone, bf16, median of {repeats}",
    )
    print()
    headers = ["case", "layer", "ms/step", "TFLOP/s", "x dense GEMM", "x grouped_mm", "peak MiB"]
    print_table(
        headers,
        layer_table,
        title=(
            f"layer forward+backward, bf16, median of {repeats}; x dense GEMM = fraction of "
            f"the measured {peak / 1e12:.0f} TFLOP/s"
        ),
    )
    if args.json is not None:
        write_json(args.json, BENCHMARK + "_gpu", machine, rows)
        print(f"wrote {args.json}")
    return 0
