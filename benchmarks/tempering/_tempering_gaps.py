"""Part 1 of ``run.py``: exact spectral gaps of grid RWMH and simulated tempering.

For every separation ``D`` of the 1-D two-mode mixture, :func:`exact_gaps` builds the grid
chains of :mod:`sci_moe.theory.spectral` and returns their exact gaps and the three
decomposition lower bounds; :func:`report_gaps` prints the table and appends the rows,
:func:`plot_gaps` draws gap vs ``D``. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from _common import Row, print_table

from sci_moe.theory.spectral import (
    bimodal_means,
    check_bound,
    gaussian_mixture_rwmh,
    simulated_tempering_chain,
    spectral_gap,
)

__all__ = [
    "BOUND_NAMES",
    "STEP",
    "H",
    "exact_gaps",
    "plot_gaps",
    "report_gaps",
]


H, STEP = 0.25, 1.0  # grid step and RWMH proposal scale of the exact chains
BOUND_NAMES = ("martin-randall", "jstv", "soft")


# ------------------------------------------------------------------ part 1: exact gaps


def exact_gaps(Ds: list[float]) -> list[dict]:
    out = []
    for D in Ds:
        t0 = time.perf_counter()
        means = bimodal_means(D, 1)
        rw, _, _ = gaussian_mixture_rwmh(means, 1.0, None, h=H, step=STEP)
        g_rw = spectral_gap(rw)
        st = simulated_tempering_chain(means, 1.0, None, h=H, step=STEP)
        g_st = spectral_gap(st.chain)
        bounds = {}
        for name in BOUND_NAMES:
            part = st.soft_weights if name == "soft" else st.labels
            bc = check_bound(st.chain, part, name, exact_gap=g_st)
            bounds[name] = (bc.bound, bc.holds)
        out.append(
            {
                "D": D,
                "n_rwmh": rw.n,
                "n_st": st.chain.n,
                "levels": st.betas.size,
                "gap_rwmh": g_rw,
                "gap_st": g_st,
                "bounds": bounds,
                "seconds": time.perf_counter() - t0,
            }
        )
    return out


def report_gaps(res: list[dict], rows: list[Row]) -> None:
    table = []
    for r in res:
        D, b = r["D"], r["bounds"]
        table.append(
            [
                f"D={D:g}",
                r["levels"],
                r["n_st"],
                r["gap_rwmh"],
                r["gap_st"],
                r["gap_st"] / r["gap_rwmh"],
                *[b[n][0] / r["gap_st"] for n in BOUND_NAMES],
                "yes" if all(b[n][1] for n in BOUND_NAMES) else "NO",
            ]
        )
        case = f"1d D={D:g}"
        rw_name = f"{case} RWMH"
        rows.append(Row(rw_name, "spectral_gap", r["gap_rwmh"], "1"))
        x_rw = r["gap_st"] / r["gap_rwmh"]
        rows.append(Row(f"{case} ST", "spectral_gap", r["gap_st"], "1", rw_name, x_rw))
        for n in BOUND_NAMES:
            rows.append(
                Row(
                    f"{case} ST bound {n}",
                    "gap_lower_bound",
                    b[n][0],
                    "1",
                    f"{case} ST",
                    b[n][0] / r["gap_st"],
                )
            )
    headers = ["case", "L", "states", "gap RWMH", "gap ST", "ST/RWMH"]
    headers += [f"{n}/gap" for n in ("MR", "JSTV", "soft")] + ["holds"]
    print_table(
        headers,
        table,
        title=f"exact spectral gaps, 1-D equal-weight mixture (h={H}, step={STEP}); "
        "bound/gap = lower bound on the ST gap / exact ST gap",
    )
    if len(res) >= 2:
        lD = np.log([r["D"] for r in res])
        s_st = np.polyfit(lD, np.log([r["gap_st"] for r in res]), 1)[0]
        D2 = np.array([r["D"] ** 2 for r in res])
        c_rw = np.polyfit(D2, np.log([r["gap_rwmh"] for r in res]), 1)[0]
        print(
            f"fits: gap_ST ~ D^{s_st:.2f} (log-log slope); "
            f"gap_RWMH ~ exp({c_rw:.3f} D^2) (theory for well separated modes: -1/8 = -0.125)"
        )
        rows.append(Row("1d fit ST", "loglog_slope_gap_vs_D", float(s_st), "1"))
        rows.append(Row("1d fit RWMH", "log_gap_per_D2", float(c_rw), "1"))


def plot_gaps(res: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    D = [r["D"] for r in res]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.loglog(D, [r["gap_rwmh"] for r in res], "o-", label="RWMH (exact)")
    ax.loglog(D, [r["gap_st"] for r in res], "s-", label="ST + RWMH (exact)")
    for n, m in zip(BOUND_NAMES, ("v--", "^--", "d--"), strict=True):
        ax.loglog(D, [max(r["bounds"][n][0], 1e-300) for r in res], m, label=f"{n} bound")
    ax.set_xlabel("separation D")
    ax.set_ylabel("spectral gap")
    ax.set_title("1-D two-mode mixture: gap vs separation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
