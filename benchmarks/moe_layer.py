"""MoE layer training speed: forward + backward tokens/s against three baselines.

Contestants, all built from the same seed (same weights, same input):

``reference``
    :func:`sci_moe.testing.reference_moe_forward`, the naive per-token loop. Only a
    handful of tokens (its backward materialises a full ``(E, 2h, d)`` zero gradient
    per token and slot), so its tokens/s comes from the smaller ``T`` in the table.
``transformers``
    transformers' eager ``MixtralSparseMoeBlock`` (a Python loop over the hit experts)
    holding a copy of the sci-moe weights; its outputs and all gradients are checked
    against sci-moe (to 1e-4) before it is timed.
``sci-moe``
    ``MoE(d_model=d, num_experts=E, top_k=k, d_hidden=ffn, expert="glu")``: SwiGLU
    experts, softmax router with top-k renormalisation (as Mixtral).
``dense``
    One SwiGLU MLP of hidden size ``k * ffn`` (the same active FLOPs per token) plus
    the same router linear + softmax + top-k, whose top-k mass scales the output so
    the router gets a gradient: the practical speed limit of a dropless MoE.

A step is ``y = layer(x); (y * g).sum().backward()`` with ``x.requires_grad`` and a
fixed random ``g``; the figure is the median of ``--repeats`` steps after a warm-up
step. Every (case, contestant) runs in a **fresh process**, one after the other: in a
shared process the allocator state left by earlier contestants moved a contestant's
time by up to 20 %. GFLOP/s counts model FLOPs: forward ``2 d E + 6 k d ffn`` per token
(router + three expert GEMMs), backward twice that.

Cases (the targets of the issue):

* ``A``: T=4096, d=1024, ffn=1024, E=32, k=4, float32. Target: sci-moe >= 0.8x dense.
* ``B``: T=4096, d=1024, ffn=1024, E=64, k=8, float32. Target: sci-moe >= 3x transformers.
* ``A-bf16``: case A in bfloat16, sci-moe against dense only.

``--quick`` uses T=1024, d=ffn=256 for every case (about 30 s on two idle cores, most
of it process start-up). Run: ``python benchmarks/moe_layer.py [--quick] [--json PATH]
[--seed 0] [--threads N] [--repeats 3] [--malloc default|cached]``.

GPU section (``--gpu``; needs CUDA, replaces the CPU run): bfloat16, one process,
CUDA-event timing, median of ``max(--repeats, 10)`` steps after 3 warm-up steps (the
first compiles the Triton kernels). It first measures the device's dense bf16 GEMM rate
(``8192^3`` ``torch.mm``), then per case:

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
  ``config._experts_implementation = "grouped_mm"``) and ``dense`` (as above).

Each figure is reported as TFLOP/s of model FLOPs and as the fraction of the measured
dense GEMM rate, with the peak memory a step adds. Outputs are cross-checked (bf16,
relative 3e-2) before timing. Run: ``python benchmarks/moe_layer.py --gpu [--quick]
[--json PATH]``; ``benchmarks/gpu_check.sh`` runs it with the GPU tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _common import (
    OtherLoad,
    Row,
    base_parser,
    busy_warning,
    child_result,
    machine_info,
    print_table,
    run_isolated,
    setup,
    time_fn,
    write_json,
)
from torch import nn

from sci_moe.moe import MoE, to_transformers
from sci_moe.testing import reference_moe_forward

BENCHMARK = "moe_layer"
REF, HF, SCI, DENSE = "reference", "transformers", "sci-moe", "dense"
ATOL = RTOL = 1e-4  # float32 agreement required before timing a baseline


@dataclass(frozen=True)
class Case:
    """One problem size and the contestants measured on it."""

    name: str
    T: int
    d: int
    ffn: int
    E: int
    k: int
    dtype: torch.dtype
    t_ref: int  # tokens for the naive reference; 0 = not measured
    transformers: bool
    target: tuple[str, float] | None  # (baseline, minimum sci-moe / baseline)

    @property
    def label(self) -> str:
        dt = str(self.dtype).removeprefix("torch.")
        return f"{self.name}[d={self.d},ffn={self.ffn},E={self.E},k={self.k},{dt}]"

    @property
    def contestants(self) -> list[str]:
        return [REF] * bool(self.t_ref) + [HF] * self.transformers + [SCI, DENSE]

    def tokens(self, contestant: str) -> int:
        return self.t_ref if contestant == REF else self.T

    def flops_per_token(self) -> int:
        """Model FLOPs of forward + backward for one token."""
        return 3 * (2 * self.d * self.E + 6 * self.k * self.d * self.ffn)


def make_cases(quick: bool) -> list[Case]:
    T, d, ffn = (1024, 256, 256) if quick else (4096, 1024, 1024)
    f32, bf16 = torch.float32, torch.bfloat16
    return [
        Case("A", T, d, ffn, 32, 4, f32, 4, True, (DENSE, 0.8)),
        Case("B", T, d, ffn, 64, 8, f32, 2, True, (HF, 3.0)),
        Case("A-bf16", T, d, ffn, 32, 4, bf16, 0, False, (DENSE, 0.8)),
    ]


class DenseSwiGLU(nn.Module):
    """Dense SwiGLU of hidden ``k * ffn`` plus the MoE's router work (a speed baseline)."""

    def __init__(self, d: int, ffn: int, num_experts: int, k: int) -> None:
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, num_experts, bias=False)
        self.gate_up = nn.Linear(d, 2 * k * ffn, bias=False)
        self.down = nn.Linear(k * ffn, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = F.linear(x.float(), self.router.weight.float()).softmax(-1)
        mass = probs.topk(self.k, dim=-1).values.sum(-1, keepdim=True)
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up) * mass.to(x.dtype)


