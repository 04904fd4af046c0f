"""MoE layer training speed on CPU over a grid of sizes, against a dense MLP and transformers.

Contestants, all built from the same seed (same weights, same input), timed **in one
process, interleaved**: every repeat runs each contestant once, in an order rotated per
repeat, and the figure is the median over repeats of the *per-repeat ratio* ``t_base /
t_sci``. Contention from other processes then hits numerator and denominator of a ratio
alike and cancels as far as it is steady over one repeat (a few seconds); the CPU time
other processes used is recorded (``machine.contention``).

``sci-moe``
    ``MoE(d_model=d, num_experts=E, top_k=k, d_hidden=d, expert="glu")``: SwiGLU experts,
    softmax router with top-k renormalisation (as Mixtral); the GEMM path is the automatic
    choice of :func:`sci_moe.moe.grouped_path`.
``sci-moe other path``
    The same layer with the other CPU path forced
    (:func:`sci_moe.moe.set_grouped_path`: padded ``bmm`` where the rule picks
    ``grouped_mm`` and vice versa; the sorted ``grouped_mm`` path where
    :func:`sci_moe.moe.dispatch.per_expert_path` picks the loop or
    :func:`sci_moe.moe.chunked_path` the chunked sorted path): where each path
    wins. ``d <= 256`` only (float32; bfloat16 too since the bfloat16 rule of
    :func:`sci_moe.moe.grouped_path`).
``dense``
    One SwiGLU MLP of hidden size ``k * d`` (the same active FLOPs per token) plus the
    same router linear + softmax + top-k, whose top-k mass scales the output so the
    router gets a gradient: the practical speed limit of a dropless MoE.
``transformers``
    transformers' eager ``MixtralSparseMoeBlock`` (a Python loop over the hit experts)
    holding a copy of the sci-moe weights; its output and gradients are checked against
    sci-moe (float32: 1e-4 / 1e-3) before it is timed. ``--no-transformers`` leaves it
    out (its Python loop dominates the run time at many experts; the targets are the
    ratio to dense).

A step is ``y = layer(x); (y * g).sum().backward()`` with ``x.requires_grad`` and a
fixed random ``g``, after one warm-up step per contestant.

Grid: ``d`` in {64, 128, 256, 1024}, ``E`` in {8, 32, 64}, ``k`` in {1, 2, 4, 8}, ``T`` in
{256, 1024, 4096}, float32 and bfloat16 (288 cases, ``ffn = d``).

* ``--grid``: on one loaded core the whole grid takes hours (a d=1024, k=8, T=4096
  bfloat16 step alone is minutes: this CPU has no native bfloat16 GEMM), so the run
  keeps the cases whose step costs at most ``--max-gflop`` (float32, default 12) or
  ``--max-gflop-bf16`` (default 2.5) model GFLOP, always includes the target cases
  (d=1024: float32 T=256/1024 at E=8/32, k=1/2; bfloat16 T=256, k=1) and samples
  ``--sample`` (default 48) of the rest with ``random.Random(seed)``: deterministic.
* ``--full``: all 288 cases, the target cases first, then cheapest (model GFLOP per
  step) first; with ``--checkpoint PATH`` every finished case is saved atomically and a
  rerun resumes, ``--budget-s S`` starts no case after ``S`` seconds (the JSON lists the
  cases not run in ``machine.cases_not_run``); ``--stop-after N`` measures at most ``N``
  new cases (e.g. to re-measure cases dropped from a checkpoint).
* ``--quick``: 10 fixed cases at d=128/256 (under 3 minutes).
* ``--roofline``: is the layer bound by its weights' memory traffic? Measured copy
  bandwidth per buffer size, the page-fault rate of fresh tensors and the dense matmul
  rate, against the step times of six cases (:func:`roofline_main`).
* ``--profile``: torch.profiler breakdown of the small shape (d=ffn=256, T=1024, E=32/k=4
  and E=64/k=8, float32 and bfloat16), forward and backward separately, into GEMM,
  gather/scatter, elementwise, routing/plan and other.

``--json PATH`` writes the rows (per case: tokens/s of each contestant, ratios; summary
rows: the medians the targets are stated in); ``--plot PNG`` the ratio-to-dense plot.
Run: ``python benchmarks/moe_layer/run.py [--quick | --grid | --profile] [--json PATH]
[--plot PNG] [--seed 0] [--threads 1] [--repeats 3]``.

* ``--grid-peers``: all 288 cases (the order of ``--full``) against transformers'
  ``grouped_mm`` experts (its default CPU path) besides the eager block, dense and the
  other path, interleaved as above; rows ``vs=<case> transformers grouped_mm`` with a
  ratio at every case, per-region verdicts; written in pieces (``--max-hours H``,
  ``--stop-after N``, ``--resume``) into ``--json``: see ``_grid_peers.py``. Estimated
  CPU time of the whole grid on one thread (:func:`_grid_peers.estimate_cpu_s` on the
  committed ``moe_layer_grid.json``): 6,640 s of timed steps for the contestants of that
  run (the eager block at E=64, d=1024 alone about half of it: up to 70 s a step) plus
  480-610 s for grouped_mm (its step 0.84-1.21x sci-moe's on six cases measured here,
  d 64-1024, both dtypes), times 1.05-1.2 for building the models (the parts' wall
  time against their steps), times about 1.07 for this EPYC against that Xeon (sci-moe's
  float32 steps, ``moe_layer_grid_epyc_fp32.json``): 8,000-9,200 s (about 2.4 h); the slowest
  case about 6 minutes. The command (three pieces of at most an hour each, started one
  after the other; every piece after the first continues the stored run)::

      python benchmarks/moe_layer/run.py --grid-peers --threads 1 --repeats 3 --seed 0 \
          --json benchmarks/moe_layer/results/moe_layer_grid_peers.json --max-hours 1 --resume

  (run it again until it prints ``complete``; ``--resume`` on a missing file starts it).

GPU section (``--gpu``; needs CUDA, replaces the CPU run): see ``_moe_layer_gpu.py``.
Against transformers' ``grouped_mm`` and ``batched_mm`` experts too, ``ffn != d``, with
verdicts (``--hf-peers [--quick] [--no-large]``; ``--verdicts-only PATH``): see
``_hf_peers.py``.
"""

