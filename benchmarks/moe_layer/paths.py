"""The experts' GEMMs of the MoE layer on CPU: which formulation is fastest, op by op.

One grouped linear of the SwiGLU experts' first weight (``gate_up``, ``(E, 2 ffn, d)``,
``ffn = d``) on ``E`` experts with ``rows`` rows each, split into its three GEMMs:

``forward``  ``y_e = x_e W_e^T``; ``dgrad``  ``dx_e = g_e W_e``; ``wgrad``  ``dW_e = g_e^T x_e``

and timed in each formulation the dispatch path could use:

``grouped_mm``
    ``torch._grouped_mm`` exactly as :func:`sci_moe.moe.grouped.grouped_linear` calls it (and as
    autograd calls it in the backward): on the CPU a C++ loop of ``mm`` over the groups.
``mm loop``
    one ``torch.mm`` per expert into its slice of a preallocated output (``out=``).
``linear loop``
    one ``F.linear`` per expert (forward only: ``linear`` may pick another kernel).
``bmm``
    one ``torch.bmm`` over ``(E, rows, .)`` (equal counts, so no padding is needed here:
    a lower bound of the padded ``bmm`` path).
``float32 upcast``
    bfloat16 only: the GEMM in float32 with casts in and out.
``wgrad reused``
    the weight gradient written by ``mm`` into the same ``(E, 2 ffn, d)`` buffer each
    time: what ``wgrad`` costs without allocating (and page-faulting) a fresh tensor.
``alloc only``
    ``torch.empty(E, 2 ffn, d).fill_(0)``: the cost of a fresh weight-gradient-sized
    tensor alone.
``dense``
    the baseline: the same op as one GEMM of equal FLOPs, all ``E rows`` rows against a
    single ``(2 ffn, d)`` weight (for ``fwd+bwd``: one ``F.linear``, forward and backward
    with a fresh weight gradient); what the grouped GEMMs would cost at a dense layer's
    efficiency.

and, as op ``fwd+bwd`` (the whole grouped linear, forward and backward with fresh
gradients), ``grouped_mm`` and the ``padded bmm`` of :func:`sci_moe.moe.grouped.grouped_linear`
with the path forced, and the ``padded bmm, former layout`` (``bmm(rows, W^T)`` always,
whose weight gradient autograd copies strided into the weight's layout).

All formulations of a case run in one process, **interleaved** (every repeat runs each
once, order rotated per repeat); the figure is the median over repeats, and each ratio
the median of per-repeat ratios to ``grouped_mm``. ``--layer`` adds the whole layer's
training step (sci-moe and the dense SwiGLU of ``run.py``, interleaved) for the
d = 1024, T = 256, k = 1 target cases.

``--alloc-ab`` runs this script ``--rounds`` times in child processes under each of three
CPU allocator settings, alternating, and reports the medians per setting: ``default``
(glibc as users get it), ``thp`` (PyTorch's ``THP_MEM_ALLOC_ENABLE=1``: tensors of 2 MB
and more are 2 MB aligned and ``madvise(MADV_HUGEPAGE)``, so a fresh tensor page-faults
once per 2 MB instead of once per 4 KB) and ``cached`` (``--malloc cached`` of
``_common.set_malloc_policy``: freed blocks are never returned to the kernel).

``--chunk-ab`` times instead a **cache-blocked sorted path** against the sorted path the
dispatch takes, on the whole layer's training step (float32, d = 128 and 256, 33-256 rows
per expert): the SwiGLU bank processes its experts in contiguous chunks whose
``(rows, 2 d_hidden)`` intermediate has at most ``budget`` bytes (512 KiB, 1 MiB,
2 MiB; the L2 is 1-2 MiB), ``grouped_mm`` + GLU + ``grouped_mm`` per chunk on a
``split`` of the sorted rows and of the stacked weights (whose backward is one ``cat``
each), the chunks' outputs concatenated and combined as on the sorted path. The sorted
contestant runs with ``set_grouped_path("grouped_mm")`` (no chunks, no loop), the
chunked ones too (their GEMMs), and ``package`` is the installed core's automatic path
(:func:`sci_moe.moe.chunked_path` where it applies). Every contestant is first checked
against the sorted path's output and gradients. The dense SwiGLU runs in the same
rotation.

Run: ``python benchmarks/moe_layer/paths.py --threads 1 [--quick] [--layer] [--alloc-ab]
[--chunk-ab] [--json PATH]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
import torch.nn.functional as F
from _common import (
    OtherLoad,
    Row,
    base_parser,
    finish,
    interleaved,
    machine_info,
    print_table,
    setup,
)

BENCHMARK = "moe_layer_paths"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# (d, E, rows per expert): the grid's d = 1024 targets (T = 256, k = 1 at E = 8/32;
# T = 1024, k = 2, E = 8) and the quick shape d = 256 (T = 1024, E = 32, k = 4).
CASES = ((1024, 8, 32), (1024, 32, 8), (1024, 8, 256), (256, 32, 128))
QUICK_CASES = ((1024, 8, 32), (256, 32, 128))
LAYER_CASES = ((256, 1024, 8, 1), (256, 1024, 32, 1))  # (T, d, E, k)
ALLOC = {"default": ({}, "default"), "thp": ({"THP_MEM_ALLOC_ENABLE": "1"}, "default")}
ALLOC["cached"] = ({}, "cached")
# --chunk-ab: float32 d = 128/256 grid cases with 33-256 rows per expert (T k / E).
CHUNK_CASES = tuple(
    (T, d, E, k)
    for d in (128, 256)
    for T in (256, 1024, 4096)
    for E in (8, 32, 64)
    for k in (1, 2, 4, 8)
    if 33 <= T * k // E <= 256
)
QUICK_CHUNK_CASES = ((1024, 256, 32, 4), (1024, 128, 32, 4))
CHUNK_BUDGETS = (2**19, 2**20, 2**21)  # bytes of (rows, 2 d_hidden) per chunk


def chunk_cases(min_rows: int | None, quick: bool) -> tuple:
    """``(T, d, E, k)`` of ``--chunk-ab``; with ``--chunk-min-rows N`` the float32 grid cases
    at d <= 256 with ``T k >= N`` (those the per-expert loop takes are skipped when run)."""
    if quick:
        return QUICK_CHUNK_CASES
    if min_rows is None:
        return CHUNK_CASES
    return tuple(
        (T, d, E, k)
        for d in (64, 128, 256)
        for T in (256, 1024, 4096)
        for E in (8, 32, 64)
        for k in (1, 2, 4, 8)
        if T * k >= min_rows
    )


def formulations(d: int, E: int, rows: int, dtype: torch.dtype) -> dict:
    """``{(op, path): closure}`` of one case (inputs built once, seeded)."""
    torch.manual_seed(0)
    f = 2 * d
    x = torch.randn(E * rows, d, dtype=dtype)
    g = torch.randn(E * rows, f, dtype=dtype)
    w = torch.randn(E, f, d, dtype=dtype) / d**0.5
    offs = torch.arange(1, E + 1, dtype=torch.int32) * rows
    y_out = torch.empty(E * rows, f, dtype=dtype)
    dx_out = torch.empty(E * rows, d, dtype=dtype)
    dw_out = torch.empty(E, f, d, dtype=dtype)
    sl = [slice(e * rows, (e + 1) * rows) for e in range(E)]
    wt = w.transpose(-2, -1)

    def mm_loop(a, b, out, tr=False):
        for e in range(E):
            torch.mm(
                a[sl[e]].t() if tr else a[sl[e]],
                b[e] if b.dim() == 3 else b[sl[e]],
                out=out[e] if tr else out[sl[e]],
            )

    fs = {
        ("forward", "grouped_mm"): lambda: torch._grouped_mm(x, wt, offs=offs),
        ("forward", "mm loop"): lambda: mm_loop(x, wt, y_out),
        ("forward", "linear loop"): lambda: [F.linear(x[s], w[e]) for e, s in enumerate(sl)],
        ("forward", "bmm"): lambda: torch.bmm(x.view(E, rows, d), wt),
        ("dgrad", "grouped_mm"): lambda: torch._grouped_mm(g, w, offs=offs),
        ("dgrad", "mm loop"): lambda: mm_loop(g, w, dx_out),
        ("dgrad", "bmm"): lambda: torch.bmm(g.view(E, rows, f), w),
        ("wgrad", "grouped_mm"): lambda: torch._grouped_mm(g.t(), x, offs=offs),
        ("wgrad", "mm loop"): lambda: torch.stack([g[s].t() @ x[s] for s in sl]),
        ("wgrad", "bmm"): lambda: torch.bmm(g.view(E, rows, f).transpose(1, 2), x.view(E, rows, d)),
        ("wgrad", "wgrad reused"): lambda: mm_loop(g, x, dw_out, tr=True),
        ("wgrad", "alloc only"): lambda: torch.empty(E, f, d, dtype=dtype).fill_(0),
        ("forward", "dense"): lambda: x @ wt[0],
        ("dgrad", "dense"): lambda: g @ w[0],
        ("wgrad", "dense"): lambda: g.t() @ x,
        ("fwd+bwd", "dense"): dense_linear_step(x, w[0], g),
    }
    fs.update(padded_bmm_formulations(x, w, g, E, rows))
    if dtype != torch.float32:
        wtf = wt.float()
        fs[("forward", "float32 upcast")] = lambda: torch._grouped_mm(x.float(), wtf, offs=offs).to(
            dtype
        )
        fs[("wgrad", "float32 upcast")] = lambda: torch._grouped_mm(
            g.t().float(), x.float(), offs=offs
        ).to(dtype)
    return fs


def dense_linear_step(x, weight, g):
    """One ``F.linear`` of all rows against one weight, forward and backward (fresh grads)."""
    xl, wl = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)

    def run():
        xl.grad = wl.grad = None
        F.linear(xl, wl).backward(g)

    return run


def _padded_bmm_weight_t(x, weight, counts, expert):
    """The padded bmm as it was before the layout choice: ``bmm(rows, W^T)`` always."""
    E, max_count = weight.shape[0], int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    flat = torch.arange(x.shape[0]) - starts[expert] + expert * max_count
    buf = x.new_zeros(E * max_count, x.shape[1]).index_copy(0, flat, x)
    out = torch.bmm(buf.view(E, max_count, -1), weight.transpose(-2, -1))
    return out.view(E * max_count, -1).index_select(0, flat)


def padded_bmm_formulations(x, w, g, E: int, rows: int) -> dict:
    """``("fwd+bwd", path)``: one grouped linear, forward and backward (input and weight
    gradients, fresh each call), as :func:`sci_moe.moe.grouped.grouped_linear` runs it with the
    path forced, and the padded bmm in its former ``bmm(rows, W^T)`` form."""
    from sci_moe.moe import set_grouped_path
    from sci_moe.moe.grouped import _padded_bmm, grouped_linear

    counts = torch.full((E,), rows)
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    expert = torch.repeat_interleave(torch.arange(E), counts)
    xl, wl = x.clone().requires_grad_(True), w.clone().requires_grad_(True)

    def run(path=None, fn=None):
        xl.grad = wl.grad = None
        set_grouped_path(path)
        try:
            y = (
                grouped_linear(xl, wl, counts, offsets)
                if fn is None
                else fn(xl, wl, counts, expert)
            )
            y.backward(g)
        finally:
            set_grouped_path(None)

    return {
        ("fwd+bwd", "grouped_mm"): lambda: run("grouped_mm"),
        ("fwd+bwd", "padded bmm"): lambda: run(fn=_padded_bmm),
        ("fwd+bwd", "padded bmm, former layout"): lambda: run(fn=_padded_bmm_weight_t),
    }


def layer_steps(T: int, d: int, E: int, k: int, dtype: str) -> dict:
    """The whole layer's training step: sci-moe and the dense SwiGLU of ``run.py``."""
    from _moe_layer import DENSE, SCI, Case, build

    steps = build(Case(T, d, E, k, dtype), seed=0)
    return {SCI: steps[SCI], DENSE: steps[DENSE]}