def mixtral_block(moe: MoE, case, implementation: str = "eager") -> nn.Module:
    """transformers' ``MixtralSparseMoeBlock`` holding a copy of ``moe``'s weights.

    ``implementation`` is transformers' ``_experts_implementation`` (``"eager"`` or
    ``"grouped_mm"``); weights are written with :func:`sci_moe.moe.to_transformers`,
    the block takes ``moe``'s device and dtype.
    """
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = MixtralConfig(
        hidden_size=case.d,
        intermediate_size=case.ffn,
        num_local_experts=case.E,
        num_experts_per_tok=case.k,
        hidden_act="silu",
        router_jitter_noise=0.0,
    )
    config._experts_implementation = implementation
    ref = moe.experts.gate_up
    block = MixtralSparseMoeBlock(config).to(ref.device, ref.dtype)
    return to_transformers(moe, block)


class Step:
    """``y = call(x); (y * g).sum().backward()`` with fresh gradients each time."""

    def __init__(self, module: nn.Module, x: torch.Tensor, g: torch.Tensor, call=None) -> None:
        self.module, self.x, self.g = module, x, g
        self.call = module if call is None else call

    def __call__(self) -> torch.Tensor:
        self.module.zero_grad(set_to_none=True)
        self.x.grad = None
        y = self.call(self.x)
        (y * self.g).sum().backward()
        return y.detach()

    def grads(self) -> dict[str, torch.Tensor]:
        return {n: p.grad for n, p in self.module.named_parameters()} | {"x": self.x.grad}


def _check(name: str, got: torch.Tensor, want: torch.Tensor, scale: float = 1.0) -> float:
    """Raise unless ``got`` matches ``want`` to ``scale * (ATOL + RTOL |want|)``."""
    diff = (got.float() - want.float()).abs()
    bound = scale * (ATOL + RTOL * want.float().abs())
    if not bool((diff <= bound).all()):
        raise SystemExit(
            f"{name}: max |diff| {diff.max().item():.3g} exceeds the tolerance "
            f"(atol={scale * ATOL:g}, rtol={scale * RTOL:g}); not timing a wrong result"
        )
    return diff.max().item()


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(True)


