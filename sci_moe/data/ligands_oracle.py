"""How much information a conformer ensemble carries about each target: the oracle gap.

For every target, the error of predicting the molecule's label by the *exact* value of a
single conformer (an ideal single-conformer model):

* ``mae_lowest``: the lowest-GFN2-energy conformer's value;
* ``mae_random``: a uniformly random conformer's value, as the expectation over the
  conformers (no sampling noise): :math:`\\frac1M \\sum_i \\frac1{C_i} \\sum_c |y_{ic} - y_i|`;

each also relative to the target's standard deviation over molecules (``rel_*``). A gap
near 0 (the NCI set's Boltzmann labels) leaves no room for ensemble models; a large one
(ensemble minima / maxima) does. Works on any :class:`MoleculeSet`.
"""

from __future__ import annotations

import numpy as np

from .molecule_set_store import MoleculeSet

__all__ = ["oracle_gap", "target_statistics"]


def oracle_gap(ms: MoleculeSet) -> dict[str, dict[str, float]]:
    """Per target: MAE of the lowest-energy / a random conformer's exact value.

    Parameters
    ----------
    ms : MoleculeSet

    Returns
    -------
    dict
        ``{target: {"std", "mae_lowest", "mae_random", "rel_lowest", "rel_random"}}``;
        ``rel_* = mae_* / std`` (NaN when the target is constant).
    """
    low = ms.lowest_energy_targets()
    out = {}
    for t, name in enumerate(ms.target_names):
        y = ms.targets[:, t]
        rnd = np.array(
            [
                np.abs(ms.conf_targets[ms.conf_ptr[i] : ms.conf_ptr[i + 1], t] - y[i]).mean()
                for i in range(len(ms))
            ]
        )
        std = float(y.std())
        mae_low = float(np.abs(low[:, t] - y).mean())
        mae_rnd = float(rnd.mean())
        out[name] = {
            "std": std,
            "mae_lowest": mae_low,
            "mae_random": mae_rnd,
            "rel_lowest": mae_low / std if std > 0 else float("nan"),
            "rel_random": mae_rnd / std if std > 0 else float("nan"),
        }
    return out


def target_statistics(ms: MoleculeSet, units: dict[str, str] | None = None) -> dict:
    """Summary of every target (mean, std, range, within-ensemble spread, oracle gap).

    Parameters
    ----------
    ms : MoleculeSet
    units : dict, optional
        ``{target: unit}``.

    Returns
    -------
    dict
        One entry per target plus ``conformers_per_molecule`` and ``atoms_per_molecule``.
    """
    gap = oracle_gap(ms)
    stats = {}
    for t, name in enumerate(ms.target_names):
        y = ms.targets[:, t]
        within = [
            float(np.std(ms.conf_targets[ms.conf_ptr[i] : ms.conf_ptr[i + 1], t]))
            for i in range(len(ms))
        ]
        stats[name] = {
            "unit": (units or {}).get(name, ""),
            "mean": float(y.mean()),
            "min": float(y.min()),
            "max": float(y.max()),
            "median_within_ensemble_std": float(np.median(within)),
            **gap[name],
        }
    for key, ptr in (("conformers_per_molecule", ms.conf_ptr), ("atoms_per_molecule", ms.atom_ptr)):
        d = np.diff(ptr)
        stats[key] = {"mean": float(d.mean()), "min": int(d.min()), "max": int(d.max())}
    return stats
