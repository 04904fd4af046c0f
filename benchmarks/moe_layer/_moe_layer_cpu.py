"""The CPU section of ``run.py`` (``--quick``, ``--grid``, ``--full``, ``--case``): timings, rows.

:func:`cpu_main` times every case's steps (``_moe_layer.measure``), resumable through a
``--checkpoint`` file (:func:`load_checkpoint`, :func:`save_checkpoint`); the cases are
:func:`quick_cases` or the deterministic sub-grid :func:`grid_cases`. A helper module:
``run.py`` imports it.
"""

from __future__ import annotations

import random
import statistics
import time

import torch
from _common import (
    OtherLoad,
    Row,
    machine_info,
    print_table,
    warn_if_busy,
    write_json,
)
from _moe_layer import (
    ALT,
    BENCHMARK,
    DENSE,
    HF,
    SCI,
    TARGETS,
    Case,
    full_grid,
    full_grid_by_cost,
    measure,
    parse_label,
)
from _moe_layer_profile import profile_main
from _moe_layer_roofline import roofline_main
from _moe_layer_summary import plot, summary_rows

__all__ = [
    "cpu_main",
    "grid_cases",
    "load_checkpoint",
    "quick_cases",
    "save_checkpoint",
]


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
