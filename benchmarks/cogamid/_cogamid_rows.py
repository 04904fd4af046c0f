"""The rows of ``run.py``: :func:`_rows` turns one world's per-seed results into rows (per-step
mIoU, forgetting, the GMM-minus-prototype gap, held-out log-likelihoods) and a table.

A helper module: ``run.py`` imports it (and the worlds, :data:`WORLDS`, with their case
prefixes, :data:`PREFIX`).
"""

from __future__ import annotations

import numpy as np
from _common import Row

__all__ = [
    "BASELINE",
    "PREFIX",
    "WORLDS",
]

BASELINE = {
    "prototype": "finetune",
    "gmm_k1": "prototype",
    "gmm_k3": "prototype",
    "gmm_k3_da_grc": "prototype",
}
WORLDS = {"multimodal": (2, 3), "unimodal": (1,)}
PREFIX = {"multimodal": "", "unimodal": "unimodal/"}


def _mean(vals) -> float:
    return float(np.mean(np.asarray(list(vals), dtype=float)))


def _std(vals) -> float:
    """Population standard deviation (NaN-propagating, unlike ``statistics.pstdev``)."""
    return float(np.std(np.asarray(list(vals), dtype=float)))


def _rows(world: str, runs, ll, seeds) -> tuple[list[Row], list[list]]:
    pre = PREFIX[world]

    def stat(name, t, key):
        vals = np.array([r[t][key] for r in runs[name]], dtype=float)
        return float(vals.mean()), float(vals.std())

    n_steps = len(next(iter(runs.values()))[0])
    last = n_steps - 1
    rows: list[Row] = []
    table = []
    for name in runs:
        vs = BASELINE.get(name) if BASELINE.get(name) in runs else None
        for t in range(n_steps):
            for key in ("miou_all", "miou_old", "miou_new"):
                if t == 0 and key == "miou_old":
                    continue
                mean, std = stat(name, t, key)
                ref = stat(vs, t, key)[0] if vs and t > 0 else 0.0
                ratio = mean / ref if ref > 0 else None
                rows.append(
                    Row(f"{pre}{name}/step{t}", key, mean, "IoU", vs if t > 0 else None, ratio)
                )
                rows.append(Row(f"{pre}{name}/step{t}", key + "_std", std, "IoU"))
        for seed, r in zip(seeds, runs[name], strict=True):
            rows.append(Row(f"{pre}{name}/seed{seed}", "miou_all_last", r[last]["miou_all"], "IoU"))
        forg = [r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[name]]
        f_mean = _mean(forg)
        ratio = None
        if vs:
            f_vs = _mean(r[0]["miou_base"] - r[-1]["miou_base"] for r in runs[vs])
            ratio = f_vs / f_mean if f_mean > 0 else None
        rows.append(Row(f"{pre}{name}", "forgetting_base", f_mean, "IoU", vs, ratio))
        rows.append(Row(f"{pre}{name}", "forgetting_base_std", _std(forg), "IoU"))
        table.append(
            [f"{pre}{name}"]
            + [stat(name, t, "miou_all")[0] for t in range(n_steps)]
            + [stat(name, last, "miou_old")[0], stat(name, last, "miou_new")[0], f_mean]
        )
    gaps = [
        a[last]["miou_all"] - b[last]["miou_all"]
        for a, b in zip(runs["gmm_k3"], runs["prototype"], strict=True)
    ]
    rows.append(Row(f"{pre}gmm_k3", "miou_all_last_gap_vs_prototype", _mean(gaps), "IoU"))
    rows.append(Row(f"{pre}gmm_k3", "miou_all_last_gap_vs_prototype_std", _std(gaps), "IoU"))
    rows.append(
        Row(
            f"{pre}gmm_k3",
            "seeds_above_prototype_last",
            float(sum(g > 0 for g in gaps)),
            "count",
        )
    )
    for name, vals in ll.items():
        rows.append(Row(f"{pre}heldout/{name}", "loglik_per_dim", _mean(vals), "nat"))
        rows.append(Row(f"{pre}heldout/{name}", "loglik_per_dim_std", _std(vals), "nat"))
    for name in ("gmm_k3", "gaussian_k1"):
        gain = [a - b for a, b in zip(ll[name], ll["prototype"], strict=True)]
        rows.append(
            Row(
                f"{pre}heldout/{name}",
                "loglik_gain_vs_prototype",
                _mean(gain),
                "nat",
                "prototype",
            )
        )
    gain = [a - b for a, b in zip(ll["gmm_k3"], ll["gaussian_k1"], strict=True)]
    rows.append(Row(f"{pre}heldout/gmm_k3", "loglik_gain_vs_gaussian_k1", _mean(gain), "nat"))
    rows.append(Row(f"{pre}heldout/gmm_k3", "loglik_gain_vs_gaussian_k1_std", _std(gain), "nat"))
    return rows, table
