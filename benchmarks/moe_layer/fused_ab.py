"""A candidate CPU path of the MoE layer, a fused per-expert GLU node, against the core's.

The candidate (:func:`fused_glu_mlp`, here and not in the core: it did not measure
faster) runs a SwiGLU bank on expert-sorted rows as one autograd node: each expert's two
GEMMs and its GLU back to back, forward and backward (so the expert's ``(rows, 2 f)``
intermediate is still in cache for the next pass), every result written with ``out=``
into one preallocated tensor (no ``cat``/``stack``), one small buffer per intermediate
reused by all experts, only ``[gate; up]`` saved for the backward (a third fewer saved
activations than the sorted path). This script times the whole layer's training step
(forward + backward, ``run.py``'s ``Step``) with the candidate (``fused``) against
the core's automatic path (``package``: sorted ``grouped_mm``, or the chunked sorted path
where :func:`sci_moe.moe.chunked_path` applies) and the dense SwiGLU of equal active FLOPs
(``dense``), interleaved in one process (each repeat runs every contestant once, order
rotated), over the float32 grid cases of ``run.py`` at d <= 256 (those the
per-expert loop takes are skipped) plus a few d = 1024 and bfloat16 cases. The candidate
is first checked against the package (output and all gradients).

Rows: per case ``ms`` of each contestant with the ratio ``t_package / t_fused`` (> 1: the
candidate is faster) and the layer's ``t_dense / t_package`` (the grid's "x dense");
summaries of ``fused x package`` over the cases a size rule would take
(:func:`candidate_rule`: float32, width ``2 d_hidden <= 512``, >= 96 rows and <= 1 MiB
of intermediate per expert on average, where a first development A/B had the candidate
ahead) and over the others.

Run: ``python benchmarks/moe_layer/fused_ab.py [--quick] [--threads 1] [--repeats 5]
[--json PATH]``.
"""

from __future__ import annotations

import statistics
import sys
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

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

BENCHMARK = "moe_layer_fused_ab"
GRID_CASES = tuple(
    (T, d, E, k, "float32")
    for d in (64, 128, 256)
    for T in (256, 1024, 4096)
    for E in (8, 32, 64)
    for k in (1, 2, 4, 8)
)
CASES = (
    *GRID_CASES,
    (256, 1024, 8, 1, "float32"),
    (1024, 1024, 8, 1, "float32"),
    (1024, 1024, 8, 2, "float32"),
    (1024, 128, 8, 4, "bfloat16"),
    (1024, 256, 8, 2, "bfloat16"),
    (4096, 128, 32, 4, "bfloat16"),
)
QUICK_CASES = ((256, 64, 8, 4, "float32"), (256, 64, 32, 1, "float32"))
RULE_MIN_ROWS, RULE_MAX_SHARE, RULE_MAX_WIDTH = 96, 2**20, 512


def candidate_rule(n: int, E: int, width: int, dtype: torch.dtype) -> bool:
    """The size rule the candidate would take (``n`` sorted rows, ``E`` experts)."""
    return (
        dtype == torch.float32
        and width <= RULE_MAX_WIDTH
        and n >= RULE_MIN_ROWS * E
        and n * width * 4 <= RULE_MAX_SHARE * E
    )


class _FusedGLUMLP(torch.autograd.Function):
    """SwiGLU bank on sorted rows, expert by expert, forward and backward (the candidate)."""

    @staticmethod
    def forward(ctx, x, gate_up, down, counts):
        f = gate_up.shape[1] // 2
        gu, y = x.new_empty(x.shape[0], 2 * f), x.new_empty(x.shape[0], down.shape[1])
        h = x.new_empty(max(counts, default=0), f)
        w1t, w2t = gate_up.transpose(1, 2).unbind(0), down.transpose(1, 2).unbind(0)
        for e, (xs, gs, ys) in enumerate(
            zip(x.split(counts), gu.split(counts), y.split(counts), strict=True)
        ):
            c = xs.shape[0]
            if c:
                torch.mm(xs, w1t[e], out=gs)
                he = torch.ops.aten.silu.out(gs[:, :f], out=h[:c]).mul_(gs[:, f:])
                torch.mm(he, w2t[e], out=ys)
        ctx.counts = counts
        ctx.save_for_backward(x, gate_up, down, gu)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, gate_up, down, gu = ctx.saved_tensors
        counts = ctx.counts
        if torch.is_grad_enabled():  # create_graph: differentiate a recomputed graph
            inputs = (x, gate_up, down)
            wanted = [t for t in inputs if t.requires_grad]
            with torch.enable_grad():
                parts = []
                for xs, w1, w2 in zip(x.split(counts), gate_up, down, strict=True):
                    gate, up = F.linear(xs, w1).chunk(2, -1)
                    parts.append(F.linear(F.silu(gate) * up, w2))
                grads = iter(torch.autograd.grad(torch.cat(parts), wanted, dy, create_graph=True))
            return (*(next(grads) if t.requires_grad else None for t in inputs), None)
        f = gate_up.shape[1] // 2
        dy = dy.contiguous()
        dx, dw1, dw2 = torch.empty_like(x), torch.empty_like(gate_up), torch.empty_like(down)
        m = max(counts, default=0)
        act_buf, h_buf, dg_buf = x.new_empty(m, f), x.new_empty(m, f), x.new_empty(m, 2 * f)
        parts = zip(
            x.split(counts), gu.split(counts), dy.split(counts), dx.split(counts), strict=True
        )
        for e, (xs, gs, dys, dxs) in enumerate(parts):
            c = xs.shape[0]
            if c == 0:
                dw1[e].zero_()
                dw2[e].zero_()
                continue
            gate, up = gs[:, :f], gs[:, f:]
            act = torch.ops.aten.silu.out(gate, out=act_buf[:c])
            torch.mm(dys.t(), torch.mul(act, up, out=h_buf[:c]), out=dw2[e])
            dh = torch.mm(dys, down[e], out=h_buf[:c])
            dg = dg_buf[:c]
            torch.mul(dh, act, out=dg[:, f:])
            torch.mul(dh, up, out=dg[:, :f])
            torch.ops.aten.silu_backward.grad_input(dg[:, :f], gate, grad_input=dg[:, :f])
            torch.mm(dg.t(), xs, out=dw1[e])
            torch.mm(dg, gate_up[e], out=dxs)
        return dx, dw1, dw2, None


