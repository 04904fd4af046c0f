"""The ``--compare-runs`` part of ``run.py``: the first picoseconds of two demo runs and the floors.

:func:`compare_runs` scores the first ``ps`` of every walker of two run folders
(:func:`truncated_js`), MD on the exact force field, and the i.i.d. sampling floor of the
reference histogram (:func:`iid_floor`). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _aem_eval import exact_md_phi_psi
from _alanine_energy_model import (
    js_to_reference,
)
from _common import (
    Row,
)

from sci_moe.sampling.md import alanine_phi_psi, js_divergence
from sci_moe.sampling.md.analysis import load_run_positions

__all__ = [
    "compare_runs",
    "iid_floor",
    "truncated_js",
]


def iid_floor(p_ref: np.ndarray, n: int, seed: int) -> float:
    """JS of ``n`` i.i.d. draws from the reference histogram itself: the sampling floor."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, (p_ref / p_ref.sum()).ravel()).reshape(p_ref.shape)
    return js_divergence(p_ref, counts.astype(float))


def truncated_js(run_dir: Path, atom_indices, ps: float, p_ref: np.ndarray) -> tuple[float, int]:
    """JS of the first ``ps`` picoseconds of every walker of a (possibly running) run folder.

    Frames are every 0.2 ps (``--report-interval 200`` at 1 fs), so walker ``w`` keeps its
    first ``5 * ps`` frames.
    """
    x = load_run_positions(run_dir)
    walkers = max(1, len(list(Path(run_dir).glob("trajectory_w*"))))
    per = len(x) // walkers
    keep = round(5 * ps)
    if keep > per:
        raise SystemExit(f"{run_dir} has {per} frames per walker, fewer than {keep}")
    idx = np.concatenate([np.arange(w * per, w * per + keep) for w in range(walkers)])
    return js_to_reference(alanine_phi_psi(x[idx], atom_indices), p_ref), len(idx)


def compare_runs(before_dir, after_dir, ps: float, p_ref, exact_seeds=(0,)) -> list[Row]:
    """The first ``ps`` of two demo runs (same seed and settings) and the exact floor."""
    idx = [4, 6, 8, 14, 16]
    rows = []
    for label, d in (("before demo", before_dir), ("after demo", after_dir)):
        js, n = truncated_js(Path(d), idx, ps, p_ref)
        print(f"{label}: first {ps:g} ps per walker, {n} frames: JS {js:.4f}", flush=True)
        rows.append(Row(f"{label} first {ps:g} ps", "md_js", round(js, 4), "nats"))
    for s in exact_seeds:
        js = js_to_reference(exact_md_phi_psi(s, 16, ps), p_ref)
        print(f"exact force field seed {s}, 16 x {ps:g} ps: JS {js:.4f}", flush=True)
        rows.append(Row(f"exact seed {s} first {ps:g} ps", "md_js", round(js, 4), "nats"))
    for n in (1000, 5000, 8000):
        v = [iid_floor(p_ref, n, s) for s in range(3)]
        rows.append(
            Row(f"reference draws n={n}", "iid_js_floor", round(float(np.mean(v)), 4), "nats")
        )
    return rows