from __future__ import annotations

import itertools
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    piece_arguments,
    print_table,
    setup,
    verdicts_only,
    warn_if_busy,
    write_json,
)
from _grid_peers import BENCHMARK as GRID_PEERS
from _grid_peers import grid_peers_main
from _grid_peers import verdicts as grid_peers_verdicts
from _hf_peers import hf_peers_main
from _hf_peers import verdicts as hf_peers_verdicts
from _moe_layer import (
    ALT,
    BENCHMARK,
    DENSE,
    DTYPES,
    GRID_D,
    GRID_T,
    HF,
    SCI,
    TARGETS,
    Case,
    _best_of,
    _copy_rate,
    _timed,
    build,
    full_grid,
    full_grid_by_cost,
    measure,
    memory_rates,
    parse_label,
)


def grid_cases(seed: int, sample: int, max_gflop: float, max_gflop_bf16: float) -> list[Case]:
    """The deterministic sub-grid of ``--grid`` (see the module docstring)."""
    cap = {"float32": max_gflop, "bfloat16": max_gflop_bf16}
    fits = [c for c in full_grid() if c.gflop() <= cap[c.dtype] and c not in TARGETS]
    picked = random.Random(seed).sample(fits, min(sample, len(fits)))
    return sorted(TARGETS + picked, key=lambda c: (c.dtype, c.d, c.E, c.k, c.T))


def load_checkpoint(path) -> dict:
    """``{label: timings}`` of the cases a previous ``--checkpoint`` run finished."""
    import json
    import os

    if path is None or not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)["cases"]


