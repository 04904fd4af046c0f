"""Part (b) of ``--heuristics``: early stopping of stages on MiniLM features.

:func:`run_stopping` runs retuned and fixed-ridge hard-label SD of a linear probe over
label-noise levels and seeds (:func:`one_split`, with the centroid and k-NN baselines) and
appends the rows; :func:`stopping_verdicts` decides the claim by paired t-tests. A helper
module: ``_self_distillation_heuristics.py`` imports it.
"""

from __future__ import annotations

import math
import time

import numpy as np
from _common import Row, decide_verdict, paired_test, print_table
from _self_distillation_bias import GRAD_TOL

from sci_moe.theory.self_distillation import (
    EmpiricalSDConfig,
    early_stopping_stage,
    fit_self_distillation,
    inject_label_noise,
    pseudo_labels,
    stage_gradient,
    train_probe_stages,
)
from sci_moe.theory.self_distillation.splits import grouped_split

__all__ = [
    "HEADERS_B",
    "knn_predict",
    "one_split",
    "probe_grad",
    "run_stopping",
    "stopping_verdicts",
]


HEADERS_B = ["theta", "protocol", "stage 0", "all", "early-stop", "hindsight", "picked/best"]
HEADERS_B += ["centroid", "k-NN"]


# ------------------------------------------------------------ (b) early stopping


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((pred > 0.5) == (y > 0.5)))


def knn_predict(Xtr, ytr, Xq, k: int) -> np.ndarray:
    """Majority vote of the ``k`` nearest training rows by cosine similarity (ties: 1)."""
    a = Xtr / np.linalg.norm(Xtr, axis=1, keepdims=True).clip(1e-12)
    b = Xq / np.linalg.norm(Xq, axis=1, keepdims=True).clip(1e-12)
    idx = np.argpartition(-(b @ a.T), k - 1, axis=1)[:, :k]
    return (ytr[idx].mean(axis=1) >= 0.5).astype(float)


def probe_grad(probes, Xtr, ytr, lambdas, betas) -> float:
    """Largest per-sample gradient of the probes' objectives (on the ``w`` scale)."""
    N = Xtr.shape[1]
    labels, g = ytr, 0.0
    for t, p in enumerate(probes):
        w = p.weights * np.sqrt(N)
        g = max(g, stage_gradient(Xtr, labels, "bce", lambdas[t] / N, True, w, p.bias))
        if t < len(betas):
            labels = pseudo_labels("bce", p.decision_function(Xtr), betas[t])
    return g


def one_split(X, labels, groups, theta, seed, cfg) -> dict:
    """One seed of part (b): both SD protocols and the baselines on one split."""
    rest, test = grouped_split(labels, groups, 0.3, 10_000 + seed)
    y_noisy = inject_label_noise(labels[rest], theta, seed)
    T = cfg["n_stages"]
    config = EmpiricalSDConfig(
        n_stages=T,
        loss="bce",
        labels="hard",
        learn_bias=True,
        log10_lambdas=cfg["log10_lambdas"],
        seed=int(seed),
    )
    res = fit_self_distillation(
        X[rest], y_noisy, config, X[test], labels[test], groups=np.asarray(groups)[rest]
    )
    sc = res.standardizer
    Xtr = sc.transform(X[rest][res.train_index])
    ytr = y_noisy[res.train_index]
    Xva = sc.transform(X[rest][res.val_index])
    yva = y_noisy[res.val_index]
    Xte, yte = sc.transform(X[test]), labels[test]
    betas = (math.inf,) * T
    fixed_lams = (res.lambdas[0],) * (T + 1)
    fixed = train_probe_stages(Xtr, ytr, fixed_lams, betas, "bce", True)
    out = {
        "retuned": {
            "val_acc": [1 - e for e in res.val_errors],
            "test_acc": [1 - e for e in res.test_errors],
            "grad": probe_grad(res.probes, Xtr, ytr, res.lambdas, res.betas),
            "lambdas": list(res.lambdas),
        },
        "fixed ridge": {
            "val_acc": [1 - p.error(Xva, yva) for p in fixed],
            "test_acc": [1 - p.error(Xte, yte) for p in fixed],
            "grad": probe_grad(fixed, Xtr, ytr, fixed_lams, betas),
            "lambdas": list(fixed_lams),
        },
    }
    mu1, mu0 = Xtr[ytr > 0.5].mean(axis=0), Xtr[ytr < 0.5].mean(axis=0)
    centroid = ((Xte - (mu1 + mu0) / 2) @ (mu1 - mu0) > 0).astype(float)
    ks = [k for k in cfg["knn_ks"] if k <= len(ytr)]
    k_best = max(ks, key=lambda k: (_accuracy(knn_predict(Xtr, ytr, Xva, k), yva), -k))
    major = float(ytr.mean() >= 0.5)
    out["baselines"] = {
        "stage-0 probe": out["retuned"]["test_acc"][0],
        "nearest centroid": _accuracy(centroid, yte),
        "k-NN": _accuracy(knn_predict(Xtr, ytr, Xte, k_best), yte),
        "majority class": _accuracy(np.full(len(yte), major), yte),
    }
    out["knn_k"] = k_best
    out["sizes"] = [len(ytr), len(yva), len(yte)]
    return out