def chunked_forward_sorted(bank, x, plan, budget: int):
    """The SwiGLU bank on sorted rows, chunk by chunk of ``budget`` bytes (``--chunk-ab``)."""
    from sci_moe.moe.chunked import chunked_forward

    return chunked_forward(x, plan, (bank.gate_up, bank.down), bank._glu, 2 * bank.d_hidden, budget)


def chunk_ab(args) -> list[Row]:
    """``--chunk-ab``: the cache-blocked sorted path against the sorted one, layer steps."""
    import types

    from _moe_layer import DENSE, SCI, Case, build

    import sci_moe.moe as _moe
    from sci_moe.moe import set_grouped_path

    rows, table = [], []
    from sci_moe.moe.dispatch import per_expert_path

    budgets = CHUNK_BUDGETS if args.chunk_budgets is None else args.chunk_budgets
    for T, d, E, k in chunk_cases(args.chunk_min_rows, args.quick):
        label = f"T={T},d={d},E={E},k={k},float32"
        steps = build(Case(T, d, E, k, "float32"), seed=0, transformers=False)
        sci, bank = steps[SCI], steps[SCI].module.experts
        with torch.no_grad():
            plan = steps[SCI].module.router(sci.x).plan
        if per_expert_path(sci.x, plan, bank):
            print(f"{label}: the per-expert loop's case, skipped", flush=True)
            continue

        def on_path(path, fn):
            def run():
                set_grouped_path(path)
                try:
                    return fn()
                finally:
                    set_grouped_path(None)

            return run

        # "sorted": the unchunked sorted path (forced grouped_mm); "package": the
        # automatic path of the installed core (its own chunked rule where it applies).
        fns = {"sorted": on_path("grouped_mm", sci), DENSE: steps[DENSE]}
        if hasattr(_moe, "chunked_path"):
            fns["package"] = on_path(None, sci)

        def chunked(budget, sci=sci, bank=bank):
            bank.forward_sorted = types.MethodType(
                lambda self, x, sorted_plan: chunked_forward_sorted(self, x, sorted_plan, budget),
                bank,
            )
            try:
                return sci()
            finally:
                del bank.forward_sorted

        want_y = fns["sorted"]()
        want = [p.grad.clone() for p in sci.module.parameters()] + [sci.x.grad.clone()]
        names = [f"chunked {b >> 10} KiB" for b in budgets] + ["package"] * ("package" in fns)
        for b, name in zip(budgets, names, strict=False):
            fns[name] = on_path("grouped_mm", lambda b=b, chunked=chunked: chunked(b))
        for name in names:
            y = fns[name]()
            got = [p.grad for p in sci.module.parameters()] + [sci.x.grad]
            torch.testing.assert_close(y, want_y, atol=1e-5, rtol=1e-4)
            for a, w in zip(got, want, strict=True):
                torch.testing.assert_close(a, w, atol=1e-4, rtol=1e-4)
        times = interleaved(fns, args.repeats)
        base = times["sorted"]
        for name, t in times.items():
            ms = 1e3 * statistics.median(t)
            if name == "sorted":
                rows.append(Row(f"{label} layer sorted", "ms", ms, "ms"))
                continue
            ratio = statistics.median(b / a for a, b in zip(t, base, strict=True))
            rows.append(
                Row(f"{label} layer {name}", "ms", ms, "ms", f"{label} layer sorted", ratio)
            )
            table.append([label, name, ms, ratio])
        print(f"{label} done", flush=True)
    for name in [f"chunked {b >> 10} KiB" for b in budgets] + ["package"]:
        vals = [r.ratio for r in rows if r.case.endswith(f" layer {name}")]
        if not vals:
            continue
        rows.append(Row(f"summary {name} x sorted", "median", statistics.median(vals), "x"))
        rows.append(Row(f"summary {name} x sorted", "max", max(vals), "x"))
        rows.append(Row(f"summary {name} x sorted", "min", min(vals), "x"))
        rows.append(Row(f"summary {name} x sorted", "cases", float(len(vals)), "1"))
    vals = [r.ratio for r in rows if r.case.endswith(f" layer {DENSE}")]
    rows.append(Row("summary sorted x dense", "median", 1 / statistics.median(vals), "x"))
    print_table(
        ["case", "contestant", "ms", "x sorted (>1: faster)"],
        table,
        title=f"layer step, median of {args.repeats} interleaved repeats",
    )
    return rows


