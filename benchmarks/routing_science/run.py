"""Routing science on a small byte-level MoE language model (real text, 2-core CPU scale).

Three experiments with :mod:`sci_moe.language` (decoder-only transformer, SwiGLU experts,
first FFN dense, trained on gensim's Wikipedia excerpt + Lee news articles, fixed
90/10 split of each stream):

``(a) default``
    Top-K vs Default MoE (Panda et al. 2025) on two configurations (``CONFIGS``: 8 experts
    k=2 and 32 experts k=2; beta 0.9 and 0.95 as in the paper), 12 paired seeds each
    (seed ``s`` of both methods shares initialisation and batch order), every run trained
    until its validation loss is flat (``FLAT_RULE``; ``converged`` is stored per run).
    Both use the Switch loss (coef 0.01). Per seed: final validation perplexity, tokens
    to the target perplexity (the highest final perplexity of all runs of the
    configuration, so every run reaches it; log-linear interpolation between
    evaluations), median step time, and the router's gradient from the LM loss alone
    (:func:`router_gradient`: share of non-zero ``dL/dlogits`` entries, share of its
    squared norm on experts the token did not select, per-expert norms of ``dL/dW``) at
    10 % of the steps and at the end. The paired t-test decides; the sign test's p-value
    is reported beside it.
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

Rows follow ``benchmarks/_common``: ``ratio > 1`` means the paper's method is better
(e.g. ``top-k ppl / default ppl``). Run:
``python benchmarks/routing_science/run.py [--quick] [--json PATH] [--seed 0] [--threads 1]
[--plots DIR] [--max-hours H] [--resume]`` (default one torch thread: with two threads on
a busy 2-core machine the steps ran 7x slower). The run is resumable in pieces:
``--max-hours`` stops between trainings and ``--resume`` continues from ``JSON.state.json``
(every finished training, written after each one); the JSON and plots are written when
all trainings are done. Per-seed rows (metric ``<metric> seed <s>``) back the verdicts of
:func:`verdicts`; ``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its
rows (no training).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    machine_info,
    paired_test,
    piece_arguments,
    piece_deadline,
    print_table,
    refuse,
    resume_state,
    row_value,
    seed_verdict,
    setup,
    state_path,
    verdict_entry,
    verdicts_only,
    warn_if_busy,
)
from _common import write_json as _write_json
from _routing_science import (
    BETA,
    FLAT_RULE,
    GRAD_WINDOWS,
    MODEL,
    SWITCH_COEF,
    Pieces,
    Stop,
    flat,
    log,
    mcfg,
    router_gradient,
    slim,
    tcfg,
    tokens_to,
)

from sci_moe.language import (
    TextCorpus,
    finetune,
    load_corpus,
    train,
    validation_windows,
)

BENCHMARK = "routing_science"
BIAS_RATE = 1e-3
FT_COEFS = {"orthogonality_coef": 0.001, "variance_coef": 1.0}
FT_CONFIG = (8, 2)  # the Top-K models of (a) that (b) fine-tunes


def plan(quick: bool) -> dict:
    if quick:
        return dict(
            seeds=2,
            ft_seeds=1,
            steps=100,
            eval_interval=25,
            eval_batches=4,
            ft_steps=40,
            configs=((8, 2),),
            balance_experts=(8,),
        )
    return dict(
        seeds=12,
        ft_seeds=3,
        steps=1800,
        eval_interval=50,
        eval_batches=8,
        ft_steps=150,
        configs=((8, 2), (32, 2)),
        balance_experts=(8, 32),
    )


def mean_curve(hists: list[dict], key: str = "val_ppl") -> list[float]:
    return [statistics.fmean(v) for v in zip(*(h[key] for h in hists), strict=True)]


def last_layer(h: dict, key: str, idx: int = -1) -> float:
    """Mean over MoE layers of a diagnostic at evaluation ``idx``."""
    return statistics.fmean(layer[key] for layer in h["diagnostics"][idx])


def sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


# --------------------------------------------------------------------- experiments


def default_run(
    p: dict, E: int, k: int, method: str, seed: int, corpus: TextCorpus, out_dir=None
) -> dict:
    """One training of (a), with its router-gradient measurements and flatness."""
    moe = {"load_balance_coef": SWITCH_COEF}
    if method == "default":
        moe.update(default_moe=True, default_beta=BETA[(E, k)])
    gx, gy = validation_windows(corpus.val, MODEL["seq_len"], GRAD_WINDOWS)
    early = {}
    at = max(1, p["steps"] // 10)

    def callback(step, model, _hist):
        if step == at:
            early.update(router_gradient(model, gx, gy))

    t0 = time.perf_counter()
    h, model = train(
        mcfg(E, k, **moe),
        tcfg(p, seed),
        out_dir=out_dir,
        corpus=corpus,
        callback=callback,
        return_model=True,
    )
    out = slim(h, full_diagnostics=seed == p["seed0"])
    out["grad_early"] = early
    out["grad_end"] = router_gradient(model, gx, gy)
    out["converged"] = flat(h["step"], h["val_loss"])
    out["wall_s"] = time.perf_counter() - t0
    log(
        f"(a) {E}c{k} {method:7s} seed {seed}: ppl {h['val_ppl'][-1]:.3f} "
        f"flat {out['converged']} router-grad density {out['grad_end']['density']:.3f} "
        f"({out['wall_s']:.0f} s)"
    )
    return out


def a_unit(p: dict, E: int, k: int, method: str, seed: int, corpus: TextCorpus) -> dict:
    """State entries of one training of (a); for the Top-K ``FT_CONFIG`` model of the first
    ``ft_seeds`` seeds also (b)'s two fine-tunings of it (its checkpoint lives only here)."""
    key = a_key(E, k, method, seed)
    if (E, k) != FT_CONFIG or method != "top-k" or seed >= p["seed0"] + p["ft_seeds"]:
        return {key: default_run(p, E, k, method, seed, corpus)}
    news = TextCorpus(
        corpus.train[corpus.sources["wikipedia"][0] :],
        corpus.val[corpus.sources["wikipedia"][1] :],
        {},
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = {key: default_run(p, E, k, method, seed, corpus, out_dir=tmp)}
        for name, over in (("baseline", {}), ("L_o+L_v", FT_COEFS)):
            t = tcfg(p, seed, steps=p["ft_steps"], lr=1e-3, warmup_steps=10)
            fh = finetune(Path(tmp) / "checkpoint.pt", t, over, corpus=news)
            log(f"(b) finetune {name:8s} seed {seed}: val loss {fh['val_loss'][-1]:.4f}")
            out[f"b/{name}/s{seed}"] = slim(fh, full_diagnostics=False)
    return out


def a_key(E: int, k: int, method: str, seed: int) -> str:
    return f"a/{E}c{k}/{method}/s{seed}"


def exp_default(
    p: dict, seeds: list[int], pieces: Pieces, corpus: TextCorpus, rows, table, runs
) -> None:
    for E, k in p["configs"]:
        for seed in seeds:
            for method in ("top-k", "default"):
                pieces.get(
                    a_key(E, k, method, seed),
                    lambda E=E, k=k, m=method, s=seed: a_unit(p, E, k, m, s, corpus),
                )
    for E, k in p["configs"]:
        case = f"{E}c{k}"
        hs = {m: [pieces.state[a_key(E, k, m, s)] for s in seeds] for m in ("top-k", "default")}
        runs[(E, k)] = hs
        final = {m: [h["val_ppl"][-1] for h in v] for m, v in hs.items()}
        target = max(final["top-k"] + final["default"])
        ttt = {m: [tokens_to(h["tokens"], h["val_ppl"], target) for h in v] for m, v in hs.items()}
        per_seed = {
            "val_ppl": ("ppl", lambda h: h["val_ppl"][-1]),
            "val_loss": ("nats", lambda h: h["val_loss"][-1]),
            "tokens_to_target": ("tokens", None),
            "step_time": ("ms", lambda h: h["step_ms"]),
            "converged": ("bool", lambda h: float(h["converged"])),
            "router_grad_density": ("share", lambda h: h["grad_end"]["density"]),
            "router_grad_unselected": ("share", lambda h: h["grad_end"]["unselected_share"]),
            "router_grad_norm": ("norm", lambda h: h["grad_end"]["norm"]),
            "router_grad_min_max_expert": ("ratio", lambda h: h["grad_end"]["min_max_expert"]),
            "router_grad_density_early": ("share", lambda h: h["grad_early"]["density"]),
            "router_grad_unselected_early": (
                "share",
                lambda h: h["grad_early"]["unselected_share"],
            ),
            "router_grad_norm_early": ("norm", lambda h: h["grad_early"]["norm"]),
        }
        vals = {}
        for metric, (_unit, get) in per_seed.items():
            for m in ("top-k", "default"):
                vals[(metric, m)] = ttt[m] if get is None else [get(h) for h in hs[m]]
        rows.append(Row(case, "target_ppl", target, "ppl"))
        lower_better = {"val_ppl", "val_loss", "tokens_to_target", "step_time"}
        for metric, (unit, _get) in per_seed.items():
            t, d = vals[(metric, "top-k")], vals[(metric, "default")]
            mt, md = statistics.fmean(t), statistics.fmean(d)
            if metric in lower_better:
                ratio = mt / md if md else None
            else:  # (a Top-K share of exactly 0 up to rounding has no meaningful ratio)
                ratio = md / mt if abs(mt) > 1e-9 else None
            rows += [
                Row(f"{case}/top-k", metric, mt, unit),
                Row(f"{case}/top-k", f"{metric}_sd", sd(t), unit),
                Row(f"{case}/default", metric, md, unit, f"{case}/top-k", ratio),
                Row(f"{case}/default", f"{metric}_sd", sd(d), unit),
            ]
            rows += [
                Row(f"{case}/{m}", f"{metric} seed {s}", v, unit)
                for m in ("top-k", "default")
                for s, v in zip(seeds, vals[(metric, m)], strict=True)
            ]
            if metric in ("val_ppl", "tokens_to_target") and len(seeds) >= 2:
                # both p-values on the page; the t-test decides (see verdicts())
                res = paired_test(d, t)
                rows += [
                    Row(f"{case}/default", f"{metric} p_t", res["t"], "p"),
                    Row(f"{case}/default", f"{metric} p_sign", res["sign"], "p"),
                    Row(f"{case}/default", f"{metric} wins", float(res["losses"]), "seeds"),
                ]
        wins = sum(x < y for x, y in zip(final["default"], final["top-k"], strict=True))
        table.append(
            [
                case,
                BETA[(E, k)],
                statistics.fmean(final["top-k"]),
                sd(final["top-k"]),
                statistics.fmean(final["default"]),
                sd(final["default"]),
                f"{wins}/{len(seeds)}",
                statistics.fmean(ttt["top-k"]),
                statistics.fmean(ttt["default"]),
                statistics.fmean(vals[("router_grad_density", "top-k")]),
                statistics.fmean(vals[("router_grad_density", "default")]),
                f"{sum(vals[('converged', 'top-k')] + vals[('converged', 'default')]):.0f}"
                f"/{2 * len(seeds)}",
            ]
        )


def exp_finetune(seeds: list[int], pieces: Pieces, rows, table, runs) -> None:
    """(b) from the state (:func:`a_unit` ran the fine-tunings)."""
    res = {
        name: [pieces.state[f"b/{name}/s{s}"] for s in seeds] for name in ("baseline", "L_o+L_v")
    }
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
            Row(f"finetune/{name}", f"{metric} seed {s}", get(h), unit)
            for name in ("baseline", "L_o+L_v")
            for s, h in zip(seeds, res[name], strict=True)
        ]
        table.append([metric, f"{better} better", before, base, meth, ratio])