def run_stopping(cfg, seed, rows, details, minilm_cache) -> None:
    """Part (b): early stopping of stages on MiniLM features with injected label noise."""
    from sci_moe.data.minilm import cached_embeddings
    from sci_moe.data.newsgroups import newsgroup_sentences

    texts, labels, groups = newsgroup_sentences()
    X = cached_embeddings(texts, minilm_cache, progress=False)
    rows.append(Row("stop data", "n_sentences", len(texts), "1"))
    rows.append(Row("stop data", "n_posts", len(set(groups)), "1"))
    rows.append(Row("stop data", "fraction_space", float(np.mean(labels)), "1"))
    seeds = [seed + s for s in range(cfg["stop_seeds"])]
    table = []
    for theta in cfg["thetas"]:
        t0 = time.perf_counter()
        runs = [one_split(X, labels, groups, theta, s, cfg) for s in seeds]
        details[f"stop theta={theta:g}"] = runs
        case0 = f"stop theta={theta:g}"
        rows.append(Row(case0, "train_size", float(np.mean([r["sizes"][0] for r in runs])), "1"))
        for name in runs[0]["baselines"]:
            acc = [r["baselines"][name] for r in runs]
            rows.append(Row(f"{case0} {name}", "test_acc", float(np.mean(acc)), "1"))
            sem = float(np.std(acc, ddof=1) / math.sqrt(len(acc)))
            rows.append(Row(f"{case0} {name}", "test_acc_sem", sem, "1"))
        rows.append(Row(f"{case0} k-NN", "k_mean", float(np.mean([r["knn_k"] for r in runs])), "1"))
        for proto in ("retuned", "fixed ridge"):
            case = f"{case0} {proto}"
            test = np.array([r[proto]["test_acc"] for r in runs])  # (seeds, T + 1)
            val = np.array([r[proto]["val_acc"] for r in runs])
            picked = np.array([early_stopping_stage(1 - v) for v in val])
            best = np.argmax(test, axis=1)  # earliest best stage in hindsight
            rows_idx = np.arange(len(runs))
            es = test[rows_idx, picked]
            val_best = test[rows_idx, np.argmax(val, axis=1)]
            for t in range(test.shape[1]):
                rows.append(Row(case, f"test_acc_stage{t}", float(test[:, t].mean()), "1"))
                sem_t = float(test[:, t].std(ddof=1) / math.sqrt(len(runs)))
                rows.append(Row(case, f"test_acc_stage{t}_sem", sem_t, "1"))
                rows.append(Row(case, f"val_acc_stage{t}", float(val[:, t].mean()), "1"))
            rows.append(Row(case, "early_stopped_acc", float(es.mean()), "1"))
            sem = float(es.std(ddof=1) / math.sqrt(len(es)))
            rows.append(Row(case, "early_stopped_acc_sem", sem, "1"))
            rows.append(Row(case, "val_argmax_acc", float(val_best.mean()), "1"))
            rows.append(Row(case, "hindsight_best_acc", float(test.max(axis=1).mean()), "1"))
            rows.append(Row(case, "picked_stage_mean", float(picked.mean()), "1"))
            rows.append(Row(case, "best_stage_mean", float(best.mean()), "1"))
            rows.append(Row(case, "picked_is_best", float(np.mean(picked == best)), "1"))
            regret = test.max(axis=1) - es
            rows.append(Row(case, "regret", float(regret.mean()), "1"))
            for ref, vals in (("stage0", test[:, 0]), ("all_stages", test[:, -1])):
                pt = paired_test(es, vals)
                rows.append(Row(case, f"es_minus_{ref}", pt["mean_diff"], "1"))
                rows.append(Row(case, f"es_minus_{ref}_p", pt["t"], "1"))
            rows.append(Row(case, "grad_max", max(r[proto]["grad"] for r in runs), "1"))
            table.append(
                [
                    theta,
                    proto,
                    f"{test[:, 0].mean():.4f}",
                    f"{test[:, -1].mean():.4f}",
                    f"{es.mean():.4f}",
                    f"{test.max(axis=1).mean():.4f}",
                    f"{picked.mean():.1f}/{best.mean():.1f}",
                    f"{np.mean([r['baselines']['nearest centroid'] for r in runs]):.4f}",
                    f"{np.mean([r['baselines']['k-NN'] for r in runs]):.4f}",
                ]
            )
        rows.append(Row(case0, "wall_s", time.perf_counter() - t0, "s"))
        print(f"  {case0}: {time.perf_counter() - t0:.0f} s", flush=True)
    print_table(
        HEADERS_B,
        table,
        title=f"MiniLM probes: clean test accuracy, mean of {len(seeds)} splits",
    )