def save_checkpoint(path, done: dict) -> None:
    """Rewrite the checkpoint atomically (a killed run keeps every finished case)."""
    from _common import write_json_doc

    write_json_doc(path, {"benchmark": BENCHMARK + "_checkpoint", "cases": done}, indent=None)


def quick_cases() -> list[Case]:
    f32 = [Case(1024, 256, E, k, "float32") for E, k in ((32, 4), (64, 8), (8, 2))]
    f32 += [Case(1024, 128, E, k, "float32") for E, k in ((32, 4), (8, 1))]
    f32 += [Case(256, 256, 8, 1, "float32"), Case(4096, 128, 8, 2, "float32")]
    bf16 = [Case(256, 256, 32, 4, "bfloat16"), Case(256, 128, 8, 2, "bfloat16")]
    return f32 + bf16 + [Case(256, 256, 8, 1, "bfloat16")]


def _ratios(times: dict, who: str, base: str) -> float:
    """Median over repeats of ``t_base / t_who`` (> 1: ``who`` faster)."""
    return statistics.median(b / a for a, b in zip(times[who], times[base], strict=True))


def cpu_main(args) -> int:
    import transformers

    import sci_moe

    if args.profile:
        return profile_main(args)
    if args.roofline:
        return roofline_main(args)
    if args.case:
        cases, mode = [parse_label(c) for c in args.case], "cases"
    elif args.full:
        cases, mode = full_grid_by_cost(), "full"
    elif args.grid:
        cases = grid_cases(args.seed, args.sample, args.max_gflop, args.max_gflop_bf16)
        mode = "grid"
    else:
        cases, mode = quick_cases(), "quick"
    threads = torch.get_num_threads()
    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        transformers=transformers.__version__,
        mode=mode,
        repeats=args.repeats,
        cases=len(cases),
        grid_size=len(full_grid()),
        max_gflop=args.max_gflop,
        max_gflop_bf16=args.max_gflop_bf16,
        sample=args.sample if args.grid else None,
        malloc=args.malloc,
        transformers_contestant=not args.no_transformers,
        timing="one process; contestants interleaved, order rotated per repeat; "
        "median of per-repeat ratios",
    )
    print(
        f"moe_layer ({mode}, {len(cases)} cases): torch {machine['torch']}, {threads} threads, "
        f"seed {args.seed}, {args.repeats} repeats, git {machine['git']}",
        flush=True,
    )
    warn_if_busy()
    other = OtherLoad()
    rows: list[Row] = []
    table, results = [], []
    t_start = time.perf_counter()
    done = load_checkpoint(args.checkpoint)
    if done:
        print(f"resuming: {len(done)} cases from {args.checkpoint}", flush=True)
    finished, measured = [], 0
    for i, case in enumerate(cases):
        if case.label in done:
            times = dict(done[case.label])
        elif (args.budget_s is not None and time.perf_counter() - t_start > args.budget_s) or (
            args.stop_after is not None and measured >= args.stop_after
        ):
            if len(finished) == i:  # say it once
                print(f"budget spent: {case.label} and later not run")
            continue
        else:
            times = measure(case, args.seed, args.repeats, not args.no_transformers)
            measured += 1
            if args.checkpoint is not None:
                done[case.label] = times
                save_checkpoint(args.checkpoint, done)
        finished.append(case.label)
        times = dict(times)
        auto, alt_path = times.pop("_paths")
        med = {who: statistics.median(t) for who, t in times.items()}
        x_dense = _ratios(times, SCI, DENSE)
        x_hf = _ratios(times, SCI, HF) if HF in times else None
        x_alt = _ratios(times, SCI, ALT) if ALT in times else None
        tps = case.T / med[SCI]
        tag = f"{case.label} {SCI}"
        rows.append(Row(tag, "tokens_per_s", tps, "tokens/s", f"{case.label} {DENSE}", x_dense))
        if x_hf is not None:
            rows.append(Row(tag, "tokens_per_s", tps, "tokens/s", f"{case.label} {HF}", x_hf))
        if x_alt is not None:
            rows.append(
                Row(tag, "tokens_per_s", tps, "tokens/s", f"{case.label} {ALT} ({alt_path})", x_alt)
            )
        for who in times:
            if who != SCI:
                rows.append(
                    Row(f"{case.label} {who}", "tokens_per_s", case.T / med[who], "tokens/s")
                )
        rows.append(
            Row(
                tag,
                "model_flops_per_s",
                case.T * case.flops_per_token() / med[SCI] / 1e9,
                "GFLOP/s",
            )
        )
        results.append((case, x_dense, x_hf, x_alt, auto, alt_path))
        alt_s = "-" if x_alt is None else f"{x_alt:.2f} vs {alt_path}"
        hf_s = "-" if x_hf is None else f"{x_hf:.2f}"
        table.append([case.label, auto, 1e3 * med[SCI], x_dense, hf_s, alt_s])
        print(
            f"[{i + 1}/{len(cases)} {time.perf_counter() - t_start:.0f} s] {case.label} ({auto}): "
            f"{1e3 * med[SCI]:.1f} ms/step, x dense {x_dense:.2f}"
            + ("" if x_hf is None else f", x transformers {x_hf:.2f}")
            + ("" if x_alt is None else f", x {alt_path} {x_alt:.2f}"),
            flush=True,
        )
    machine["cases_done"] = len(finished)
    machine["cases_not_run"] = [c.label for c in cases if c.label not in finished]
    print()
    print_table(
        ["case", "path", "sci ms/step", "x dense", "x transf.", "x other path"],
        table,
        title=f"forward+backward, median over {args.repeats} interleaved repeats",
    )
    rows += summary_rows(results)
    for r in rows:
        if r.case.startswith("summary"):
            print(f"{r.case}: {r.value:.3g}")
    load = other.report()
    machine["contention"] = load
    print(
        f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_s']} CPU s "
        f"({load['other_cpu_fraction']} of the cores)"
    )
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    if args.plot is not None:
        plot(results, args.plot, mode)
        print(f"wrote {args.plot}")
    return 0


