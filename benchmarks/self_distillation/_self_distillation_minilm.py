"""The linear-probe demo of ``run.py`` on real features (MiniLM sentence embeddings).

:func:`run_minilm` runs two-stage SD of BCE linear probes (hard and soft labels, learned
and fixed bias) on all-MiniLM-L6-v2 embeddings of the 20-Newsgroups excerpt (atheism vs
space) with injected label noise, tuned on a validation split, appends the test errors
per stage and prints the table. A helper module: ``run.py``
imports it.
"""

from __future__ import annotations

import math
import time

import numpy as np
from _common import (
    Row,
    print_table,
)

from sci_moe.data.minilm import cached_embeddings
from sci_moe.data.newsgroups import newsgroup_sentences
from sci_moe.theory.self_distillation import (
    EmpiricalSDConfig,
    probe_sd_experiment,
)

__all__ = [
    "run_minilm",
]


def run_minilm(args, rows, quick):
    texts, labels, groups = newsgroup_sentences()
    t0 = time.perf_counter()
    X = cached_embeddings(texts, args.minilm_cache, progress=False)
    embed_s = time.perf_counter() - t0
    rho = float(labels.mean())
    print(
        f"\nMiniLM demo: {len(texts)} sentences from {len(set(groups))} posts, "
        f"features {X.shape}, fraction sci.space {rho:.3f}, embeddings {embed_s:.1f} s "
        f"({args.minilm_cache})",
        flush=True,
    )
    rows.append(Row("minilm", "n_sentences", len(texts), "1"))
    rows.append(Row("minilm", "embed_or_load_s", embed_s, "s"))
    seeds = [args.seed + s for s in (range(2) if quick else range(6))]
    thetas = [0.3] if quick else [0.2, 0.4]
    lams = (-1.0, 0.0, 1.0, 2.0, 3.0) if quick else (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
    betas = (1.0, 4.0, 16.0) if quick else (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    table = []
    for theta in thetas:
        for mode, learn in [("hard", True), ("soft", True), ("hard", False)]:
            config = EmpiricalSDConfig(
                n_stages=2,
                loss="bce",
                labels=mode,
                learn_bias=learn,
                log10_lambdas=lams,
                betas=betas,
            )
            t0 = time.perf_counter()
            err, res = probe_sd_experiment(X, labels, theta, seeds, config, 0.3, groups=groups)
            secs = time.perf_counter() - t0
            mean = err.mean(axis=0)
            sem = err.std(axis=0, ddof=1) / math.sqrt(len(seeds))
            stopped = np.array([e[r.best_stage] for e, r in zip(err, res, strict=True)])
            d = err[:, -1] - err[:, 0]
            case = f"minilm theta={theta:g} {mode} bias={'learned' if learn else 'fixed'}"
            for t in range(3):
                rows.append(Row(case, f"test_error_stage{t}", float(mean[t]), "1"))
                rows.append(Row(case, f"test_error_stage{t}_sem", float(sem[t]), "1"))
            rows.append(Row(case, "test_error_val_stopped", float(stopped.mean()), "1"))
            rows.append(Row(case, "stage2_minus_stage0", float(d.mean()), "1"))
            d_sem = float(d.std(ddof=1) / math.sqrt(len(d)))
            rows.append(Row(case, "stage2_minus_stage0_sem", d_sem, "1"))
            g = float(mean[0] / mean[-1])
            rows.append(Row(case, "gain", g, "1", "stage 0 (tuned probe)", g))
            rows.append(Row(case, "fit_s", secs, "s"))
            table.append(
                [
                    theta,
                    mode,
                    "learned" if learn else "fixed",
                    f"{mean[0]:.4f}±{sem[0]:.4f}",
                    f"{mean[1]:.4f}±{sem[1]:.4f}",
                    f"{mean[2]:.4f}±{sem[2]:.4f}",
                    f"{stopped.mean():.4f}",
                    f"{d.mean():+.4f}±{d_sem:.4f}",
                    f"{secs:.0f}",
                ]
            )
            print(f"  theta={theta} {mode} learn_bias={learn}: {secs:.1f} s", flush=True)
    print_table(
        ["theta", "labels", "bias", "stage 0", "stage 1", "stage 2", "val-stopped", "2 - 0", "s"],
        table,
        title=(
            f"MiniLM linear probes, atheism vs space sentences (clean test error, mean ± s.e. "
            f"over {len(seeds)} seeds; test posts held out)"
        ),
    )
