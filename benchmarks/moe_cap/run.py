"""MoE-CAP measured: S-MBU / S-MFU against dense MBU / MFU on real MoE decoding (issue 47).

Jiang, Fu, Huang et al., "MoE-CAP: Benchmarking Cost, Accuracy and Performance of Sparse
Mixture-of-Experts Systems", NeurIPS 2025 Datasets & Benchmarks (arXiv 2412.07067).
The formulas are :mod:`sci_moe.moe.cap` (paper Eqs. 4-5); this script measures them.

**Models** (random weights, built from a config; nothing is downloaded):

* ``Mixtral``: transformers' ``MixtralForCausalLM`` shaped like Mixtral-8x7B with every
  width divided by 8 (hidden 512, expert FFN 1792, 8 heads / 2 KV heads, 8 experts,
  top-2), 4 layers, vocabulary 1024;
* ``Qwen1.5-MoE``: transformers' ``Qwen2MoeForCausalLM`` shaped like Qwen1.5-MoE-A2.7B
  with widths divided by 4 (hidden 512, 60 experts of FFN 352, top-4, one shared expert
  of FFN 1408, 8 heads, MHA), 4 layers, vocabulary 1024;
* ``sci-moe``: four of the package's own :class:`sci_moe.moe.MoE` layers (d_model 512,
  16 SwiGLU experts of 896, top-2) with RMSNorm and residuals; no attention, so no KV
  cache and one context length (0). Recorded with :class:`~sci_moe.moe.cap.CapRecorder`.

``--device cuda`` uses a larger setting (widths of the real models, 8 layers; see
:data:`SETTINGS`).

**Workload**: one decode step per sequence for batch ``B`` and context ``L``: the KV cache
(transformers ``StaticCache``, ``max_cache_len = L``) is filled with random keys and
values, and each step decodes the token at position ``L - 1`` (so every step reads ``L``
cached positions), greedy (argmax) tokens fed back. The LM head is part of the step and
counted (``lm_head=True``). ``warmup`` untimed steps, then ``steps`` timed ones, each
timed alone (device synchronised). The experts every step activates are recorded from the
routers (forward hooks on the transformers' ``gate`` modules; ``CapRecorder`` for sci-moe).

**Metrics** of each step (its own latency and activated experts), against the peaks
measured in the same run:

* ``s_mbu``, ``s_mfu``: the paper's Eqs. 4-5 (:func:`~sci_moe.moe.cap.cap_metrics`);
* ``dense_mbu``: Eq. 4 with every expert counted as read (``activated="all"``), the MBU
  of a dense model of the same size;
* ``dense_mfu``: Eq. 5 with every expert counted as computed for every token (FLOPs
  ``S-F_token + 2 sum_l (E_l - k_l) S_expert``), the MFU of a dense model;
* ``topk_mbu``: Eq. 4 with only the ``k`` experts of one token counted (the "active
  parameters" of a model card).

Each workload stores the median over its steps (``tpot_ms``, ``s_mbu``, ...) and the maximum
(``*_max``): a utilisation above 100 % of a measured peak in any single step is physically
impossible, so the bounds are checked on the maxima.

**Peaks**, measured in this run with the same thread count (:func:`measure_peaks`), in
rounds before, between and after the model blocks (each round's rows and the CPU other
processes used since the previous round are stored): bandwidth = the best of a STREAM-like
triad ``a = b + s c`` (3 arrays, bytes counted as STREAM does: 2 reads + 1 write), a copy,
a read-only sum and a matrix-vector product, fp32 arrays far larger than the last-level
cache; FLOPs per dtype = the best of NT GEMMs ``a @ b.T`` (the layout of ``nn.Linear``):
large squares and a batch of 256 tokens through a wide expert-like matrix. The peak used is
the best over all rounds.

**Seeds**: the whole grid runs with ``--seed``; the cells the verdicts read (batch 1, 8 and
256 at the shortest context, both dtypes) run again with ``--seeds`` seeds (new weights,
routing and inputs) for paired tests.

**Verdicts** (:func:`verdicts`, re-derivable with ``--verdicts-only JSON``): one per claim
of the abstract / the paper's metric section, each by a fixed rule on the stored rows.

Run: ``python benchmarks/moe_cap/run.py [--quick] [--json PATH] [--plots DIR] [--threads N]
[--device cuda] [--seeds 5]``. Quick (about a minute): 2 layers, batches 1, 8, 64, contexts
32 and 128, 2 seeds. Full CPU run: batches 1, 8, 32, 128, 256, contexts 64, 256, 1024,
5 seeds (about ten minutes on one thread; 581 s beside other jobs using two thirds of a
2-core machine). ``--plots DIR`` writes ``<stem>_utilisation.png`` and ``<stem>_radar.png``,
``<stem>`` the ``--json`` file's name (:func:`plot_stem`), so runs on other machines keep
their own plots.

This script holds the command line and the run; its parts are helper modules beside it:
``_cap_models.py`` (settings, models, decoding), ``_cap_peaks.py`` (peak probes),
``_cap_metrics.py`` (utilisation metrics, rows), ``_cap_verdicts.py`` (verdict rules) and
``_cap_plots.py`` (plots).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _cap_metrics import cell_case, cell_rows, kv_gb, summarise, weights_gb
from _cap_metrics import dense_flops_per_token as dense_flops_per_token
from _cap_metrics import utilisation as utilisation
from _cap_models import DTYPES, MODELS, SETTINGS, build_model, decode_hf, decode_scimoe, fidelity
from _cap_peaks import bf16_native, hardware_from_rounds, measure_peaks
from _cap_plots import plot_radar, plot_utilisation
from _cap_verdicts import verdicts
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    setup,
    verdicts_only,
    write_json,
)

from sci_moe.moe.cap import ModelSpec


def plot_stem(json_path: Path | None, quick: bool) -> str:
    """The plots' name stem: the JSON's (``moe_cap_xeon.json`` -> ``moe_cap_xeon_radar.png``),
    or ``moe_cap`` / ``moe_cap_quick`` without ``--json``."""
    if json_path is not None:
        return Path(json_path).stem
    return "moe_cap_quick" if quick else "moe_cap"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds of the verdict cells (default 5; quick 2)"
    )
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    key = "cuda" if device.type == "cuda" else ("quick" if args.quick else "cpu")
    setting = dict(SETTINGS[key])
    if device.type == "cuda" and args.quick:
        setting.update(batches=(1, 8, 64), contexts=(256, 1024), seed_batches=(1, 8, 64), steps=3)
    n_seeds = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    seeds = [args.seed + i for i in range(n_seeds)]
    ctx0 = setting["contexts"][0]
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        setting=key,
        seeds=seeds,
        layers=setting["layers"],
        batches=list(setting["batches"]),
        contexts=list(setting["contexts"]),
        seed_batches=list(setting["seed_batches"]),
        steps=setting["steps"],
        steps_small_batches=setting["steps_small"],
        bf16_native=bf16_native(device),
        warmup=setting["warmup"],
        max_kv_gb=setting["max_kv_gb"],
        probes={"triad_n": setting["triad_n"], "gemm": setting["gemm_n"], "reps": setting["reps"]},
        models={
            "Mixtral": setting["mixtral"] | {"experts": 8, "top_k": 2},
            "Qwen1.5-MoE": setting["qwen"] | {"experts": 60, "top_k": 4, "shared": 1},
            "sci-moe": setting["scimoe"],
        },
        vocab=setting["vocab"],
    )
    print(
        f"moe_cap: torch {machine['torch']}, {machine['cpu']}, device {device}, "
        f"{torch.get_num_threads()} threads, seeds {seeds}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []
    rounds: list[dict] = []
    hw_name = machine["device_name"] or "this CPU"

    since = [OtherLoad()]  # the load since the previous probe round

    def peaks_round() -> None:
        probe = OtherLoad()
        r = measure_peaks(device, setting["triad_n"], setting["gemm_n"], setting["reps"])
        rounds.append(r)
        i = len(rounds) - 1
        for k, v in r.items():
            unit = "GFLOP/s" if k.startswith("flops") else "GB/s"
            rows.append(Row(f"peak round {i}", k, v * 1e-9, unit))
        for name, load in (("other_cpu_fraction", probe), ("other_cpu_fraction_since", since[0])):
            rows.append(
                Row(f"peak round {i}", name, load.report()["other_cpu_fraction"] or 0.0, "fraction")
            )
        since[0] = OtherLoad()
        print(
            f"peaks round {i}: triad {r['triad'] / 1e9:.1f} GB/s, best bandwidth "
            f"{r['bandwidth'] / 1e9:.1f} GB/s, "
            + ", ".join(
                f"{k[6:]} {v / 1e9:.1f} GFLOP/s" for k, v in r.items() if k.startswith("flops")
            )
        )

    peaks_round()
    results: dict[tuple, dict] = {}  # (model, dtype, batch, ctx, seed) -> run
    specs: dict[str, ModelSpec] = {}
    fid: dict[str, dict] = {}

    def block(kind: str, seed: int, cells: Callable[[str], list[tuple[int, int]]]) -> None:
        model, spec = build_model(kind, setting, seed, device)
        specs[kind] = spec
        for dtype in DTYPES:
            if dtype == "bfloat16":
                model, f = fidelity(model, kind, ctx0, seed)
                if seed == args.seed:
                    fid[kind] = f
            for batch, ctx in cells(kind):
                if kv_gb(spec, batch, ctx, dtype) > setting["max_kv_gb"]:
                    continue
                steps = setting["steps_small" if batch <= 8 else "steps"]
                if kind == "sci-moe":
                    run = decode_scimoe(model, batch, steps, setting["warmup"], seed)
                else:
                    run = decode_hf(model, batch, ctx, steps, setting["warmup"], seed)
                results[(kind, dtype, batch, ctx, seed)] = run
                print(
                    f"  {kind:12s} {dtype:9s} seed {seed} B={batch:<4d} L={ctx:<5d} "
                    f"tpot {1e3 * np.median(run['latency']):8.2f} ms  activated "
                    f"{run['activated'].mean():.1f}"
                )
        del model

    def grid(kind):
        ctxs = (0,) if kind == "sci-moe" else setting["contexts"]
        return [(b, c) for c in ctxs for b in setting["batches"]]

    def seed_cells(kind):
        c = 0 if kind == "sci-moe" else ctx0
        return [(b, c) for b in setting["seed_batches"]]

    for kind in MODELS:
        block(kind, args.seed, grid)
        peaks_round()
    for seed in seeds:
        if seed == args.seed:
            continue
        for kind in MODELS:
            block(kind, seed, seed_cells)
        peaks_round()

    hw = hardware_from_rounds(rounds, hw_name)
    rows.append(Row("peak", "bandwidth", hw.peak_bandwidth * 1e-9, "GB/s"))
    for dtype, v in hw.peak_flops.items():
        rows.append(Row("peak", f"flops_{dtype}", v * 1e-9, "GFLOP/s"))
    for k in ("triad", "bandwidth", *(f"flops_{d}" for d in hw.peak_flops)):
        vals = [r[k] for r in rounds]
        rows.append(Row("peak", f"{k}_spread", (max(vals) - min(vals)) / max(vals), "fraction"))
    machine["hardware"] = hw.to_dict()

    summaries: dict[tuple, dict] = {}
    for (kind, dtype, batch, ctx, seed), run in results.items():
        lm_head = kind != "sci-moe"
        s = summarise(specs[kind], hw, run, batch=batch, ctx=ctx, dtype=dtype, lm_head=lm_head)
        summaries[(kind, dtype, batch, ctx, seed)] = s
        if seed == args.seed:
            rows += cell_rows(cell_case(kind, dtype, batch, ctx), s)
        c0 = 0 if kind == "sci-moe" else ctx0
        if ctx == c0 and batch in setting["seed_batches"]:
            rows += cell_rows(cell_case(kind, dtype, batch, ctx, seed), s)
    for kind, spec in specs.items():
        rows.append(Row(kind, "total_params", float(spec.total_params), "parameters"))
        rows.append(Row(kind, "active_params", float(spec.active_params), "parameters"))
        for dtype in DTYPES:
            rows.append(Row(f"{kind} {dtype}", "weights_gb", weights_gb(spec, dtype), "GB"))
        for k, v in fid[kind].items():
            rows.append(Row(f"{kind} bfloat16", k, v, "fraction"))

    report(summaries, setting, args.seed, ctx0)
    doc = {"machine": machine, "rows": [r.__dict__ for r in rows]}
    verdict_list = verdicts(doc)
    for v in verdict_list:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  {v['claim']}")
    if args.plots is not None:
        stem = plot_stem(args.json, args.quick)
        plot_utilisation(doc, args.plots / f"{stem}_utilisation.png")
        plot_radar(doc, args.plots / f"{stem}_radar.png")
        print(f"plots in {args.plots}")
    machine["contention"] = other.report()
    print(
        f"total {machine['contention']['wall_s']:.0f} s; other processes used "
        f"{machine['contention']['other_cpu_s']} CPU s"
    )
    if args.json is not None:
        write_json(args.json, "moe_cap", machine, rows, verdicts=verdict_list)
        print(f"wrote {args.json}")
    return 0


def report(summaries: dict, setting: dict, seed: int, ctx0: int) -> None:
    """Print the grid of the main seed."""
    table = []
    for (kind, dtype, batch, ctx, s), v in sorted(summaries.items(), key=lambda kv: str(kv[0])):
        if s != seed:
            continue
        table.append(
            [
                f"{kind} {dtype} B={batch} L={ctx}",
                v["tpot_ms"],
                100 * v["activated_fraction"],
                100 * v["s_mbu"],
                100 * v["dense_mbu"],
                100 * v["topk_mbu"],
                100 * v["s_mfu"],
                100 * v["dense_mfu"],
            ]
        )
    print_table(
        ["workload", "TPOT ms", "act %", "S-MBU %", "MBU %", "top-k MBU %", "S-MFU %", "MFU %"],
        table,
        title="\nmedian over the timed steps, against the peaks measured in this run",
    )


if __name__ == "__main__":
    raise SystemExit(main())