def summary_rows(results) -> list[Row]:
    """The medians and extremes the targets are stated in."""
    out = []

    def add(name, sel, idx, stat):
        vals = [r[idx] for r in results if sel(r[0]) and r[idx] is not None]
        if vals:
            out.append(Row(f"summary {name}", stat.__name__, stat(vals), "x"))
            out.append(Row(f"summary {name}", "cases", float(len(vals)), "1"))

    f32, bf = (lambda c: c.dtype == "float32"), (lambda c: c.dtype == "bfloat16")
    add("x dense fp32 d>=128", lambda c: f32(c) and c.d >= 128, 1, statistics.median)
    add("x dense fp32 d=1024", lambda c: f32(c) and c.d == 1024, 1, statistics.median)
    add("x dense fp32 d=64", lambda c: f32(c) and c.d == 64, 1, statistics.median)
    add("x dense bf16 d=1024", lambda c: bf(c) and c.d == 1024, 1, statistics.median)
    add("x dense bf16 all", bf, 1, statistics.median)
    add("x dense fp32 all", f32, 1, min)
    add("x transformers all", lambda c: True, 2, min)
    add("x transformers all", lambda c: True, 2, statistics.median)
    add("x other path fp32", f32, 3, statistics.median)
    add("x other path fp32", f32, 3, min)
    add("x other path fp32 d<=128 E=8", lambda c: f32(c) and c.d <= 128 and c.E <= 8, 3, min)
    add("x other path bf16", bf, 3, statistics.median)
    add("x other path bf16", bf, 3, min)
    for name, sel in (("fp32", f32), ("bf16", bf)):
        add(f"x transformers {name}", sel, 2, min)
        add(f"x transformers {name}", sel, 2, statistics.median)
        # rows per expert (T k / E): where the experts' weights, not FLOPs, set the time
        for tag, lo, hi in (("<=32", 0, 32), ("33-256", 33, 256), (">256", 257, 10**9)):
            add(
                f"x dense {name} d>=128 rows/expert {tag}",
                lambda c, lo=lo, hi=hi, sel=sel: sel(c) and c.d >= 128 and lo <= c.rows() <= hi,
                1,
                statistics.median,
            )
    for name, sel in (("fp32", f32), ("bf16", bf)):
        faster = [r for r in results if sel(r[0]) and r[3] is not None and r[3] < 1]
        if name == "fp32" or faster:
            out.append(Row(f"summary other path faster {name}", "cases", float(len(faster)), "1"))
    for d in GRID_D:
        for name, sel in (("fp32", f32), ("bf16", bf)):
            for stat in (min, statistics.median, max):
                add(f"x dense {name} d={d}", lambda c, d=d, sel=sel: sel(c) and c.d == d, 1, stat)
    return out


