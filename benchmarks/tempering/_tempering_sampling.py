"""Part 2 of ``run.py``: RWMH, simulated and parallel tempering on two-mode mixtures.

:func:`run_sampling` runs the three contestants on ``0.3 N(-D/2 e_1, I) + 0.7 N(D/2 e_1, I)``
(``D = 8``) in ``d`` dimensions at a fixed number of log-density evaluations;
:func:`report_sampling` prints the table and appends the rows, :func:`plot_sampling` draws
the errors. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch
from _common import Row, print_table

from sci_moe.sampling.tempering import (
    RWMH,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    effective_sample_size,
    masked_mean,
    sample,
)
from sci_moe.sampling.tempering import geometric_ladder as torch_ladder

__all__ = [
    "N_CHAINS",
    "SEP",
    "W_MAJOR",
    "W_MINOR",
    "make_target",
    "plot_sampling",
    "report_sampling",
    "run_sampling",
]


N_CHAINS = 64
SEP, W_MINOR, W_MAJOR = 8.0, 0.3, 0.7


# ------------------------------------------------------------------- part 2: sampling


def make_target(d: int):
    mu = torch.zeros(2, d, dtype=torch.float64)
    mu[0, 0], mu[1, 0] = -SEP / 2, SEP / 2
    logw = torch.tensor([math.log(W_MINOR), math.log(W_MAJOR)], dtype=torch.float64)

    def log_prob(x: torch.Tensor) -> torch.Tensor:
        sq = ((x[:, None, :] - mu[None]) ** 2).sum(-1)
        return torch.logsumexp(logw - 0.5 * sq, dim=1)

    return log_prob, mu


def run_sampling(d: int, n_iter: int, seed: int) -> dict:
    log_prob, mu = make_target(d)
    L = 7 if d <= 2 else 12
    betas = torch_ladder(1.0 / SEP**2, L, dtype=torch.float64)
    kernel = RWMH(step_size=2.38 / math.sqrt(d))
    gen = torch.Generator().manual_seed(seed)
    x0 = mu[torch.arange(N_CHAINS) % 2] + 0.1 * torch.randn(N_CHAINS, d, generator=gen)
    out = {"L": L}

    t0 = time.perf_counter()
    xs, _ = sample(kernel, log_prob, x0, n_iter, seed=seed, progress=False)
    wall = time.perf_counter() - t0
    ind = (xs[..., 0] > 0).double().numpy()
    ess = effective_sample_size(ind)
    out["RWMH"] = _summ(ind.mean(), np.sqrt(ind.mean() * (1 - ind.mean()) / ess), ess, wall)
    out["RWMH"]["evals"] = N_CHAINS * n_iter

    cfg = TemperingConfig(betas, kernel=kernel, weights="sams")
    res = SimulatedTempering(log_prob, cfg).run(x0, n_iter, seed=seed + 1, progress=False)
    ind = (res.x[..., 0] > 0).double().numpy()
    mask = (res.levels == L - 1).numpy()
    m, se = masked_mean(ind, mask)
    ess = m * (1 - m) / se**2 if se > 0 else float("nan")
    out["ST"] = _summ(m, se, ess, res.wall_time)
    out["ST"]["evals"] = N_CHAINS * n_iter
    out["ST"]["target_level_fraction"] = float(mask.mean())

    M = N_CHAINS // L
    pt_cfg = TemperingConfig(betas, kernel=kernel)
    res = ParallelTempering(log_prob, pt_cfg).run(x0[:M], n_iter, seed=seed + 2, progress=False)
    cold = res.x[:, torch.arange(M) * L + L - 1, 0]  # (T, M) positions at beta = 1
    ind = (cold > 0).double().numpy()
    ess = effective_sample_size(ind)
    out["PT"] = _summ(ind.mean(), np.sqrt(ind.mean() * (1 - ind.mean()) / ess), ess, res.wall_time)
    out["PT"]["evals"] = M * L * n_iter
    return out


def _summ(mean: float, se: float, ess: float, wall: float) -> dict:
    return {
        "estimate": float(mean),
        "error": float(abs(mean - W_MAJOR)),
        "stderr": float(se),
        "ess": float(ess),
        "wall_s": float(wall),
        "ess_per_s": float(ess / wall),
    }


def report_sampling(results: dict[int, dict], n_iter: int, rows: list[Row]) -> None:
    table = []
    for d, out in results.items():
        case = f"{d}d D={SEP:g} w=0.3/0.7"
        base = out["RWMH"]
        for who in ("RWMH", "ST", "PT"):
            r = out[who]
            e_ratio = base["error"] / r["error"] if who != "RWMH" and r["error"] > 0 else None
            s_ratio = r["ess_per_s"] / base["ess_per_s"] if who != "RWMH" else None
            table.append(
                [
                    case,
                    who,
                    r["evals"],
                    r["estimate"],
                    r["error"],
                    r["stderr"],
                    r["error"] / r["stderr"] if r["stderr"] > 0 else None,
                    r["ess"],
                    r["wall_s"],
                    r["ess_per_s"],
                    e_ratio,
                    s_ratio,
                ]
            )
            name = f"{case} {who}"
            vs = None if who == "RWMH" else f"{case} RWMH"
            rows.append(Row(name, "mode_weight_error", r["error"], "1", vs, e_ratio))
            rows.append(Row(name, "mode_weight_stderr", r["stderr"], "1"))
            rows.append(Row(name, "ess_mode_indicator", r["ess"], "samples"))
            rows.append(Row(name, "ess_per_s", r["ess_per_s"], "1/s", vs, s_ratio))
            rows.append(Row(name, "wall_time", r["wall_s"], "s"))
    headers = ["case", "sampler", "evals", "P(x1>0)", "|err|", "stderr", "err/se", "ESS"]
    headers += ["wall s"]
    print_table(
        [*headers, "ESS/s", "x err", "x ESS/s"],
        table,
        title=f"sampling: mode weight (exact 0.7), {n_iter} iterations, fixed budget of "
        f"{N_CHAINS} x {n_iter} log-density evaluations (PT: {N_CHAINS}//L systems); "
        "x = vs RWMH, > 1 better",
    )
    print(
        "  err/se >> 3 means the chains have not mixed between the modes: the stderr (and "
        "ESS) then\n  reflect only the run length (Sokal window), not real mixing."
    )
    for d, out in results.items():
        print(
            f"  {d}-D: L={out['L']}, ST time at beta=1: "
            f"{100 * out['ST']['target_level_fraction']:.1f}% of the samples"
        )


def plot_sampling(results: dict[int, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    who = ("RWMH", "ST", "PT")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    width = 0.25
    for k, (d, out) in enumerate(results.items()):
        xs = np.arange(len(who)) + (k - 0.5) * width
        axes[0].bar(
            xs,
            [out[w]["error"] for w in who],
            width,
            yerr=[out[w]["stderr"] for w in who],
            label=f"{d}-D",
        )
        axes[1].bar(xs, [max(out[w]["ess_per_s"], 1e-3) for w in who], width, label=f"{d}-D")
    for ax, t in zip(axes, ("|mode-weight error|", "ESS/s of mode indicator"), strict=True):
        ax.set_xticks(np.arange(len(who)), who)
        ax.set_title(t)
        ax.legend(fontsize=8)
    axes[1].set_yscale("log")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
