"""The three experiments of ``run.py``: (a) Top-K vs Default MoE, (b) fine-tuning, (c) balancing.

:func:`exp_default` trains Top-K and Default MoE over seeds and configurations,
:func:`exp_finetune` fine-tunes the Top-K models of (a) with and without the
orthogonality and variance losses, :func:`exp_balance` compares the Switch loss with
aux-loss-free bias balancing; each stores its trainings in the resumable state
(``_routing_science.Pieces``) and appends rows and table lines. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    Row,
    paired_test,
)
from _routing_science import (
    BETA,
    GRAD_WINDOWS,
    MODEL,
    SWITCH_COEF,
    Pieces,
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
    train,
    validation_windows,
)

__all__ = [
    "BIAS_RATE",
    "FT_COEFS",
    "FT_CONFIG",
    "a_key",
    "a_unit",
    "default_run",
    "exp_balance",
    "exp_default",
    "exp_finetune",
    "last_layer",
    "mean_curve",
    "sd",
]


BIAS_RATE = 1e-3
FT_COEFS = {"orthogonality_coef": 0.001, "variance_coef": 1.0}
FT_CONFIG = (8, 2)  # the Top-K models of (a) that (b) fine-tunes


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