def resummarize(path, plot_path=None, merge=()) -> None:
    """Recompute the summary rows of a written JSON from its per-case rows (in place).

    With ``plot_path`` the ratio-to-dense plot is redrawn from the same rows. ``merge``
    names JSONs of later runs (e.g. ``--case`` runs of cases the grid did not reach):
    their per-case rows replace or add to those of ``path``, ``machine.parts`` records
    each part's commit, contention and cases, and ``machine.cases_not_run`` drops the
    merged cases.
    """
    import json
    from dataclasses import asdict

    from _common import write_json_doc

    with open(path) as f:
        doc = json.load(f)
    keep = [r for r in doc["rows"] if not r["case"].startswith("summary")]
    for extra in merge:
        with open(extra) as f:
            part = json.load(f)
        new = [r for r in part["rows"] if not r["case"].startswith("summary")]
        labels = {r["case"].split(" ", 1)[0] for r in new}
        keep = [r for r in keep if r["case"].split(" ", 1)[0] not in labels] + new
        m = doc["machine"]
        if "parts" not in m:
            m["parts"] = [{"file": str(path), "git": m["git"], "contention": m["contention"]}]
        m["parts"].append(
            {
                "file": str(extra),
                "git": part["machine"]["git"],
                "contention": part["machine"]["contention"],
                "cases": sorted(labels),
            }
        )
        m["cases_not_run"] = [c for c in m.get("cases_not_run", []) if c not in labels]
        m["cases_done"] = len({r["case"].split(" ", 1)[0] for r in keep})
    per = {}
    for r in keep:
        if r["case"].endswith(f" {SCI}") and r["metric"] == "tokens_per_s" and r["vs"]:
            label = r["case"][: -len(SCI) - 1]
            kind = 1 if r["vs"].endswith(f" {DENSE}") else 2 if r["vs"].endswith(f" {HF}") else 3
            per.setdefault(label, [parse_label(label), None, None, None])[kind] = r["ratio"]
    doc["rows"] = keep + [asdict(r) for r in summary_rows(list(per.values()))]
    write_json_doc(path, doc)
    if plot_path is not None:
        plot(list(per.values()), plot_path, doc["machine"].get("mode", "grid"))


