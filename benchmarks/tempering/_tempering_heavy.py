"""(d) of ``--theory``: heavy tails, where the usual spectral gap degenerates.

The abstract: working with the restricted spectral gap "extends the results to settings
where the usual gap [...] degenerates". On the Gaussian grid chains of (a) the full gap never
degenerates, so that claim needs a target whose local chain loses its spectral gap. Here:
simulated tempering + grid RWMH on a two-component **Student-t** mixture (``dof`` 1.5,
scale 1, means at +-D/2; component tempering, four levels), whose heavy tails make RWMH
not geometrically ergodic: as the grid is padded further (``pad``, in scales), the
chain's full spectral gap falls towards zero, while its restricted gap on a fixed ball
:math:`\\Omega^0 = \\{|x| \\le R\\}` does not. For each padding, exactly (no seeds): the full
spectral gap, the exact :math:`\\Omega^0`-restricted gap, and the decomposition bound of
:func:`~sci_moe.theory.spectral.tempering_decomposition` on :math:`\\Omega^0` and on the
whole space (the "usual", full-gap version). A helper module: ``_tempering_theory.py``
imports it.
"""

from __future__ import annotations

import numpy as np
from _common import verdict_entry
from scipy import stats

from sci_moe.theory.spectral import (
    restricted_spectral_gap,
    simulated_tempering_chain,
    spectral_gap,
    tempering_decomposition,
)

__all__ = [
    "HEAVY",
    "heavy_case",
    "heavy_fit",
    "heavy_verdict",
    "plot_heavy",
]

#: The settings of (d); ``pads`` is the sweep (``quick_pads`` for ``--quick``).
HEAVY = {
    "D": 6.0,
    "dof": 1.5,
    "sigma": 1.0,
    "betas": (0.1, 0.25, 0.5, 1.0),
    "h": 0.25,
    "step": 1.0,
    "radius": 8.0,
    "pads": (10.0, 20.0, 40.0, 80.0, 160.0, 320.0),
    "quick_pads": (10.0, 20.0, 40.0),
}
#: The verdict's thresholds: the full gap must fall by at least ``FALL`` over the sweep
#: (and resolvably: its log-log slope's p < 0.05) while the restricted bound changes by
#: less than ``STEADY`` (relative).
FALL, STEADY = 10.0, 0.10


def heavy_case(pad: float, s: dict = HEAVY) -> dict:
    """The exact quantities of one padding (see the module docstring)."""
    D = s["D"]
    st = simulated_tempering_chain(
        [[-D / 2], [D / 2]],
        sigma=s["sigma"],
        betas=np.asarray(s["betas"]),
        h=s["h"],
        step=s["step"],
        tempering="component",
        pad=pad,
        dof=s["dof"],
    )
    n = st.chain.n
    x = st.points[np.arange(n) % st.points.shape[0], 0]
    omega0 = np.abs(x) <= s["radius"]
    restricted = tempering_decomposition(st, omega0)
    full = tempering_decomposition(st, None)
    return {
        "pad": float(pad),
        "half_width": float(np.abs(st.points[:, 0]).max()),
        "states": int(n),
        "omega_states": int(omega0.sum()),
        "omega_mass": float(st.chain.pi[omega0].sum() / st.chain.pi.sum()),
        "full_gap": float(spectral_gap(st.chain)),
        "restricted_gap": float(restricted_spectral_gap(st.chain, omega0)),
        "bound": float(restricted.bound),
        "bound_full": float(full.bound),
    }


def heavy_fit(cases: list[dict]) -> dict:
    """Per quantity: the least-squares slope of its log against log ``pad``, the slope's
    two-sided p-value (``scipy.stats.linregress``), and first / last over the sweep."""
    pads = np.log([c["pad"] for c in cases])
    out = {}
    for q in ("full_gap", "restricted_gap", "bound", "bound_full"):
        v = np.array([c[q] for c in cases])
        r = stats.linregress(pads, np.log(v))
        out[q] = {"slope": float(r.slope), "p": float(r.pvalue), "fall": float(v[0] / v[-1])}
    return out


def heavy_verdict(cases: list[dict], fit: dict) -> dict:
    """The claim "the restricted gap extends the results where the usual gap degenerates".

    Reproduced when, over the sweep, the full gap falls at least :data:`FALL`-fold with a
    resolved negative log-log slope (p < 0.05), the restricted-gap bound changes by less
    than :data:`STEADY` and stays positive and below the exact restricted gap at every
    padding; contradicted when the restricted bound falls with it (by :data:`FALL` or
    more); otherwise not decided. Exact computations: decisive when resolved (p < 0.05)
    with at least four paddings.
    """
    f, b = fit["full_gap"], fit["bound"]
    bounds = [c["bound"] for c in cases]
    steady = max(bounds) / min(bounds) - 1.0 < STEADY if min(bounds) > 0 else False
    below = all(c["bound"] <= c["restricted_gap"] * (1 + 1e-9) for c in cases)
    degenerates = f["slope"] < 0 and f["p"] < 0.05 and f["fall"] >= FALL
    if degenerates and steady and below:
        verdict = "reproduced"
    elif b["fall"] >= FALL:
        verdict = "contradicted"
    else:
        verdict = "not decided"
    pads = [c["pad"] for c in cases]
    why = (
        f"ST + RWMH on a Student-t mixture (dof {HEAVY['dof']:g}, D {HEAVY['D']:g}), grid "
        f"padded {min(pads):g}-{max(pads):g} scales: the full spectral gap falls "
        f"{f['fall']:.3g}-fold (log-log slope {f['slope']:.3g}, p = {f['p']:.2g}) and the "
        f"full-space decomposition bound {fit['bound_full']['fall']:.3g}-fold, while the "
        f"exact restricted gap on |x| <= {HEAVY['radius']:g} changes "
        f"{abs(1 - 1 / fit['restricted_gap']['fall']):.1%} and the restricted bound "
        f"{max(bounds) / min(bounds) - 1:.1%}, below the exact restricted gap at "
        f"{sum(c['bound'] <= c['restricted_gap'] for c in cases)} of {len(cases)} paddings"
    )
    return verdict_entry(
        "working with the restricted spectral gap extends the results to settings where "
        "the usual gap is hard to bound or degenerate",
        verdict=verdict,
        why=why,
        metric="fold change of the restricted-gap bound over the padding sweep",
        ours=float(max(bounds) / min(bounds)) if min(bounds) > 0 else 0.0,
        baseline="fold fall of the full spectral gap over the sweep",
        baseline_value=f["fall"],
        seeds=1,
        p_value=f["p"],
        converged=True,
        decisive=bool(verdict != "not decided" and f["p"] < 0.05 and len(cases) >= 4),
    )


def plot_heavy(cases: list[dict], path) -> None:
    """The four quantities against the padding, log-log (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pads = [c["pad"] for c in cases]
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for q, label, style in (
        ("full_gap", "spectral gap (full space)", "o-"),
        ("bound_full", "decomposition bound, full space", "s--"),
        ("restricted_gap", "restricted gap on |x| <= R (exact)", "o-"),
        ("bound", "decomposition bound on |x| <= R", "s--"),
    ):
        ax.loglog(pads, [c[q] for c in cases], style, label=label)
    ax.set_xlabel("grid padding (scales)")
    ax.set_ylabel("gap")
    ax.set_title("ST + RWMH, Student-t mixture: full vs restricted gap")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