def stopping_verdicts(details: dict, cfg: dict) -> list[dict]:
    """Rule of part (b).

    Per noise level: early-stopped retuned SD (per-seed test accuracy) against the strongest
    (highest mean accuracy) of the stage-0 probe, nearest centroid, k-NN and the majority
    class, paired t-test. Then, per protocol, pooled over the noise levels: early stopping
    against running all stages. Converged: every probe's gradient below ``GRAD_TOL``.
    """
    out = []
    pooled = {p: ([], [], True) for p in ("retuned", "fixed ridge")}
    for theta in cfg["thetas"]:
        runs = details[f"stop theta={theta:g}"]
        es = {}
        for proto in pooled:
            val = [r[proto]["val_acc"] for r in runs]
            test = [r[proto]["test_acc"] for r in runs]
            es[proto] = [
                t[early_stopping_stage([1 - v for v in vs])]
                for t, vs in zip(test, val, strict=True)
            ]
            ours_all, base_all, conv = pooled[proto]
            ours_all += es[proto]
            base_all += [t[-1] for t in test]
            conv = conv and all(r[proto]["grad"] < GRAD_TOL for r in runs)
            pooled[proto] = (ours_all, base_all, conv)
        cands = {name: [r["baselines"][name] for r in runs] for name in runs[0]["baselines"]}
        name = max(cands, key=lambda k: float(np.mean(cands[k])))
        pt0 = paired_test(es["retuned"], cands["stage-0 probe"])
        out.append(
            decide_verdict(
                f"early stopping of SD stages is effective on real features (label noise "
                f"{theta:.0%}; MiniLM, hard labels, stages retuned, at most "
                f"{cfg['n_stages']} SD stages)",
                metric="clean test accuracy",
                ours=es["retuned"],
                baseline=f"{name} (strongest of stage-0 probe, nearest centroid, k-NN, majority)",
                baseline_values=cands[name],
                higher_is_better=True,
                converged=all(r["retuned"]["grad"] < GRAD_TOL for r in runs),
                note=(
                    f"vs plain stage-0 training alone {pt0['mean_diff']:+.4f} "
                    f"(paired t p = {pt0['t']:.2g})"
                ),
            )
        )
    for proto, (ours_all, base_all, conv) in pooled.items():
        out.append(
            decide_verdict(
                f"early stopping limits the number of stages better than running all "
                f"{cfg['n_stages']} SD stages ({proto} protocol, pooled over label noise "
                f"{', '.join(f'{t:.0%}' for t in cfg['thetas'])})",
                metric="clean test accuracy",
                ours=ours_all,
                baseline=f"all {cfg['n_stages']} SD stages ({proto})",
                baseline_values=base_all,
                higher_is_better=True,
                converged=conv,
                note="pairs are (noise level, seed); seeds share their splits across levels",
            )
        )
    return out