def measure(args) -> list[Row]:
    rows: list[Row] = []
    table = []
    cases = QUICK_CASES if args.quick else CASES
    for (d, E, n), dt in ((c, dt) for c in cases for dt in DTYPES):
        times = interleaved(formulations(d, E, n, DTYPES[dt]), args.repeats)
        label = f"d={d},E={E},rows={n},{dt}"
        for op in ("forward", "dgrad", "wgrad", "fwd+bwd"):
            base = times[(op, "grouped_mm")]
            for (o, path), t in times.items():
                if o != op:
                    continue
                ratio = statistics.median(b / a for a, b in zip(t, base, strict=True))
                ms = 1e3 * statistics.median(t)
                vs = None if path == "grouped_mm" else f"{label} {op} grouped_mm"
                rows.append(
                    Row(f"{label} {op} {path}", "ms", ms, "ms", vs, None if vs is None else ratio)
                )
                table.append([label, op, path, ms, ratio])
        print(f"{label} done", flush=True)
    if args.layer:
        from _moe_layer import DENSE, SCI

        for (T, d, E, k), dt in ((c, dt) for c in LAYER_CASES for dt in DTYPES):
            steps = layer_steps(T, d, E, k, dt)
            times = interleaved(steps, args.repeats)
            label = f"T={T},d={d},E={E},k={k},{dt}"
            ratio = statistics.median(b / a for a, b in zip(times[SCI], times[DENSE], strict=True))
            ms = 1e3 * statistics.median(times[SCI])
            ms_d = 1e3 * statistics.median(times[DENSE])
            rows.append(
                Row(f"{label} layer {SCI}", "ms", ms, "ms", f"{label} layer {DENSE}", ratio)
            )
            rows.append(Row(f"{label} layer {DENSE}", "ms", ms_d, "ms"))
            table.append([label, "layer step", f"{SCI} (ratio: x dense)", ms, ratio])
    print_table(
        ["case", "op", "path", "ms", "x grouped_mm (>1: faster)"],
        table,
        title=f"median of {args.repeats} interleaved repeats",
    )
    return rows