def exp_balance(
    p: dict, seeds: list[int], pieces: Pieces, corpus: TextCorpus, rows, table, runs
) -> None:
    k = 2
    for E in p["balance_experts"]:
        hs = {
            "switch": [pieces.state[a_key(E, k, "top-k", s)] for s in seeds],
            "bias": [],
            "none": [],
        }
        for seed in seeds:
            for name in ("bias", "none"):
                if name == "none" and E != 8:
                    continue
                moe = {"load_balance_coef": 0.0}
                extra = {}
                if name == "bias":
                    moe["selection_bias"] = True
                    extra["bias_balancing"] = BIAS_RATE
                key = f"c/{E}c{k}/{name}/s{seed}"

                def compute(E=E, moe=moe, extra=extra, seed=seed, name=name, key=key):
                    h = train(mcfg(E, k, **moe), tcfg(p, seed, **extra), corpus=corpus)
                    log(f"(c) {E}c{k} {name:6s} seed {seed}: ppl {h['val_ppl'][-1]:.3f}")
                    return {key: slim(h, full_diagnostics=seed == p["seed0"])}

                hs[name].append(pieces.get(key, compute))
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
                Row(f"{case}/{name}", f"{metric} seed {s}", get(h), unit)
                for metric, unit, get in (
                    ("val_ppl", "ppl", lambda h: h["val_ppl"][-1]),
                    ("max_violation", "MaxVio", lambda h: last_layer(h, "max_violation")),
                )
                for s, h in zip(seeds, hs[name], strict=True)
            ]