def measure(case: Case, who: str, seed: int, repeats: int) -> dict:
    """Build ``case`` from ``seed``, check ``who`` against sci-moe where it applies, time it."""
    torch.manual_seed(seed)
    moe = MoE(d_model=case.d, num_experts=case.E, top_k=case.k, d_hidden=case.ffn, expert="glu")
    moe = moe.to(case.dtype)
    dense = DenseSwiGLU(case.d, case.ffn, case.E, case.k).to(case.dtype)
    x = torch.randn(case.T, case.d, dtype=case.dtype)
    g = torch.randn(case.T, case.d, dtype=case.dtype)
    warmup, check = 1, None
    if who == SCI:
        step = Step(moe, _leaf(x), g)
    elif who == DENSE:
        step = Step(dense, _leaf(x), g)
    elif who == REF:
        n = case.t_ref
        step = Step(moe, _leaf(x[:n]), g[:n], lambda v: reference_moe_forward(moe, v))
        with torch.no_grad():
            want = moe(x[:n])
        diff = _check(f"{case.label} reference vs sci-moe output", step(), want)
        check = f"reference vs sci-moe on {n} tokens: max |diff| output {diff:.2e}"
        warmup = 0  # the checked step was the warm-up
    elif who == HF:
        sci = Step(moe, _leaf(x), g)
        y_sci = sci()
        ours = {name: t.clone() for name, t in sci.grads().items()}
        block = mixtral_block(moe, case)
        shape = (1, case.T, case.d)
        step = Step(block, _leaf(x), g, lambda v: block(v.view(shape)).view(case.T, case.d))
        d_out = _check(f"{case.label} transformers vs sci-moe output", step(), y_sci)
        theirs = step.grads()
        pairs = {
            "x": "x",
            "router.weight": "gate.weight",
            "experts.gate_up": "experts.gate_up_proj",
            "experts.down": "experts.down_proj",
        }
        # Gradients sum over many tokens: allow 10x the output tolerance.
        d_grad = max(
            _check(f"{case.label} gradient of {a}", ours[a], theirs[b], scale=10.0)
            for a, b in pairs.items()
        )
        check = (
            f"transformers vs sci-moe: max |diff| output {d_out:.2e}, "
            f"gradients {d_grad:.2e} (atol=rtol={ATOL:g} for outputs, 10x for gradients)"
        )
        warmup = 0  # the checked step was the warm-up
    else:
        raise ValueError(f"unknown contestant {who!r}")
    timing = time_fn(step, repeats=repeats, warmup=warmup)
    if not torch.isfinite(step()).all():
        raise SystemExit(f"{case.label} {who}: output is not finite")
    return {"times": timing.times, "check": check}