def _child(args, setting: str) -> dict[str, dict]:
    env_extra, malloc = ALLOC[setting]
    env = dict(os.environ) | env_extra
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, os.path.join(here, "paths.py"), "--json", out]
        cmd += ["--repeats", str(args.repeats), "--threads", str(torch.get_num_threads())]
        cmd += ["--malloc", malloc] + (["--quick"] if args.quick else [])
        cmd += ["--layer"] if args.layer else []
        subprocess.run(cmd, env=env, cwd=here, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return {r["case"]: r for r in json.load(f)["rows"]}


def alloc_ab(args) -> list[Row]:
    """``--alloc-ab``: the same measurement under three allocator settings, alternating."""
    runs = {s: [] for s in ALLOC}
    order = list(ALLOC)
    for r in range(args.rounds):
        for s in order[r % 3 :] + order[: r % 3]:
            runs[s].append(_child(args, s))
            print(f"round {r + 1} {s} done", flush=True)
    rows, table = [], []
    for case in runs["default"][0]:
        base = [run[case]["value"] for run in runs["default"]]
        for s in order:
            vals = [run[case]["value"] for run in runs[s]]
            med = statistics.median(vals)
            ratio = statistics.median(b / a for a, b in zip(vals, base, strict=True))
            vs = None if s == "default" else f"{case} [default]"
            rows.append(Row(f"{case} [{s}]", "ms", med, "ms", vs, None if vs is None else ratio))
            within = [run[case]["ratio"] for run in runs[s] if run[case]["ratio"] is not None]
            if within:
                rows.append(
                    Row(f"{case} [{s}]", "ratio_in_process", statistics.median(within), "x")
                )
            table.append([case, s, med, ratio, statistics.median(within) if within else "-"])
    print_table(
        ["case", "allocator", "ms", "x default (>1: faster)", "in-process ratio"],
        table,
        title=f"median over {args.rounds} rounds of alternating child processes",
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default 7)")
    p.add_argument("--layer", action="store_true", help="also the whole layer's step")
    p.add_argument("--alloc-ab", action="store_true", help="default / thp / cached allocator")
    p.add_argument("--rounds", type=int, default=3, help="--alloc-ab rounds (default 3)")
    p.add_argument("--chunk-ab", action="store_true", help="cache-blocked vs sorted path")
    p.add_argument(
        "--chunk-min-rows", type=int, default=None, help="--chunk-ab: grid cases with T k >= N"
    )
    p.add_argument(
        "--chunk-budgets",
        type=lambda s: tuple(int(v) << 10 for v in s.split(",")),
        default=None,
        help="--chunk-ab: chunk budgets in KiB, comma-separated (default 512,1024,2048)",
    )
    args = p.parse_args(argv)
    if args.repeats < 1 or args.rounds < 1:
        raise SystemExit("--repeats and --rounds must be >= 1")
    policy = setup(args)
    t0 = time.perf_counter()
    other = OtherLoad()
    import sci_moe

    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        repeats=args.repeats,
        malloc=policy,
        thp_mem_alloc=os.environ.get("THP_MEM_ALLOC_ENABLE", "0"),
        thp_sysfs=_thp_mode(),
        mode="alloc-ab" if args.alloc_ab else "quick" if args.quick else "full",
    )
    if args.chunk_ab:
        machine["mode"] = "chunk-ab" + (" quick" if args.quick else "")
        machine["chunk_min_rows"] = args.chunk_min_rows
        rows = chunk_ab(args)
    elif args.alloc_ab:
        machine["rounds"] = args.rounds
        rows = alloc_ab(args)
    else:
        rows = measure(args)
    return finish(args, BENCHMARK, machine, rows, other, t0)


def _thp_mode() -> str | None:
    """The kernel's transparent-huge-page mode (the bracketed word of sysfs), if readable."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()


if __name__ == "__main__":
    raise SystemExit(main())