# --------------------------------------------------------------------------- plots


def save_plots(runs: dict, p: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    saved = []
    cases = [tuple(c) for c in p["configs"]]
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

    # per seed: Default MoE's final perplexity against Top-K's (below the diagonal: Default
    # better), and the router-gradient density of both
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for (E, k), color in zip(cases, ("tab:purple", "tab:orange", "tab:green"), strict=False):
        t = [h["val_ppl"][-1] for h in runs[(E, k)]["top-k"]]
        d = [h["val_ppl"][-1] for h in runs[(E, k)]["default"]]
        axes[0].scatter(t, d, color=color, label=f"{E} experts, k={k}", s=18)
        for j, method in enumerate(("top-k", "default")):
            dens = [h["grad_end"]["density"] for h in runs[(E, k)][method]]
            x = cases.index((E, k)) * 3 + j
            axes[1].scatter([x] * len(dens), dens, color=color, s=12)
    lo, hi = axes[0].get_xlim()
    axes[0].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    axes[0].set_xlabel("Top-K final perplexity")
    axes[0].set_ylabel("Default MoE final perplexity (same seed)")
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(
        [i * 3 + j for i in range(len(cases)) for j in (0, 1)],
        [f"{E}c{k}\n{m}" for E, k in cases for m in ("top-k", "default")],
        fontsize=8,
    )
    axes[1].set_ylabel("non-zero share of dL/d(router logits)")
    axes[1].set_ylim(0, 1.05)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "routing_science_default_seeds.png"
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
    """One verdict per claim, by rules applied to the run's rows (issue 44).

    Comparisons of two methods use :func:`_common.seed_verdict`: the paired t-test over
    the per-seed rows (seed ``s`` of both methods shares initialisation and batch order)
    decides; for part (a) the sign test's p-value (rows ``<metric> p_sign``) is quoted in
    ``why`` beside it. A JSON without per-seed rows gets "not decided" (rerun needed).

    * (a) Default MoE vs Top-K, for each configuration: final validation perplexity lower;
      tokens to the target perplexity fewer; the router's gradient from the LM loss denser
      (share of non-zero ``dL/dlogits`` entries at the end of training). Converged when
      every run of the configuration met ``FLAT_RULE`` (rows ``converged``). Step time is
      measured under other processes' load: not decided.
    * (b) fine-tuning with L_o + L_v vs without (the first ``ft_seeds`` seeds): expert
      overlap lower, routing-score variance higher, MaxVio not higher ("preserves
      balance": a resolved rise contradicts), validation loss lower. Fixed 150 steps.
    * (c) bias balancing vs the Switch loss (the first ``ft_seeds`` seeds): global MaxVio
      lower, for 8 and 32 experts. The bias runs' flatness is not checked.
    """
    seeds = doc["machine"]["seeds"]
    few = doc["machine"].get("ft_seeds", seeds)
    has = {(r["case"], r["metric"]) for r in doc["rows"]}
    out = []

    def compare(claim, ours, base, metric, higher, converged=False, **kw):
        return seed_verdict(
            claim,
            doc,
            metric=metric,
            ours=ours,
            baseline=base,
            higher_is_better=higher,
            converged=converged,
            **kw,
        )

    settings = [c for c, m in has if m == "target_ppl"]
    settings.sort(key=lambda c: (int(c.split("c")[0]), c))
    for case in settings:
        conv = all(
            (f"{case}/{m}", "converged") in has and row_value(doc, f"{case}/{m}", "converged") == 1
            for m in ("top-k", "default")
        )
        for claim, metric, higher in (
            ("Default MoE lowers the final perplexity", "val_ppl", False),
            (
                "Default MoE reaches the target perplexity with fewer tokens",
                "tokens_to_target",
                False,
            ),
            ("Default MoE gives the router a dense gradient", "router_grad_density", True),
        ):
            note = "paired t-test decides"
            if (f"{case}/default", f"{metric} p_sign") in has:
                ps = row_value(doc, f"{case}/default", f"{metric} p_sign")
                note += f"; sign test p = {ps:.2g}"
            out.append(
                compare(
                    f"{claim} ({case})",
                    f"{case}/default",
                    f"{case}/top-k",
                    metric,
                    higher,
                    converged=conv,
                    note=note,
                )
            )
    case = settings[0]
    ours = row_value(doc, f"{case}/default", "step_time")
    base = row_value(doc, f"{case}/top-k", "step_time")
    out.append(
        verdict_entry(
            f"Default MoE costs little training-step time ({case})",
            verdict="not decided",
            why=f"step_time {ours:.4g} ms vs {base:.4g} ms (lower is better); median step "
            "times move with other processes' load on the shared machine: not tested",
            metric="step_time",
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
            out.append(
                compare(claim, "finetune/L_o+L_v", "finetune/baseline", metric, higher, seeds=few)
            )
    for case in sorted({c.split("/")[0] for c, m in has if c.endswith("/bias")}, key=len):
        out.append(
            compare(
                f"bias balancing balances better than the Switch loss ({case}, global MaxVio)",
                f"{case}/bias",
                f"{case}/switch",
                "max_violation",
                False,
                seeds=few,
            )
        )
    return out


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    piece_arguments(parser, unit="training")
    parser.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="save PNG plots here"
    )
    args = parser.parse_args()
    if verdicts_only(args) is not None:
        return
    if args.threads is None:
        args.threads = 1  # one thread: on a shared 2-core machine 2 threads ran 7x slower
    setup(args)
    p = plan(args.quick)
    p["seed0"] = args.seed
    seeds = list(range(args.seed, args.seed + p["seeds"]))
    few = seeds[: p["ft_seeds"]]
    state = resume_state(args)
    plan_json = json.loads(json.dumps(p))
    if "plan" in state:  # a state without a plan (a new run) passes
        try:
            check_resume_settings(state["plan"], plan_json, state_path(args.json), what="plan")
        except ValueError as err:
            refuse(str(err))
    state["plan"] = plan_json
    deadline = piece_deadline(args)
    pieces = Pieces(state, deadline, state_path(args.json) if args.json is not None else None)
    warn_if_busy()
    other = OtherLoad()
    corpus = load_corpus()
    log(f"corpus: {corpus.sources} (train, validation bytes); seeds {seeds}")
    rows: list[Row] = []
    runs: dict = {}
    ta, tb, tc = [], [], []
    try:
        exp_default(p, seeds, pieces, corpus, rows, ta, runs)
        exp_finetune(few, pieces, rows, tb, runs)
        exp_balance(p, few, pieces, corpus, rows, tc, runs)
    except Stop as stop:
        done = sum(k.startswith(("a/", "b/", "c/")) for k in state)
        print(
            f"stopped before {stop} (--max-hours); {done} trainings stored in "
            f"{pieces.path}; continue with --resume"
        )
        return
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
            "top-k grad density",
            "default grad density",
            "flat runs",
        ],
        ta,
        f"(a) Top-K vs Default MoE: {p['steps']} steps = {tokens_per_run} tokens, "
        f"seeds {seeds}; target = highest final ppl of the configuration",
    )
    print()
    print_table(
        ["metric", "", "pretrained", "baseline FT", "L_o+L_v FT", "ratio"],
        tb,
        f"(b) fine-tuning on news, {p['ft_steps']} steps, coefs {FT_COEFS}, seeds {few}",
    )
    print()
    print_table(
        ["case", "val ppl", "MaxVio (global)", "MaxVio (per batch)"],
        tc,
        f"(c) Switch loss ({SWITCH_COEF}) vs aux-loss-free bias (rate {BIAS_RATE}) vs none, "
        f"seeds {few}",
    )
    if args.plots is not None:
        for path in save_plots(runs, p, args.plots):
            print(f"saved {path}")
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=seeds,
        ft_seeds=few,
        plan={k: v for k, v in p.items() if k != "seed0"},
        model=MODEL,
        flat_rule=FLAT_RULE,
        training_s_total=round(
            sum(v.get("wall_s", 0.0) for k, v in state.items() if k.startswith("a/")), 1
        ),
        contention=other.report(),  # of the last piece
        command=" ".join(["python", *sys.argv]),
    )
    print(f"last piece: wall time {machine['contention']['wall_s']} s")
    if args.json is not None:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        _write_json(args.json, BENCHMARK, machine, rows, verdicts=verdicts(doc))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