def fused_glu_mlp(x, gate_up, down, counts: list[int]) -> torch.Tensor:
    """The candidate: ``y[r] = W2_e (silu(gate) * up)``, ``[gate; up] = W1_e x[r]``.

    ``x`` (N, d_in) sorted by expert, ``gate_up`` (E, 2 f, d_in), ``down`` (E, d_out, f),
    ``counts`` the rows per expert; returns (N, d_out).
    """
    return _FusedGLUMLP.apply(x.contiguous(), gate_up, down, list(counts))


def fused_step(step, bank):
    """``step`` with ``bank.forward_sorted`` replaced by the candidate for the call."""

    def run():
        bank.forward_sorted = types.MethodType(
            lambda self, x, plan: fused_glu_mlp(x, self.gate_up, self.down, plan.counts.tolist()),
            bank,
        )
        try:
            return step()
        finally:
            del bank.forward_sorted

    return run


def case_contestants(T: int, d: int, E: int, k: int, dtype: str) -> tuple[dict, dict] | None:
    """``({name: step}, info)`` of one case, the candidate checked against the package;
    ``None`` where the per-expert loop takes the case."""
    from _moe_layer import DENSE, SCI, Case, automatic_path, build

    steps = build(Case(T, d, E, k, dtype), seed=0, transformers=False)
    sci = steps[SCI]
    package = automatic_path(sci.module, sci.x, k)
    if package == "per_expert":
        return None
    with torch.no_grad():
        plan = sci.module.router(sci.x).plan
    bank = sci.module.experts
    fns = {"fused": fused_step(sci, bank), "package": sci, "dense": steps[DENSE]}
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == "bfloat16" else dict(atol=1e-5, rtol=1e-4)
    want_y = fns["package"]()
    want = [p.grad.clone() for p in sci.module.parameters()] + [sci.x.grad.clone()]
    y = fns["fused"]()
    torch.testing.assert_close(y.float(), want_y.float(), **tol)
    got = [p.grad for p in sci.module.parameters()] + [sci.x.grad]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), **tol)
    rule = candidate_rule(plan.num_kept, E, bank.per_expert_width, sci.x.dtype)
    return fns, {"package": package, "rule": rule}


def measure(cases, repeats: int) -> list[Row]:
    rows, table = [], []
    for T, d, E, k, dtype in cases:
        label = f"T={T},d={d},E={E},k={k},{dtype}"
        built = case_contestants(T, d, E, k, dtype)
        if built is None:
            print(f"{label}: the per-expert loop's case, skipped", flush=True)
            continue
        fns, info = built
        times = interleaved(fns, repeats)
        rule = "rule" if info["rule"] else "no rule"
        tag = f"({rule}; package {info['package']})"
        fused = statistics.median(
            p / f for f, p in zip(times["fused"], times["package"], strict=True)
        )
        dense = statistics.median(
            d_ / p for p, d_ in zip(times["package"], times["dense"], strict=True)
        )
        ms = {n: 1e3 * statistics.median(t) for n, t in times.items()}
        rows.append(Row(f"{label} package {tag}", "ms", ms["package"], "ms"))
        rows.append(Row(f"{label} fused {tag}", "ms", ms["fused"], "ms", f"{label} package", fused))
        rows.append(Row(f"{label} dense {tag}", "ms", ms["dense"], "ms", f"{label} package", dense))
        table.append([label, info["package"], rule, fused, dense])
        print(f"{label} ({rule}): fused x package {fused:.3f}", flush=True)
    rows += summary_rows(rows)
    print_table(
        ["case", "package path", "rule", "fused x package", "package x dense"],
        table,
        title=f"layer step, median of {repeats} interleaved repeats (> 1: faster)",
    )
    return rows


def summary_rows(rows: list[Row]) -> list[Row]:
    """Medians (min, max, count) of ``fused x package`` over the cases the candidate rule
    takes and those it leaves out, and of the package's ratio to dense over the float32
    d >= 128 cases."""
    out = []

    def add(name, vals):
        if vals:
            out.append(Row(f"summary {name}", "median", statistics.median(vals), "x"))
            out.append(Row(f"summary {name}", "min", min(vals), "x"))
            out.append(Row(f"summary {name}", "max", max(vals), "x"))
            out.append(Row(f"summary {name}", "cases", float(len(vals)), "1"))

    fused = [r for r in rows if " fused (" in r.case]
    add("fused x package, rule takes it", [r.ratio for r in fused if "(rule;" in r.case])
    add("fused x package, rule leaves it", [r.ratio for r in fused if "(no rule;" in r.case])
    dense = [
        r.ratio
        for r in rows
        if " dense (" in r.case and ",float32 " in r.case and int(r.case.split(",")[1][2:]) >= 128
    ]
    add("package x dense, float32 d>=128", dense)
    return out


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    policy = setup(args)
    t0 = time.perf_counter()
    other = OtherLoad()
    import sci_moe

    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        repeats=args.repeats,
        malloc=policy,
        mode="quick" if args.quick else "full",
    )
    rows = measure(QUICK_CASES if args.quick else CASES, args.repeats)
    return finish(args, BENCHMARK, machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
