"""Routing science on a small byte-level MoE language model (real text, 2-core CPU scale).

Three experiments with :mod:`sci_moe.language` (decoder-only transformer, SwiGLU experts,
first FFN dense, trained on gensim's Wikipedia excerpt + Lee news articles, fixed
90/10 split of each stream):

``(a) default``
    Top-K vs Default MoE (Panda et al. 2025) at equal steps and tokens, for 8 and 32
    experts and k in {1, 2}; beta 0.9 (8 experts), 0.65 (32 experts, k=1), 0.95 (32,
    k=2), as in the paper. Both use the Switch loss (coef 0.01). Reported: final
    validation perplexity (mean over seeds), tokens to reach the target perplexity
    (= the Top-K runs' final mean perplexity, read off the seed-mean curves with
    log-linear interpolation between evaluations) and median training-step time.
``(b) finetune``
    The 8-expert k=2 Top-K models of (a) fine-tuned on the news stream only (a
    "downstream" domain, validated on the news validation part), without and with the
    orthogonality + variance losses (Guo et al. 2025): validation loss, expert-output
    overlap, routing-score variance, MaxVio.
``(c) balance``
    Switch load-balancing loss (the Top-K runs of (a)) vs auxiliary-loss-free bias
    balancing (DeepSeek-V3 rule, rate 1e-3, no balancing loss) vs no balancing, k=2:
    MaxVio (global, over the validation windows) and perplexity.

The fine-tuning coefficients (``FT_COEFS``: orthogonality 1e-3, variance 1.0, both
per-token means) were picked from a one-seed probe of a few values (the paper's values
are not in our notes); the Switch coefficient and bias rate are the papers' defaults.

Rows follow ``benchmarks/_common.py``: ``ratio > 1`` means the paper's method is better
(e.g. ``top-k ppl / default ppl``). Run:
``python benchmarks/routing_science/run.py [--quick] [--json PATH] [--seed 0] [--threads 1]
[--plots DIR]`` (default one torch thread: with two threads on a busy 2-core machine the
steps ran 7x slower). The full run took 10.4 minutes, ``--quick`` 24 s. Per-seed rows
(metric ``<metric> seed <s>``) back the verdicts of :func:`verdicts`;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its rows (no training).
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common.py

from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    rederive_verdicts,
    row_value,
    seed_verdict,
    setup,
    verdict_entry,
    warn_if_busy,
)
from _common import write_json as _write_json

from sci_moe.language import MoELMConfig, TextCorpus, TrainConfig, finetune, load_corpus, train

BENCHMARK = "routing_science"
BETA = {(8, 1): 0.9, (8, 2): 0.9, (32, 1): 0.65, (32, 2): 0.95}
MODEL = dict(d_model=64, n_layers=3, n_heads=4, seq_len=64, d_hidden=64, dense_first_layer=True)
SWITCH_COEF = 0.01
BIAS_RATE = 1e-3
FT_COEFS = {"orthogonality_coef": 0.001, "variance_coef": 1.0}


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            seeds=1,
            steps=100,
            eval_interval=25,
            eval_batches=4,
            ft_steps=40,
            experts=(8,),
            ks=(1, 2),
            balance_experts=(8,),
        )
    return dict(
        seeds=3,
        steps=500,
        eval_interval=25,
        eval_batches=8,
        ft_steps=150,
        experts=(8, 32),
        ks=(1, 2),
        balance_experts=(8, 32),
    )


def tcfg(p: dict, seed: int, warmup_steps: int = 30, **kw) -> TrainConfig:
    base = dict(
        steps=p["steps"],
        batch_size=16,
        lr=3e-3,
        weight_decay=0.1,
        eval_every=p["eval_interval"],
        eval_batches=p["eval_batches"],
        seed=seed,
        progress=False,
    )
    base.update(kw)
    base["warmup"] = warmup_steps / base["steps"]  # the engine's warm-up is a fraction
    return TrainConfig(**base)


def mcfg(E: int, k: int, **moe) -> MoELMConfig:
    return MoELMConfig(**MODEL, num_experts=E, top_k=k, moe=moe)


def tokens_to(steps_tokens: list[int], ppl: list[float], target: float) -> float | None:
    """First token count where the curve reaches ``target`` (log-linear interpolation)."""
    for i, v in enumerate(ppl):
        if v <= target:
            if i == 0:
                return float(steps_tokens[0])
            a, b = math.log(ppl[i - 1]), math.log(v)
            f = (a - math.log(target)) / (a - b) if a != b else 1.0
            return steps_tokens[i - 1] + f * (steps_tokens[i] - steps_tokens[i - 1])
    return None


def mean_curve(hists: list[dict], key: str = "val_ppl") -> list[float]:
    return [statistics.fmean(v) for v in zip(*(h[key] for h in hists), strict=True)]


def last_layer(h: dict, key: str, idx: int = -1) -> float:
    """Mean over MoE layers of a diagnostic at evaluation ``idx``."""
    return statistics.fmean(layer[key] for layer in h["diagnostics"][idx])


def sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------- experiments


def exp_default(p: dict, seed0: int, ckpt_dir: Path, rows: list, table: list, runs: dict) -> None:
    for E in p["experts"]:
        for k in p["ks"]:
            hs = {"top-k": [], "default": []}
            for s in range(p["seeds"]):
                seed = seed0 + s
                for method in ("top-k", "default"):
                    moe = {"load_balance_coef": SWITCH_COEF}
                    if method == "default":
                        moe.update(default_moe=True, default_beta=BETA[(E, k)])
                    out = (
                        ckpt_dir / f"{E}c{k}-s{seed}" if (E, k, method) == (8, 2, "top-k") else None
                    )
                    t0 = time.perf_counter()
                    h = train(mcfg(E, k, **moe), tcfg(p, seed), out_dir=out)
                    log(
                        f"(a) {E}c{k} {method:7s} seed {seed}: ppl {h['val_ppl'][-1]:.3f} "
                        f"({time.perf_counter() - t0:.0f} s)"
                    )
                    hs[method].append(h)
            runs[(E, k)] = hs
            case = f"{E}c{k}"
            tok = hs["top-k"][0]["tokens"]
            final = {m: [h["val_ppl"][-1] for h in v] for m, v in hs.items()}
            target = statistics.fmean(final["top-k"])
            ttt = {m: tokens_to(tok, mean_curve(v), target) for m, v in hs.items()}
            ms = {
                m: statistics.fmean(statistics.median(h["step_time"]) * 1e3 for h in v)
                for m, v in hs.items()
            }
            mp = {m: statistics.fmean(x) for m, x in final.items()}
            rows += [
                Row(f"{case}/top-k", "val_ppl", mp["top-k"], "ppl"),
                Row(f"{case}/top-k", "val_ppl_sd", sd(final["top-k"]), "ppl"),
                Row(
                    f"{case}/default",
                    "val_ppl",
                    mp["default"],
                    "ppl",
                    f"{case}/top-k",
                    mp["top-k"] / mp["default"],
                ),
                Row(f"{case}/default", "val_ppl_sd", sd(final["default"]), "ppl"),
                Row(f"{case}/top-k", "tokens_to_target", ttt["top-k"], "tokens"),
                Row(
                    f"{case}/default",
                    "tokens_to_target",
                    ttt["default"],
                    "tokens",
                    f"{case}/top-k",
                    ttt["top-k"] / ttt["default"] if ttt["default"] else None,
                ),
                Row(f"{case}", "target_ppl", target, "ppl"),
                Row(f"{case}/top-k", "step_time", ms["top-k"], "ms"),
                Row(
                    f"{case}/default",
                    "step_time",
                    ms["default"],
                    "ms",
                    f"{case}/top-k",
                    ms["top-k"] / ms["default"],
                ),
            ]
            rows += [
                Row(f"{case}/{m}", f"val_ppl seed {seed0 + i}", v, "ppl")
                for m in ("top-k", "default")
                for i, v in enumerate(final[m])
            ]
            wins = sum(d < t for d, t in zip(final["default"], final["top-k"], strict=True))
            table.append(
                [
                    case,
                    BETA[(E, k)],
                    mp["top-k"],
                    sd(final["top-k"]),
                    mp["default"],
                    sd(final["default"]),
                    f"{wins}/{len(final['top-k'])}",
                    ttt["top-k"],
                    ttt["default"],
                    ms["default"] / ms["top-k"] - 1,
                ]
            )


def exp_finetune(
    p: dict, seed0: int, ckpt_dir: Path, corpus: TextCorpus, rows: list, table: list, runs: dict
) -> None:
    wiki_tr, wiki_va = corpus.sources["wikipedia"]
    news = TextCorpus(corpus.train[wiki_tr:], corpus.val[wiki_va:], {})
    res: dict[str, list[dict]] = {"baseline": [], "L_o+L_v": []}
    for s in range(p["seeds"]):
        seed = seed0 + s
        ckpt = ckpt_dir / f"8c2-s{seed}" / "checkpoint.pt"
        for name, over in (("baseline", {}), ("L_o+L_v", FT_COEFS)):
            t = tcfg(p, seed, steps=p["ft_steps"], lr=1e-3, warmup_steps=10)
            h = finetune(ckpt, t, over, corpus=news)
            log(f"(b) finetune {name:8s} seed {seed}: val loss {h['val_loss'][-1]:.4f}")
            res[name].append(h)
    runs["finetune"] = res
    metrics = [
        ("val_loss", "nats", lambda h: h["val_loss"][-1], "lower"),
        ("overlap", "cos", lambda h: last_layer(h, "overlap"), "lower"),
        ("score_variance", "score^2", lambda h: last_layer(h, "score_variance"), "higher"),
        ("max_violation", "MaxVio", lambda h: last_layer(h, "max_violation"), "lower"),
    ]
    pre = res["baseline"]
    for metric, unit, get, better in metrics:
        before = statistics.fmean(
            h["val_loss"][0] if metric == "val_loss" else last_layer(h, metric, 0) for h in pre
        )
        base = statistics.fmean(get(h) for h in res["baseline"])
        meth = statistics.fmean(get(h) for h in res["L_o+L_v"])
        ratio = base / meth if better == "lower" else meth / base
        rows += [
            Row("finetune/pretrained", metric, before, unit),
            Row("finetune/baseline", metric, base, unit),
            Row("finetune/L_o+L_v", metric, meth, unit, "finetune/baseline", ratio),
        ]
        rows += [
            Row(f"finetune/{name}", f"{metric} seed {seed0 + i}", get(h), unit)
            for name in ("baseline", "L_o+L_v")
            for i, h in enumerate(res[name])
        ]
        table.append([metric, f"{better} better", before, base, meth, ratio])


def exp_balance(p: dict, seed0: int, rows: list, table: list, runs: dict) -> None:
    k = 2
    for E in p["balance_experts"]:
        hs = {"switch": runs[(E, k)]["top-k"], "bias": [], "none": []}
        for s in range(p["seeds"]):
            seed = seed0 + s
            for name in ("bias", "none"):
                if name == "none" and E != 8:
                    continue
                moe = {"load_balance_coef": 0.0}
                extra = {}
                if name == "bias":
                    moe["selection_bias"] = True
                    extra["bias_balancing"] = BIAS_RATE
                h = train(mcfg(E, k, **moe), tcfg(p, seed, **extra))
                log(f"(c) {E}c{k} {name:6s} seed {seed}: ppl {h['val_ppl'][-1]:.3f}")
                hs[name].append(h)
        runs[("balance", E)] = hs
        case = f"{E}c{k}"
        stats = {}
        for name, v in hs.items():
            if not v:
                continue
            stats[name] = (
                statistics.fmean(h["val_ppl"][-1] for h in v),
                statistics.fmean(last_layer(h, "max_violation") for h in v),
                statistics.fmean(last_layer(h, "max_violation_batch") for h in v),
            )
        sw = stats["switch"]
        for name, (ppl, mv, mvb) in stats.items():
            vs = None if name == "switch" else f"{case}/switch"
            rows += [
                Row(f"{case}/{name}", "val_ppl", ppl, "ppl", vs, sw[0] / ppl if vs else None),
                Row(
                    f"{case}/{name}", "max_violation", mv, "MaxVio", vs, sw[1] / mv if vs else None
                ),
                Row(
                    f"{case}/{name}",
                    "max_violation_batch",
                    mvb,
                    "MaxVio",
                    vs,
                    sw[2] / mvb if vs else None,
                ),
            ]
            table.append([f"{case}/{name}", ppl, mv, mvb])
            rows += [
                Row(f"{case}/{name}", f"{metric} seed {seed0 + i}", get(h), unit)
                for metric, unit, get in (
                    ("val_ppl", "ppl", lambda h: h["val_ppl"][-1]),
                    ("max_violation", "MaxVio", lambda h: last_layer(h, "max_violation")),
                )
                for i, h in enumerate(hs[name])
            ]


# --------------------------------------------------------------------------- plots


def save_plots(runs: dict, p: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    cases = [(E, k) for E in p["experts"] for k in p["ks"]]
    fig, axes = plt.subplots(1, len(cases), figsize=(3.6 * len(cases), 3.2), squeeze=False)
    for ax, (E, k) in zip(axes[0], cases, strict=True):
        for method, color in (("top-k", "tab:blue"), ("default", "tab:red")):
            hs = runs[(E, k)][method]
            tok = np.array(hs[0]["tokens"][1:]) / 1e3
            ppl = np.array([h["val_ppl"][1:] for h in hs])
            m = ppl.mean(0)
            ax.plot(tok, m, color=color, label=method)
            if len(hs) > 1:
                ax.fill_between(tok, ppl.min(0), ppl.max(0), color=color, alpha=0.2)
        ax.set_yscale("log")
        ax.set_title(f"{E} experts, k={k}")
        ax.set_xlabel("training tokens (thousands)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("validation perplexity (bytes)")
    axes[0][0].legend()
    fig.tight_layout()
    path = out / "routing_science_curves.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    saved.append(path)

    for E in p["balance_experts"]:
        hs = runs[("balance", E)]
        names = [n for n in ("switch", "bias", "none") if hs[n]]
        fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            h = hs[name][0]
            # load of the last MoE layer at every evaluation, as a multiple of uniform
            load = np.array([d[-1]["load"] for d in h["diagnostics"]]) * E
            im = ax.imshow(
                load.T,
                aspect="auto",
                cmap="viridis",
                vmin=0,
                vmax=3,
                extent=(0, h["tokens"][-1] / 1e3, E - 0.5, -0.5),
            )
            ax.set_title(f"{name} (seed {p['seed0']})")
            ax.set_xlabel("training tokens (thousands)")
        axes[0][0].set_ylabel("expert (last MoE layer)")
        fig.colorbar(im, ax=axes[0].tolist(), label="load / uniform load")
        path = out / f"routing_science_load_{E}e.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        saved.append(path)

    ft = runs["finetune"]
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for name, color in (("baseline", "tab:blue"), ("L_o+L_v", "tab:green")):
        for i, h in enumerate(ft[name]):
            ax.plot(
                h["step"], h["val_loss"], color=color, alpha=0.8, label=name if i == 0 else None
            )
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("news validation loss (nats/byte)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "routing_science_finetune.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    saved.append(path)
    return saved


# ---------------------------------------------------------------------------- main


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim, by rules applied to the run's rows (issue 41).

    Comparisons of two methods use :func:`_common.seed_verdict`: a paired t-test over the
    per-seed rows (seed ``s`` of both methods shares initialisation and batch order), or,
    where only means and sample standard deviations are stored (``val_ppl_sd`` of part a),
    Welch's t-test from them; a JSON with neither gets "not decided" (rerun needed).

    * (a) Default MoE vs Top-K: final validation perplexity, every setting; tokens to the
      target and step time come from seed-mean curves and medians under other processes'
      load, with no spread stored: not decided.
    * (b) fine-tuning with L_o + L_v vs without: expert overlap lower, routing-score
      variance higher, MaxVio not higher ("preserves balance": a resolved rise
      contradicts), validation loss lower.
    * (c) bias balancing vs the Switch loss: global MaxVio lower, for 8 and 32 experts.

    Fixed step budgets and no validation plateau: nothing is converged or decisive.
    """
    seeds = doc["machine"]["seeds"]
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    out = []

    def compare(claim, ours, base, metric, higher, **kw):
        sd = f"{metric}_sd" if (ours, f"{metric}_sd") in has else None
        return seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=ours,
            baseline=base,
            higher_is_better=higher,
            converged=False,
            sd_metric=sd,
            ddof=1,
            **kw,
        )

    settings = [c for c, m in has if m == "target_ppl"]
    settings.sort(key=lambda c: (int(c.split("c")[0]), c))
    for case in settings:
        out.append(
            compare(
                f"Default MoE lowers the final perplexity ({case})",
                f"{case}/default",
                f"{case}/top-k",
                "val_ppl",
                False,
            )
        )
    for claim, metric, unit in (
        ("Default MoE reaches the Top-K perplexity with fewer tokens", "tokens_to_target", ""),
        ("Default MoE costs little training-step time", "step_time", " ms"),
    ):
        case = settings[0]
        ours = row_value(doc, f"{case}/default", metric)
        base = row_value(doc, f"{case}/top-k", metric)
        out.append(
            verdict_entry(
                f"{claim} ({case})",
                verdict="not decided",
                why=f"{metric} {ours:.4g}{unit} vs {base:.4g}{unit} (lower is better); from the "
                "seed-mean curve or the median step, with no spread over seeds stored (step "
                "times also move with other processes' load): nothing to test",
                metric=metric,
                ours=ours,
                baseline=f"{case}/top-k",
                baseline_value=base,
                seeds=len(seeds),
                p_value=None,
                converged=False,
                decisive=False,
            )
        )
    if ("finetune/L_o+L_v", "overlap") in has:
        for claim, metric, higher in (
            ("L_o + L_v reduce expert overlap", "overlap", False),
            ("L_o + L_v increase the routing-score variance", "score_variance", True),
            ("L_o + L_v preserve balance (MaxVio not higher)", "max_violation", False),
            ("L_o + L_v improve the fine-tuned model", "val_loss", False),
        ):
            out.append(compare(claim, "finetune/L_o+L_v", "finetune/baseline", metric, higher))
    for case in sorted({c.split("/")[0] for c, m in has if c.endswith("/bias")}, key=len):
        out.append(
            compare(
                f"bias balancing balances better than the Switch loss ({case}, global MaxVio)",
                f"{case}/bias",
                f"{case}/switch",
                "max_violation",
                False,
            )
        )
    return out


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="save PNG plots here"
    )
    parser.add_argument(
        "--verdicts-only",
        type=Path,
        default=None,
        metavar="JSON",
        help="recompute the verdicts of a stored results JSON from its rows (no training)",
    )
    args = parser.parse_args()
    if args.verdicts_only is not None:
        rederive_verdicts(args.verdicts_only, verdicts)
        return
    if args.threads is None:
        args.threads = 1  # one thread: on a shared 2-core machine 2 threads ran 7x slower
    setup(args)
    p = plan(args.quick)
    p["seed0"] = args.seed
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    warn_if_busy()
    other = OtherLoad()
    corpus = load_corpus()
    log(f"corpus: {corpus.sources} (train, validation bytes); seeds {seeds}")
    rows: list[Row] = []
    runs: dict = {}
    ta, tb, tc = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        ckpt_dir = Path(tmp)
        exp_default(p, args.seed, ckpt_dir, rows, ta, runs)
        exp_finetune(p, args.seed, ckpt_dir, corpus, rows, tb, runs)
    exp_balance(p, args.seed, rows, tc, runs)
    tokens_per_run = p["steps"] * 16 * MODEL["seq_len"]
    print()
    print_table(
        [
            "case",
            "beta",
            "top-k ppl",
            "sd",
            "default ppl",
            "sd",
            "default wins",
            "top-k tok→target",
            "default tok→target",
            "default step overhead",
        ],
        ta,
        f"(a) Top-K vs Default MoE: {p['steps']} steps = {tokens_per_run} tokens, "
        f"seeds {seeds}; target = top-k final mean ppl",
    )
    print()
    print_table(
        ["metric", "", "pretrained", "baseline FT", "L_o+L_v FT", "ratio"],
        tb,
        f"(b) fine-tuning on news, {p['ft_steps']} steps, coefs {FT_COEFS}, seeds {seeds}",
    )
    print()
    print_table(
        ["case", "val ppl", "MaxVio (global)", "MaxVio (per batch)"],
        tc,
        f"(c) Switch loss ({SWITCH_COEF}) vs aux-loss-free bias (rate {BIAS_RATE}) vs none",
    )
    if args.plots is not None:
        for path in save_plots(runs, p, args.plots):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        plan={k: v for k, v in p.items() if k != "seed0"},
        model=MODEL,
        contention=other.report(),
        command=" ".join(["python", *sys.argv]),
    )
    print(f"wall time {machine['contention']['wall_s']} s; other load {machine['contention']}")
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        _write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