def child(args) -> None:
    """One (case, contestant) measurement, in its own process."""
    policy = setup(args)
    name, who = args.child
    case = {c.name: c for c in make_cases(args.quick)}[name]
    result = measure(case, who, args.seed, args.repeats)
    result["malloc"] = policy
    child_result(result)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed steps (default 3)")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "CONTESTANT"), help="internal")
    parser.add_argument(
        "--gpu", action="store_true", help="run the GPU section instead (needs CUDA)"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    if args.gpu:
        return gpu_main(args)
    if args.child:
        child(args)
        return 0
    setup(args)
    import transformers

    import sci_moe

    threads = torch.get_num_threads()
    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        transformers=transformers.__version__,
        quick=args.quick,
        repeats=args.repeats,
        isolation="one fresh process per (case, contestant)",
    )
    print(
        f"moe_layer: torch {machine['torch']}, {machine['cpu']}, {threads} threads, "
        f"seed {args.seed}, {args.repeats} repeats, malloc {args.malloc}, git {machine['git']}"
    )
    warning = busy_warning()
    if warning:
        print(warning)
    other = OtherLoad()

    rows: list[Row] = []
    table, verdicts = [], []
    common = ["--seed", args.seed, "--repeats", args.repeats, "--threads", threads]
    common += ["--malloc", args.malloc] + ["--quick"] * args.quick
    for case in make_cases(args.quick):
        res = {}
        for who in case.contestants:
            out = run_isolated([__file__, "--child", case.name, who, *common])
            machine["malloc"] = out["malloc"]
            res[who] = out["times"]
            med = sorted(out["times"])[len(out["times"]) // 2]
            note = f"; {out['check']}" if out["check"] else ""
            print(f"{case.label} {who}: {1e3 * med:,.0f} ms/step{note}", flush=True)
        sec = {who: torch.tensor(t).median().item() for who, t in res.items()}
        rate = {who: case.tokens(who) / s for who, s in sec.items()}
        fpt = case.flops_per_token()
        for who, s in sec.items():
            t = res[who]
            spread = (max(t) - min(t)) / s
            x_dense = rate[who] / rate[DENSE]
            x_hf = rate[who] / rate[HF] if HF in rate else None
            gflops = rate[who] * fpt / 1e9
            n = case.tokens(who)
            table.append([case.label, who, n, 1e3 * s, rate[who], gflops, x_dense, x_hf, spread])
            tag = f"{case.label} {who} T={case.tokens(who)}"
            if who != SCI:
                rows.append(Row(tag, "tokens_per_s", rate[who], "tokens/s"))
            else:
                for base in (DENSE, HF, REF):
                    if base in rate:
                        vs = f"{case.label} {base} T={case.tokens(base)}"
                        ratio = rate[SCI] / rate[base]
                        rows.append(Row(tag, "tokens_per_s", rate[SCI], "tokens/s", vs, ratio))
            rows.append(Row(tag, "model_flops_per_s", gflops, "GFLOP/s"))
        if case.target is not None:
            base, want = case.target
            got = rate[SCI] / rate[base]
            verdict = "MET" if got >= want else "NOT MET"
            verdicts.append(
                f"{case.label}: sci-moe / {base} = {got:.2f}x (target >= {want:g}x) {verdict}"
            )

    print()
    headers = ["case", "contestant", "T", "ms/step", "tokens/s", "GFLOP/s", "x dense"]
    print_table(
        [*headers, "x transf.", "spread"],
        table,
        title=f"forward+backward, median of {args.repeats} steps (spread = (max - min) / median)",
    )
    note = " (set for the full sizes, shown for information)" if args.quick else ""
    print(f"\ntargets{note}:")
    for v in verdicts:
        print("  " + v)
    load = other.report()
    machine["contention"] = load
    print(
        f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_s']} CPU s "
        f"({load['other_cpu_fraction']} of the cores)"
    )
    if load["other_cpu_fraction"] is not None and load["other_cpu_fraction"] > 0.05:
        print("warning: the CPUs were shared during the run; rerun on an idle machine")
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    return 0


# ---------------------------------------------------------------------------- GPU

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
    if quick:
        return [GpuCase("A", 4096, 1024, 1024, 32, 4), GpuCase("fine", 4096, 1024, 512, 64, 8)]
    return [
        GpuCase("A", 16384, 1024, 1024, 32, 4),  # the CPU case A, 4x the tokens
        GpuCase("fine", 16384, 2048, 768, 128, 8),  # Qwen3-30B-A3B-like layer
        GpuCase("coarse", 8192, 4096, 14336, 8, 2),  # Mixtral-8x7B-like layer
    ]


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


def _median(t: list[float]) -> float:
    return sorted(t)[len(t) // 2]


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
    sec = _median(_cuda_times(lambda: torch.mm(a, b), repeats, warmup=5))
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
            fwd = _median(_cuda_times(fn, repeats))
        both = _median(_cuda_times(step, repeats))
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
        sec[who] = _median(_cuda_times(lambda who=who: run(who), repeats))
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


if __name__ == "__main__":
    raise SystemExit(main())
