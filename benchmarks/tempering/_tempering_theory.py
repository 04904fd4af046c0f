"""Issue 47, item 1: the restricted-gap decomposition for simulated tempering, decided.

Run through ``python benchmarks/tempering/run.py --theory [--quick] [--json PATH] [--plots DIR]``
(this module holds the section; ``tempering.py`` only dispatches to it).

(a) **Exact gaps vs the decomposition.** Two-mode mixture ``0.5 N(-D/2 e_1, I) +
0.5 N(D/2 e_1, I)`` in ``d`` dimensions on one grid rule for every ``d`` (step ``H = 1``,
padded by ``PAD = 2.5``), grid RWMH (proposal scale 1, level ``i`` scale ``1/sqrt(beta_i)``)
and the ST chain of :func:`simulated_tempering_chain` (geometric ladder from ``1/D^2``,
``ceil(2 ln D) + 2`` levels, exact level weights, power tempering). For every ``(d, D)``:
the exact spectral gap of ST and of plain RWMH (MH), the exact restricted gap of ST on
``Omega0 = {(i, x): |x| <= D/2 + 2}`` (``Gap(P^0) / pi(Omega0)``, the identity proved in
:func:`st_decomposition`), and the decomposition bound of
:func:`tempering_decomposition` on ``Omega0`` and on the whole space (component kernels:
the level's RWMH proposal targeting the component; in 1-D also the generic restriction of
the local kernel). Exact eigenvalues:
dense up to 2500 states, deflated ``eigsh`` above (validated against dense on one case);
the restricted gap is validated against :func:`restricted_spectral_gap` where it is
small enough. A finer 1-D grid (``h = 0.25``, pad 5) checks that the grid does not drive
the D-scaling.

(b) **log(1/eps).** Exact total variation of the ST chain from a point mass at the minor
mode's centre at ``beta = 1`` (matrix powers), the first step ``t(eps)`` below
``eps = 1e-1 .. 1e-8``, a straight-line fit of ``t`` against ``log(1/eps)``.

(c) **Simulation** (the paper's ST-MH vs MH): ``0.3 N(-4 e_1, I) + 0.7 N(4 e_1, I)`` in
``d = 2`` and ``4``, 32 chains started alternately at the two centres, RWMH scale
``2.38 / sqrt(d)`` alone or inside ST (SAMS weights learned online, geometric ladder from
``1/64``), the same number of iterations, the first fifth discarded, 5 seeds. Metric: the
absolute error of the mode weight ``P(x_1 > 0) = 0.7``.

Fits: ``log y`` against ``log D`` (polynomial), ``D`` (exponential) and ``D^2`` (Gaussian)
over ``D >= 4``, the best by residual sum of squares; against ``d``: ``d`` (exponential)
vs ``log d``.
Verdict rules: :func:`verdicts` (one entry per claim of the abstract, plus the simulation).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import Row, decide_verdict, paired_test, print_table, verdict_entry
from scipy import stats

from sci_moe.theory.spectral import (
    bimodal_means,
    gaussian_mixture_rwmh,
    restricted_spectral_gap,
    restriction_chain,
    simulated_tempering_chain,
    spectral_gap,
    tempering_decomposition,
    tv_distance,
)

H, PAD, STEP, MARGIN = 1.0, 2.5, 1.0, 2.0
FINE_H, FINE_PAD = 0.25, 5.0
EPS = [10.0**-k for k in range(1, 9)]
SIM_D, SIM_W, SIM_CHAINS = 8.0, (0.3, 0.7), 32
FIT_D_MIN = 4.0  # fits in D use the separated regime D >= 4 (D = 2, 3 are hardly bimodal)


def settings(quick: bool) -> dict:
    if quick:
        return {"Ds": [2.0, 4.0, 6.0], "dims": [1, 2, 3], "d4_max": 0, "sim_iter": 3000,
                "seeds": [0, 1, 2, 3, 4], "sim_dims": [2]}  # fmt: skip
    return {"Ds": [2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0], "dims": [1, 2, 3, 4], "d4_max": 8.0,
            "sim_iter": 20000, "seeds": [0, 1, 2, 3, 4], "sim_dims": [2, 4]}  # fmt: skip


# ------------------------------------------------------------------ (a) exact gaps


def gap_case(d: int, D: float, h: float = H, pad: float = PAD) -> dict:
    t0 = time.perf_counter()
    means = bimodal_means(D, d)
    st = simulated_tempering_chain(means, h=h, step=STEP, pad=pad)
    n, G = st.chain.n, st.points.shape[0]
    x = st.points[np.arange(n) % G]
    omega0 = np.linalg.norm(x, axis=1) <= D / 2 + MARGIN
    mass = float(st.chain.pi[omega0].sum())
    rgap = spectral_gap(restriction_chain(st.chain, omega0.astype(np.int64), 1)) / mass
    gap = spectral_gap(st.chain)
    dec = tempering_decomposition(st, omega0)
    full = tempering_decomposition(st)
    # the generic component kernel (restriction of the local kernel), 1-D only (cost)
    restr = tempering_decomposition(st, omega0, "restriction").bound if d == 1 else None
    rw, _, _ = gaussian_mixture_rwmh(means, h=h, step=STEP, pad=pad)
    out = {
        "d": d,
        "D": D,
        "h": h,
        "states": n,
        "levels": int(st.betas.size),
        "gap_st": gap,
        "rgap_st": rgap,
        "bound": dec.bound,
        "bound_full": full.bound,
        "bound_restriction_kernel": restr,
        "gap_projection": dec.gap_projection,
        "min_component_gap": dec.min_component_gap,
        "escape": dec.escape,
        "omega_mass": mass,
        "gap_mh": spectral_gap(rw),
        "seconds": time.perf_counter() - t0,
    }
    print(
        f"  d={d} D={D:g} h={h:g}: {n} states, gap ST {gap:.4g}, restricted {rgap:.4g}, "
        f"bound {dec.bound:.3g} (ratio {dec.bound / rgap:.3g}), MH {out['gap_mh']:.3g}, "
        f"{out['seconds']:.1f} s",
        flush=True,
    )
    return out


def validate_solvers() -> dict:
    """Dense vs deflated sparse gap, and the restricted-gap identity vs the direct solver."""
    st = simulated_tempering_chain(bimodal_means(6.0, 3), h=H, step=STEP, pad=PAD)
    n, G = st.chain.n, st.points.shape[0]
    dense = spectral_gap(st.chain, method="dense")
    sparse = spectral_gap(st.chain, method="sparse")
    x = st.points[np.arange(n) % G]
    omega0 = np.linalg.norm(x, axis=1) <= 6.0 / 2 + MARGIN
    mass = float(st.chain.pi[omega0].sum())
    ident = spectral_gap(restriction_chain(st.chain, omega0.astype(np.int64), 1)) / mass
    direct = restricted_spectral_gap(st.chain, omega0)
    return {
        "case": "d=3 D=6",
        "states": n,
        "gap_dense": dense,
        "gap_sparse": sparse,
        "rel_diff_gap": abs(sparse - dense) / dense,
        "rgap_identity": ident,
        "rgap_direct": direct,
        "rel_diff_rgap": abs(ident - direct) / direct,
    }


def fit(x, y, kinds=("poly", "exp", "gauss")) -> dict:
    """Least-squares fits of log y against each feature; the best by residual sum of squares."""
    x, ly = np.asarray(x, float), np.log(np.asarray(y, float))
    feats = {"poly": np.log(x), "exp": x, "gauss": x**2}
    out = {}
    for k in kinds:
        r = stats.linregress(feats[k], ly)
        res = ly - (r.intercept + r.slope * feats[k])
        out[k] = {"slope": float(r.slope), "p": float(r.pvalue), "rss": float(res @ res)}
    best = min(kinds, key=lambda k: out[k]["rss"])
    others = [out[k]["rss"] for k in kinds if k != best]
    out["best"] = best
    out["margin"] = float(min(others) / max(out[best]["rss"], 1e-300))
    return out


def scaling(cases: list[dict]) -> dict:
    """Fits in D per d, and in d per D (for the D values every d has)."""
    res: dict = {"D": {}, "d": {}}
    for d in sorted({c["d"] for c in cases}):
        cs = sorted((c for c in cases if c["d"] == d and c["D"] >= FIT_D_MIN), key=lambda c: c["D"])
        if len(cs) >= 3:
            Ds = [c["D"] for c in cs]
            res["D"][d] = {q: fit(Ds, [c[q] for c in cs]) for q in ("rgap_st", "bound", "gap_mh")}
    dims = sorted({c["d"] for c in cases})
    for D in sorted({c["D"] for c in cases if c["D"] >= FIT_D_MIN}):
        cs = sorted((c for c in cases if c["D"] == D), key=lambda c: c["d"])
        if len(cs) == len(dims) and len(cs) >= 3:
            ds = [c["d"] for c in cs]
            res["d"][D] = {
                q: fit(ds, [c[q] for c in cs], ("poly", "exp")) for q in ("rgap_st", "bound")
            }
    return res


# ------------------------------------------------------------------ (b) log(1/eps)


def tv_case(D: float = 8.0, d: int = 1) -> dict:
    st = simulated_tempering_chain(bimodal_means(D, d), h=H, step=STEP, pad=PAD)
    n, G = st.chain.n, st.points.shape[0]
    L = st.betas.size
    x = st.points[np.arange(n) % G]
    dist = np.linalg.norm(x - bimodal_means(D, d)[0], axis=1) + 1e9 * (st.level != L - 1)
    start = int(np.argmin(dist))
    gap_abs = spectral_gap(st.chain, absolute=True)
    n_steps = math.ceil(math.log(1e9 / math.sqrt(st.chain.pi[start])) / gap_abs)
    tv = tv_distance(st.chain, start, n_steps)
    t_eps = [int(np.argmax(tv <= e)) if np.any(tv <= e) else None for e in EPS]
    ok = [(e, t) for e, t in zip(EPS, t_eps, strict=True) if t is not None]
    r = stats.linregress([math.log(1 / e) for e, _ in ok], [t for _, t in ok])
    return {
        "D": D,
        "d": d,
        "states": n,
        "gap_abs": gap_abs,
        "eps": EPS,
        "t_eps": t_eps,
        "slope": float(r.slope),
        "r2": float(r.rvalue**2),
        "p": float(r.pvalue),
        "theory_slope": 1.0 / gap_abs,
    }


# ------------------------------------------------------------------- (c) simulation


def sim_run(d: int, n_iter: int, seed: int) -> dict:
    from sci_moe.sampling.tempering import (
        RWMH,
        SimulatedTempering,
        TemperingConfig,
        masked_mean,
        sample,
    )
    from sci_moe.sampling.tempering import geometric_ladder as torch_ladder

    mu = torch.zeros(2, d, dtype=torch.float64)
    mu[0, 0], mu[1, 0] = -SIM_D / 2, SIM_D / 2
    logw = torch.log(torch.tensor(SIM_W, dtype=torch.float64))

    def log_prob(x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(logw - 0.5 * ((x[:, None, :] - mu[None]) ** 2).sum(-1), dim=1)

    gen = torch.Generator().manual_seed(seed)
    x0 = mu[torch.arange(SIM_CHAINS) % 2] + 0.1 * torch.randn(SIM_CHAINS, d, generator=gen)
    kernel = RWMH(step_size=2.38 / math.sqrt(d))
    burn = n_iter // 5
    xs, _ = sample(kernel, log_prob, x0, n_iter, seed=seed, progress=False)
    ind = (xs[burn:, :, 0] > 0).double().numpy()
    m_mh, se_mh = masked_mean(ind, np.ones(ind.shape, bool))
    L = 7 if d <= 2 else 10
    cfg = TemperingConfig(
        torch_ladder(1.0 / SIM_D**2, L, dtype=torch.float64), kernel=kernel, weights="sams"
    )
    res = SimulatedTempering(log_prob, cfg).run(x0, n_iter, seed=seed + 1000, progress=False)
    ind = (res.x[burn:, :, 0] > 0).double().numpy()
    m_st, se_st = masked_mean(ind, (res.levels[burn:] == L - 1).numpy())
    return {
        "d": d,
        "seed": seed,
        "err_mh": abs(m_mh - SIM_W[1]),
        "se_mh": se_mh,
        "err_st": abs(m_st - SIM_W[1]),
        "se_st": se_st,
    }


# ----------------------------------------------------------------------- verdicts


def verdicts(cases, sc, tvs, sims, sim_dims) -> list[dict]:
    """One verdict per claim of the abstract (rules written here, applied to the run)."""
    out = []
    # 1. the decomposition lower-bounds the restricted gap
    b = [c["bound"] for c in cases]
    g = [c["rgap_st"] for c in cases]
    holds = all(x <= y * (1 + 1e-9) for x, y in zip(b, g, strict=True)) and min(b) > 0
    p = paired_test(b, g)["sign"]
    ratio = [x / y for x, y in zip(b, g, strict=True)]
    out.append(
        verdict_entry(
            "a decomposition theorem lower-bounds the restricted spectral gap of ST with an "
            "arbitrary local sampler on mixtures",
            verdict="reproduced" if holds else "contradicted",
            why=f"our derived bound (constants ours; the paper's not available) is positive and "
            f"below the exact restricted gap in {sum(x <= y for x, y in zip(b, g, strict=True))}"
            f" of {len(b)} (d, D) cases; bound / exact {min(ratio):.3g}-{max(ratio):.3g}; "
            f"sign test over the cases",
            metric="min bound / exact restricted gap",
            ours=min(ratio),
            baseline="exact restricted gap (ratio 1)",
            baseline_value=1.0,
            seeds=1,
            p_value=p,
            converged=True,
            decisive=bool(p < 0.05),
        )
    )
    # 2. restricted gap extends applicability where the usual gap degenerates
    rf = [c["bound"] / c["bound_full"] for c in cases if c["bound_full"] > 0]
    out.append(
        verdict_entry(
            "working with the restricted spectral gap extends the results to settings where "
            "the usual gap is hard to bound or degenerate",
            verdict="not decided",
            why="not testable on finite grid chains: their full gaps never degenerate; the "
            f"restricted bound is {min(rf):.3g}-{max(rf):.3g} times the full-space bound here",
            metric="restricted bound / full-space bound (min)",
            ours=min(rf),
            baseline="full-space decomposition bound",
            baseline_value=1.0,
            seeds=1,
            p_value=None,
            converged=True,
            decisive=False,
        )
    )
    # 3. polynomial in the separation D (the bound and the exact gap), MH not
    fd = sc["D"]
    poly_b = all(fd[d]["bound"]["best"] == "poly" for d in fd)
    poly_g = all(fd[d]["rgap_st"]["best"] == "poly" for d in fd)
    gauss_b = any(fd[d]["bound"]["best"] == "gauss" for d in fd)
    mh_not_poly = all(fd[d]["gap_mh"]["best"] != "poly" for d in fd)
    margin = min(min(fd[d]["bound"]["margin"], fd[d]["rgap_st"]["margin"]) for d in fd)
    pmax = max(fd[d]["bound"]["poly"]["p"] for d in fd)
    slopes = [fd[d]["bound"]["poly"]["slope"] for d in fd]
    if poly_b and poly_g:
        v = "reproduced"
    elif gauss_b:
        v = "contradicted"
    else:
        v = "not decided"
    out.append(
        verdict_entry(
            "the ST + RWMH complexity bound scales polynomially with the separation D",
            verdict=v,
            why=f"best of poly/exp/exp(D^2) fits over D per d={sorted(fd)}: bound "
            f"{[fd[d]['bound']['best'] for d in fd]}, exact restricted gap "
            f"{[fd[d]['rgap_st']['best'] for d in fd]}, plain MH "
            f"{[fd[d]['gap_mh']['best'] for d in fd]}; "
            f"bound ~ D^({min(slopes):.2f}..{max(slopes):.2f});"
            f" RSS margin over the next model {margin:.2g} (decisive needs >= 2 and MH not poly)",
            metric="log-log slope of the bound in D (most negative over d)",
            ours=min(slopes),
            baseline="plain MH: slope of log gap in D^2 (most negative over d)",
            baseline_value=min(fd[d]["gap_mh"]["gauss"]["slope"] for d in fd),
            seeds=1,
            p_value=pmax,
            converged=True,
            decisive=bool(v != "not decided" and margin >= 2 and mh_not_poly and pmax < 0.05),
        )
    )
    # 4. logarithmic in 1/eps
    lin = all(t["r2"] >= 0.99 and t["p"] < 0.05 for t in tvs)
    out.append(
        verdict_entry(
            "the complexity scales logarithmically with 1/eps (TV accuracy)",
            verdict="reproduced" if lin else "not decided",
            why="exact TV of the ST chain from a point mass at the minor mode: steps to reach "
            "eps = 1e-1..1e-8 against log(1/eps), R^2 "
            + ", ".join(f"{t['r2']:.4f} (d={t['d']}, D={t['D']:g})" for t in tvs)
            + "; slope vs the spectral rate 1/gap_abs "
            + ", ".join(f"{t['slope']:.3g}/{t['theory_slope']:.3g}" for t in tvs),
            metric="fitted steps per unit log(1/eps)",
            ours=tvs[0]["slope"],
            baseline="1 / absolute spectral gap (exact)",
            baseline_value=tvs[0]["theory_slope"],
            seeds=1,
            p_value=max(t["p"] for t in tvs),
            converged=True,
            decisive=bool(lin and max(t["p"] for t in tvs) < 0.05),
        )
    )
    # 5. exponential in d
    fdd = sc["d"]
    if fdd:
        Dref = max(fdd)
        fg, fb = fdd[Dref]["rgap_st"], fdd[Dref]["bound"]
        if fg["best"] == "exp" and fg["margin"] >= 2:
            v = "reproduced"
        elif fg["best"] == "poly" and fg["margin"] >= 2:
            v = "contradicted"
        else:
            v = "not decided"
        ok = v != "not decided" and fg[fg["best"]]["p"] < 0.05
        out.append(
            verdict_entry(
                "the complexity scales exponentially with the dimension d",
                verdict=v,
                why=f"at D={Dref:g}, d={sorted({c['d'] for c in cases})}: exact restricted gap "
                f"best fit {fg['best']} (RSS margin {fg['margin']:.2g}; log-gap slope per d "
                f"{fg['exp']['slope']:.3g}, per log d {fg['poly']['slope']:.3g}); our bound best "
                f"fit {fb['best']} (slope per d {fb['exp']['slope']:.3g}). The claim is about an "
                "upper bound on complexity; judged here on whether the exact gap itself decays "
                "exponentially in d (same grid rule for every d, 4 points only)",
                metric="slope of log exact restricted gap per unit d",
                ours=fg["exp"]["slope"],
                baseline="our decomposition bound: slope of log bound per unit d",
                baseline_value=fb["exp"]["slope"],
                seeds=1,
                p_value=fg[fg["best"]]["p"],
                converged=True,
                decisive=bool(ok),
            )
        )
    # 6. simulation: ST-MH beats MH, 5 seeds, at the largest d
    d = max(sim_dims)
    rs = [r for r in sims if r["d"] == d]
    conv = all(r["err_st"] <= 3 * r["se_st"] for r in rs)
    out.append(
        decide_verdict(
            f"simulated tempering + RWMH samples a multimodal Gaussian mixture better than "
            f"RWMH (paper's simulation; d={d}, D={SIM_D:g}, weights 0.3/0.7)",
            metric="|error| of the mode weight P(x_1 > 0)",
            ours=[r["err_st"] for r in rs],
            baseline="RWMH alone, same iterations",
            baseline_values=[r["err_mh"] for r in rs],
            higher_is_better=False,
            converged=conv,
            test="t",
            note="converged = ST within 3 standard errors of the truth on every seed",
        )
    )
    return out


# --------------------------------------------------------------------------- report


def plot(cases: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = sorted({c["d"] for c in cases if c["h"] == H})
    fig, axes = plt.subplots(1, len(dims), figsize=(3.4 * len(dims), 3.4), sharey=True)
    for ax, d in zip(np.atleast_1d(axes), dims, strict=True):
        cs = sorted((c for c in cases if c["d"] == d and c["h"] == H), key=lambda c: c["D"])
        D = [c["D"] for c in cs]
        ax.loglog(D, [c["rgap_st"] for c in cs], "s-", label="ST restricted gap (exact)")
        ax.loglog(D, [c["gap_st"] for c in cs], "s:", label="ST gap (exact)", alpha=0.6)
        ax.loglog(D, [c["bound"] for c in cs], "d--", label="decomposition bound")
        ax.loglog(D, [c["gap_mh"] for c in cs], "o-", label="MH gap (exact)")
        ax.set_title(f"d = {d}")
        ax.set_xlabel("separation D")
        ax.set_xticks(D, [f"{x:g}" for x in D])
        ax.minorticks_off()
    np.atleast_1d(axes)[0].set_ylabel("gap")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_theory(quick: bool, plots: Path | None) -> tuple[list[Row], list[dict], dict]:
    """Run (a)-(c); returns the rows, the verdicts and the details for the JSON."""
    s = settings(quick)
    rows: list[Row] = []
    print("(a) exact gaps vs the decomposition bound", flush=True)
    cases = []
    for d in s["dims"]:
        for D in s["Ds"]:
            if d == 4 and D > s["d4_max"]:
                continue
            cases.append(gap_case(d, D))
    fine = [gap_case(1, D, FINE_H, FINE_PAD) for D in s["Ds"]]
    val = validate_solvers() if not quick else None
    if val:
        print(f"  solver check {val}", flush=True)
    table = []
    for c in cases + fine:
        case = f"d={c['d']} D={c['D']:g} h={c['h']:g}"
        table.append(
            [case, c["levels"], c["states"], c["gap_mh"], c["gap_st"], c["rgap_st"], c["bound"],
             c["bound"] / c["rgap_st"], c["gap_projection"], c["min_component_gap"]]
        )  # fmt: skip
        rows += [
            Row(f"{case} MH", "spectral_gap", c["gap_mh"], "1"),
            Row(f"{case} ST", "spectral_gap", c["gap_st"], "1", f"{case} MH",
                c["gap_st"] / c["gap_mh"]),
            Row(f"{case} ST", "restricted_gap", c["rgap_st"], "1"),
            Row(f"{case} ST", "st_bound", c["bound"], "1", f"{case} ST", c["bound"] / c["rgap_st"]),
            Row(f"{case} ST", "st_bound_full_space", c["bound_full"], "1"),
            *([Row(f"{case} ST", "st_bound_restriction_kernel", c["bound_restriction_kernel"], "1")]
              if c["bound_restriction_kernel"] is not None else []),
            Row(f"{case} ST", "projection_gap", c["gap_projection"], "1"),
            Row(f"{case} ST", "min_component_gap", c["min_component_gap"], "1"),
        ]  # fmt: skip
    print_table(
        [
            "case",
            "L",
            "states",
            "gap MH",
            "gap ST",
            "rgap ST",
            "bound",
            "bound/rgap",
            "gbar",
            "lam",
        ],
        table,
        title="exact gaps and the restricted-gap decomposition bound (Omega0: |x| <= D/2 + 2)",
    )
    sc = scaling(cases)
    sc_fine = scaling(fine)
    for d, f in sc["D"].items():
        for q, r in f.items():
            print(f"  fit in D, d={d}, {q}: best {r['best']}, " + ", ".join(
                f"{k} slope {r[k]['slope']:.3g}" for k in ("poly", "exp", "gauss")))  # fmt: skip
            rows.append(Row(f"fit D d={d} {q}", "loglog_slope", r["poly"]["slope"], "1"))
            rows.append(Row(f"fit D d={d} {q}", "log_slope_per_D2", r["gauss"]["slope"], "1"))
    for D, f in sc["d"].items():
        for q, r in f.items():
            print(f"  fit in d, D={D:g}, {q}: best {r['best']}, exp slope {r['exp']['slope']:.3g},"
                  f" poly slope {r['poly']['slope']:.3g}")  # fmt: skip
            rows.append(Row(f"fit d D={D:g} {q}", "log_slope_per_d", r["exp"]["slope"], "1"))
    print("(b) TV vs log(1/eps)", flush=True)
    tvs = [tv_case(8.0 if not quick else 6.0, 1), tv_case(6.0, 2)]
    for t in tvs:
        print(f"  d={t['d']} D={t['D']:g}: t(eps) {t['t_eps']}, slope {t['slope']:.4g} "
              f"(1/gap_abs {t['theory_slope']:.4g}), R^2 {t['r2']:.5f}")  # fmt: skip
        rows.append(Row(f"tv d={t['d']} D={t['D']:g} ST", "steps_per_log_inv_eps", t["slope"],
                        "steps", None, None))  # fmt: skip
    print("(c) simulation, 5 seeds", flush=True)
    sims = []
    for d in s["sim_dims"]:
        for seed in s["seeds"]:
            r = sim_run(d, s["sim_iter"], seed)
            print(f"  d={d} seed={seed}: |err| MH {r['err_mh']:.4f} (se {r['se_mh']:.4f}), "
                  f"ST {r['err_st']:.4f} (se {r['se_st']:.4f})", flush=True)  # fmt: skip
            sims.append(r)
        for who in ("mh", "st"):
            vals = [r[f"err_{who}"] for r in sims if r["d"] == d]
            rows.append(Row(f"sim d={d} D={SIM_D:g} {who.upper()}", "mode_weight_abs_error_mean",
                            float(np.mean(vals)), "1"))  # fmt: skip
    ver = verdicts(cases, sc, tvs, sims, s["sim_dims"])
    for v in ver:
        print(f"  VERDICT {v['verdict']:>12} decisive={v['decisive']}: {v['claim']}")
    if plots is not None:
        plot(cases, plots / "tempering_theory_gaps.png")
    details = {
        "settings": {**s, "h": H, "pad": PAD, "step": STEP, "omega0_margin": MARGIN},
        "cases": cases,
        "fine_1d": fine,
        "fits": _jsonable(sc),
        "fits_fine_1d": _jsonable(sc_fine),
        "solver_check": val,
        "tv": tvs,
        "simulation": sims,
    }
    return rows, ver, details


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    return o


def main_theory(args) -> int:
    """``tempering.py --theory``: run, print, write the JSON (with ``verdicts``) and plot."""
    from _common import OtherLoad, machine_info, verdict_entry, write_json_doc

    other = OtherLoad()
    t0 = time.perf_counter()
    machine = machine_info(seed=args.seed, quick=args.quick, section="theory (issue 47)")
    print(f"tempering --theory: {machine['cpu']}, seed {args.seed}, git {machine['git']}")
    rows, ver, details = run_theory(args.quick, args.plots)
    machine["contention"] = other.report()
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.json is not None:
        doc = {
            "benchmark": "tempering_theory",
            "machine": machine,
            "rows": [r.__dict__ for r in rows],
            "verdicts": [verdict_entry(**v) for v in ver],
            "details": details,
        }
        write_json_doc(args.json, doc)
        print(f"wrote {args.json}")
    return 0