def plot(results, path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(11, 8.4), sharey=True)
    axes = grid[0]
    markers = {1: "o", 2: "s", 4: "^", 8: "D"}
    colors = {8: "tab:blue", 32: "tab:orange", 64: "tab:green"}
    d_colors = dict(zip(GRID_D, ("tab:grey", "tab:blue", "tab:orange", "tab:red"), strict=True))
    for ax, dt in zip(grid[1], DTYPES, strict=True):
        for case, x_dense, *_ in results:
            if case.dtype == dt:
                ax.scatter(case.rows(), x_dense, color=d_colors[case.d], s=22, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(0.8, color="red", lw=0.8, ls="--")
        ax.set_xlabel("mean rows per expert, T k / E")
        ax.set_title(f"{dt}: the same ratios against rows per expert")
    grid[1][0].set_ylabel("speed ratio to dense")
    grid[1][1].legend(
        handles=[
            plt.Line2D([], [], ls="", marker="o", color=c, label=f"d={d}")
            for d, c in d_colors.items()
        ],
        fontsize=8,
    )
    for ax, dt in zip(axes, DTYPES, strict=True):
        for case, x_dense, *_ in results:
            if case.dtype != dt:
                continue
            pos = GRID_D.index(case.d) + 0.18 * GRID_T.index(case.T) - 0.18
            ax.scatter(pos, x_dense, marker=markers[case.k], color=colors[case.E], s=28, alpha=0.8)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(0.8, color="red", lw=0.8, ls="--")
        ax.set_xticks(range(len(GRID_D)), [f"d={d}" for d in GRID_D])
        ax.set_title(f"{dt}: sci-moe / dense (equal active FLOPs)")
        ax.set_xlabel("d (offsets within a column: T = 256, 1024, 4096)")
    axes[0].set_ylabel("speed ratio to dense (fwd+bwd, > 1: sci-moe faster)")
    handles = [
        plt.Line2D([], [], ls="", marker=m, color="k", label=f"k={k}") for k, m in markers.items()
    ] + [plt.Line2D([], [], ls="", marker="o", color=c, label=f"E={e}") for e, c in colors.items()]
    axes[1].legend(handles=handles, fontsize=8, ncol=2)
    fig.suptitle(f"MoE layer, one CPU core, {mode} grid, {len(results)} cases (seed 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ----------------------------------------------------------------------- roofline

ROOFLINE_CASES = [
    Case(1024, 256, 32, 4, "float32"),
    Case(1024, 256, 64, 8, "float32"),
    Case(1024, 1024, 8, 2, "float32"),
    Case(256, 1024, 32, 1, "float32"),
    Case(256, 1024, 8, 1, "bfloat16"),
    Case(256, 256, 32, 4, "bfloat16"),
]


def roofline_main(args) -> int:
    """``--roofline``: is the layer bound by its weights' memory traffic? (see below)

    Per case: the measured step of sci-moe and of dense (interleaved, best of repeats),
    the dense matmul rate of the dtype (``T x d`` by ``d x 2 k ffn``, forward), and the
    floors of the expert weights' traffic: each step reads the weights twice (forward,
    input gradient) and writes the weight gradient once, ``3 W`` bytes at the copy
    bandwidth of a buffer of that size, plus the page faults of the fresh gradient
    tensor (``W`` at the ``fresh`` rate). ``excess`` is that floor for the MoE's
    ``E`` experts minus the dense layer's ``k``; if the claim "bound by weight traffic"
    holds, ``excess`` explains the measured gap ``t_sci - t_dense``.
    """
    import sci_moe

    machine = machine_info(
        seed=args.seed, sci_moe=sci_moe.__version__, mode="roofline", malloc=args.malloc
    )
    other = OtherLoad()
    reps = max(args.repeats, 5)
    rates = memory_rates(reps)
    rows = [Row("roofline memory", k, v, "GB/s") for k, v in rates.items()]
    print(", ".join(f"{k} {v:.1f} GB/s" for k, v in rates.items()), flush=True)
    table = []
    for case in ROOFLINE_CASES:
        dtype = DTYPES[case.dtype]
        xa = torch.randn(case.T, case.d, dtype=dtype)
        wa = torch.randn(2 * case.k * case.ffn, case.d, dtype=dtype)
        gemm_rate = 2 * xa.numel() * wa.shape[0] / _best_of(lambda xa=xa, wa=wa: xa @ wa.t(), reps)
        steps = build(case, args.seed)
        t = {SCI: [], DENSE: []}
        for r in range(reps):
            for who in (SCI, DENSE) if r % 2 == 0 else (DENSE, SCI):
                t[who].append(_timed(steps[who]))
        t_sci, t_dense = min(t[SCI]), min(t[DENSE])
        item = torch.finfo(dtype).bits // 8
        w_moe = 3 * case.E * case.d * case.ffn * item
        w_dense = 3 * case.k * case.d * case.ffn * item

        def floor(w):
            return 3 * w / (_copy_rate(rates, w) * 1e9) + w / (rates["fresh"] * 1e9)

        excess = floor(w_moe) - floor(w_dense)
        t_flop = case.T * case.flops_per_token() / gemm_rate
        gap = t_sci - t_dense
        vals = {
            "t_sci_ms": 1e3 * t_sci,
            "t_dense_ms": 1e3 * t_dense,
            "gap_ms": 1e3 * gap,
            "t_flop_ms": 1e3 * t_flop,
            "weight_floor_moe_ms": 1e3 * floor(w_moe),
            "weight_floor_dense_ms": 1e3 * floor(w_dense),
            "weight_excess_ms": 1e3 * excess,
            "excess_over_gap": excess / gap if gap > 0 else float("nan"),
            "expert_weights_mb": w_moe / 2**20,
            "gemm_gflops": gemm_rate / 1e9,
        }
        units = {"mb": "MiB", "ms": "ms", "gflops": "GFLOP/s", "gap": "1"}
        for k, v in vals.items():
            rows.append(Row(f"roofline {case.label}", k, v, units[k.rsplit("_", 1)[-1]]))
        table.append([case.label, *vals.values()])
        print(f"{case.label}: " + ", ".join(f"{k} {v:.3g}" for k, v in vals.items()), flush=True)
    print_table(["case", *vals], table, title=f"weight-traffic floors, best of {reps}")
    machine["contention"] = other.report()
    if args.json is not None:
        write_json(args.json, BENCHMARK + "_roofline", machine, rows)
        print(f"wrote {args.json}")
    return 0


# ------------------------------------------------------------------------ profile

_BUCKETS = {
    "gemm": ("aten::mm", "aten::bmm", "aten::addmm", "aten::_grouped_mm", "aten::linear"),
    "gather/scatter": (
        "aten::index",
        "aten::index_select",
        "aten::index_add_",
        "aten::scatter_add_",
        "aten::scatter_add",
        "aten::gather",
        "aten::index_put_",
        "aten::_index_put_impl_",
        "aten::cat",
        "aten::repeat_interleave",
    ),
    "routing/plan": (
        "aten::topk",
        "aten::sort",
        "aten::bincount",
        "aten::cumsum",
        "aten::_softmax",
        "aten::softmax",
        "aten::argsort",
        "aten::isfinite",
        "aten::all",
        "aten::item",
        "aten::_local_scalar_dense",
    ),
    "elementwise": (
        "aten::mul",
        "aten::mul_",
        "aten::silu",
        "aten::silu_backward",
        "aten::add",
        "aten::add_",
        "aten::sum",
        "aten::div",
        "aten::linalg_vecdot",
        "aten::copy_",
        "aten::fill_",
        "aten::zero_",
        "aten::_softmax_backward_data",
    ),
}


def _bucket(name: str) -> str:
    for b, names in _BUCKETS.items():
        if name in names:
            return b
    return "other"


def _profile_once(fn) -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    out = dict.fromkeys([*_BUCKETS, "other"], 0.0)
    for ev in p.key_averages():
        out[_bucket(ev.key)] += ev.self_cpu_time_total / 1e3  # ms
    return out


def profile_main(args) -> int:
    """``--profile``: where the time of the small shape goes (forward and backward)."""
    import sci_moe

    machine = machine_info(seed=args.seed, sci_moe=sci_moe.__version__, mode="profile")
    other = OtherLoad()
    rows, table = [], []
    for E, k, dt in itertools.product((32, 64), (4, 8), DTYPES):
        if (E, k) not in ((32, 4), (64, 8)):
            continue
        case = Case(1024, 256, E, k, dt)
        step = build(case, args.seed)[SCI]
        step()  # warm-up
        acc = {"forward": None, "backward": None}
        for _ in range(args.repeats):
            step.module.zero_grad(set_to_none=True)
            step.x.grad = None
            box = {}
            fwd = _profile_once(lambda box=box, step=step: box.setdefault("y", step.call(step.x)))
            bwd = _profile_once(lambda box=box, step=step: (box["y"] * step.g).sum().backward())
            for name, got in (("forward", fwd), ("backward", bwd)):
                if acc[name] is None:
                    acc[name] = {b: [] for b in got}
                for b, v in got.items():
                    acc[name][b].append(v)
        for phase, buckets in acc.items():
            med = {b: statistics.median(v) for b, v in buckets.items()}
            total = sum(med.values())
            tag = f"profile {case.label} {phase}"
            rows.append(Row(tag, "total_ms", total, "ms"))
            for b, v in med.items():
                rows.append(Row(tag, f"share_{b}", v / total, "1"))
            table.append([case.label, phase, total] + [100 * med[b] / total for b in med])
    print_table(
        ["case", "phase", "ms", *(f"% {b}" for b in [*_BUCKETS, "other"])],
        table,
        title=f"self CPU time by kind of op, median of {args.repeats} profiled steps",
    )
    load = other.report()
    machine["contention"] = load
    if args.json is not None:
        write_json(args.json, BENCHMARK + "_profile", machine, rows)
        print(f"wrote {args.json}")
    return 0


def verdict_rule(doc: dict) -> list[dict]:
    """``--verdicts-only``: the rule of the stored run's mode (``--grid-peers``, ``--hf-peers``)."""
    if doc.get("benchmark") == GRID_PEERS:
        return grid_peers_verdicts(doc)
    return hf_peers_verdicts(doc)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdict_rule)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--grid", action="store_true", help="the (sampled) full grid")
    parser.add_argument("--profile", action="store_true", help="profile the small shape")
    parser.add_argument("--sample", type=int, default=48, help="--grid: sampled cases")
    parser.add_argument("--full", action="store_true", help="all 288 cases, cheapest first")
    parser.add_argument("--checkpoint", default=None, help="resume file: finished cases")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="start no case after this many seconds"
    )
    parser.add_argument("--roofline", action="store_true", help="bandwidth/FLOP-rate floors")
    parser.add_argument("--stop-after", type=int, default=None, help="measure at most N cases")
    parser.add_argument("--max-gflop", type=float, default=12.0, help="--grid float32 cap")
    parser.add_argument("--max-gflop-bf16", type=float, default=2.5, help="--grid bf16 cap")
    parser.add_argument("--plot", default=None, help="write the ratio-to-dense plot (PNG)")
    parser.add_argument("--gpu", action="store_true", help="the GPU section (needs CUDA)")
    parser.add_argument("--resummarize", default=None, help="recompute a JSON's summary rows")
    parser.add_argument(
        "--merge", action="append", default=None, help="--resummarize: add this run's cases"
    )
    parser.add_argument(
        "--no-transformers", action="store_true", help="leave out transformers' block"
    )
    parser.add_argument(
        "--case", action="append", default=None, help="run this case (T=..,d=..,E=..,k=..,dtype)"
    )
    parser.add_argument("--hf-peers", action="store_true", help="transformers' experts impls")
    parser.add_argument("--no-large", action="store_true", help="--hf-peers: T = 256 only")
    parser.add_argument(
        "--grid-peers", action="store_true", help="all 288 cases against grouped_mm and eager"
    )
    piece_arguments(parser, unit="case (--grid-peers)")
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:  # an --hf-peers JSON
        return done
    if args.resummarize:
        resummarize(args.resummarize, args.plot, args.merge or ())
        return 0
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    if args.gpu:
        from _moe_layer_gpu import gpu_main

        return gpu_main(args)
    setup(args)
    if args.hf_peers:
        return hf_peers_main(args)
    if args.grid_peers:
        cases = [parse_label(c) for c in args.case] if args.case else full_grid_by_cost()
        return grid_peers_main(args, cases)
    return cpu_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
