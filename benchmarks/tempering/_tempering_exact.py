"""Parts (a) and (b) of ``--theory``: exact gaps vs the decomposition, and log(1/eps).

:func:`gap_case` builds the grid chains of one ``(d, D)`` (step :data:`H`, padded by
:data:`PAD`) and returns the exact gaps of ST and MH, the exact restricted gap of ST and
the decomposition bounds; :func:`validate_solvers` checks the sparse eigensolver against
dense; :func:`scaling` fits the gaps against ``D`` (from :data:`FIT_D_MIN`) and ``d``
(:func:`fit`); :func:`tv_case` fits the ST chain's exact TV mixing steps against
``log(1/eps)`` (:data:`EPS`). A helper module: ``_tempering_theory.py`` imports it.
"""

from __future__ import annotations

import math
import time

import numpy as np
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

__all__ = [
    "EPS",
    "FINE_H",
    "FINE_PAD",
    "FIT_D_MIN",
    "MARGIN",
    "PAD",
    "STEP",
    "H",
    "fit",
    "gap_case",
    "scaling",
    "tv_case",
    "validate_solvers",
]


H, PAD, STEP, MARGIN = 1.0, 2.5, 1.0, 2.0
FINE_H, FINE_PAD = 0.25, 5.0
EPS = [10.0**-k for k in range(1, 9)]


FIT_D_MIN = 4.0  # fits in D use the separated regime D >= 4 (D = 2, 3 are hardly bimodal)


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
