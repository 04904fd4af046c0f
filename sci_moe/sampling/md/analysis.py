"""Analysis of MD runs: histograms, free energies, Jensen-Shannon divergence, plots.

The metrics follow the ScoreMD evaluation (Plainer et al. 2025; see
``../shared/papers/sampling-theory.md``, A.9): phi/psi histograms of 64 x 64 bins over
:math:`[-\\pi, \\pi]^2`, the Jensen-Shannon divergence in nats
(``scipy.spatial.distance.jensenshannon(P, Q) ** 2``),

.. math::

    \\mathrm{JS}(P, Q) = \\tfrac12 \\mathrm{KL}(P \\| M) + \\tfrac12 \\mathrm{KL}(Q \\| M),
    \\qquad M = \\tfrac12 (P + Q),

bounded by :math:`\\ln 2`, and the probability-weighted squared free-energy difference
("PMF error", in :math:`(k_BT)^2`).

:func:`analyse_run` reads a ``sci-moe md run`` output folder and writes
``ramachandran.png`` (or ``density.png`` for toy systems), ``traces.png`` and
``analysis.json``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "alanine_phi_psi",
    "analyse_run",
    "angle_histogram",
    "boltzmann_histogram",
    "free_energy",
    "histogram",
    "js_divergence",
    "kl_divergence",
    "load_run_positions",
    "pmf_error",
    "read_log",
    "reference_histogram",
    "shipped_reference",
]

_FILES = Path(__file__).resolve().parents[2] / "data" / "files"


def _normalise(p) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if (p < 0).any() or not np.isfinite(p).all():
        raise ValueError("a histogram must be finite and non-negative")
    total = p.sum()
    if total <= 0:
        raise ValueError("a histogram must have positive mass (no samples fell in its range)")
    return p / total


def histogram(samples, bins, ranges, weights=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Normalised histogram of ``samples`` (probability per bin, summing to 1).

    Parameters
    ----------
    samples : array_like, shape (F, d)
    bins : int or sequence of int
    ranges : sequence of (low, high), length d
        Samples outside are dropped.
    weights : array_like, shape (F,), optional

    Returns
    -------
    p : ndarray, shape (bins,) * d
    edges : list of ndarray
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"samples must have shape (F, d) with F > 0, got {np.shape(samples)}")
    h, edges = np.histogramdd(x, bins=bins, range=ranges, weights=weights)
    return _normalise(h), list(edges)


def angle_histogram(angles, bins: int = 64, weights=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Histogram of dihedral pairs, e.g. (phi, psi), over :math:`[-\\pi, \\pi]^2`.

    Parameters
    ----------
    angles : array_like, shape (F, 2)
        Radians.
    bins : int
        Bins per axis (64 as in ScoreMD).

    Returns
    -------
    p : ndarray, shape (bins, bins)
        Probabilities (sum 1); ``p[i, j]`` is phi bin ``i``, psi bin ``j``.
    edges : list of two ndarrays
    """
    a = np.asarray(angles, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"angles must have shape (F, 2), got {a.shape}")
    # Wrap into [-pi, pi) so that +pi is not lost at the closed right edge.
    a = (a + np.pi) % (2 * np.pi) - np.pi
    return histogram(a, bins, [(-np.pi, np.pi)] * 2, weights)


def kl_divergence(p, q) -> float:
    """:math:`\\mathrm{KL}(P\\|Q) = \\sum_i p_i \\ln(p_i/q_i)` in nats (``inf`` if ``q`` misses
    mass of ``p``); inputs are normalised first."""
    p, q = _normalise(p), _normalise(q)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    m = p > 0
    if (q[m] == 0).any():
        return math.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def js_divergence(p, q) -> float:
    """Jensen-Shannon divergence in nats, in :math:`[0, \\ln 2]` (see the module docstring).

    Equals ``scipy.spatial.distance.jensenshannon(p, q) ** 2``.
    """
    p, q = _normalise(p), _normalise(q)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    m = 0.5 * (p + q)
    return float(max(0.0, 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)))


def free_energy(p, kT: float = 1.0) -> np.ndarray:
    """:math:`F = -k_BT \\ln p`, shifted to a minimum of 0 (``inf`` in empty bins)."""
    p = _normalise(p)
    with np.errstate(divide="ignore"):
        f = -kT * np.log(p)
    return f - f[np.isfinite(f)].min()


def pmf_error(p_ref, p_model, floor: float = 1e-6) -> float:
    """Probability-weighted squared free-energy difference, :math:`(k_BT)^2`.

    .. math::

        \\sum_i \\tfrac12 (p_i + q_i) (\\ln p_i - \\ln q_i)^2

    with empty bins set to ``floor`` (ScoreMD's ``rms_fe_sq_error``; no square root).
    """
    p, q = _normalise(p_ref), _normalise(p_model)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    w = 0.5 * (p + q)
    d = np.log(np.maximum(p, floor)) - np.log(np.maximum(q, floor))
    return float(np.sum(w * d**2))


def boltzmann_histogram(energy_fn, kT: float, edges, subdivisions: int = 8) -> np.ndarray:
    """Exact bin probabilities of :math:`p \\propto e^{-E/kT}` for a 1-D or 2-D potential
    (midpoint rule with ``subdivisions`` points per bin and axis).

    Parameters
    ----------
    energy_fn : callable
        ``(M, d)`` numpy array -> ``(M,)`` energies.
    kT : float
    edges : list of ndarray
        Bin edges per axis (as returned by :func:`histogram`).
    """
    axes = []
    for e in edges:
        e = np.asarray(e, dtype=np.float64)
        frac = (np.arange(subdivisions) + 0.5) / subdivisions
        axes.append((e[:-1, None] + np.diff(e)[:, None] * frac[None]).ravel())
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(edges))
    logw = -np.asarray(energy_fn(grid), dtype=np.float64) / kT
    w = np.exp(logw - logw.max()).reshape([len(a) for a in axes])
    for axis, e in enumerate(edges):
        w = np.moveaxis(w, axis, 0)
        w = w.reshape(len(e) - 1, subdivisions, *w.shape[1:]).sum(1)
        w = np.moveaxis(w, 0, axis)
    return _normalise(w)


def read_log(path) -> dict[str, np.ndarray]:
    """Read a :class:`~sci_moe.sampling.md.reporters.LogReporter` CSV into column arrays
    (empty cells -> NaN)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"log file {path} does not exist")
    lines = path.read_text(encoding="utf-8").strip().splitlines()
    if not lines:
        raise ValueError(f"log file {path} is empty")
    names = lines[0].split(",")
    rows = [[float(v) if v else np.nan for v in line.split(",")] for line in lines[1:]]
    data = np.array(rows, dtype=np.float64).reshape(len(rows), len(names))
    return {n: data[:, i] for i, n in enumerate(names)}


def shipped_reference(
    forcefield: str = "amber99sbildn", implicit_solvent: str | None = "obc", temperature_k=300
) -> Path | None:
    """The alanine-dipeptide phi/psi reference shipped in ``sci_moe/data/files``.

    Prefers ``alanine_dipeptide_reference_<forcefield>_<solvent>_<T>K.npz`` (solvent
    ``vacuum`` for ``None``), else any shipped reference, else ``None``.
    """
    if not _FILES.is_dir():
        return None
    name = f"{forcefield}_{implicit_solvent or 'vacuum'}_{round(float(temperature_k))}K"
    exact = _FILES / f"alanine_dipeptide_reference_{name}.npz"
    if exact.is_file():
        return exact
    files = sorted(_FILES.glob("alanine_dipeptide_reference*.npz"))
    return files[0] if files else None


def _rebin(counts: np.ndarray, bins: int, name: str) -> np.ndarray:
    b = counts.shape[0]
    if counts.shape != (b, b):
        raise ValueError(f"{name}: the reference histogram must be square, got {counts.shape}")
    if b == bins:
        return counts
    if b % bins:
        raise ValueError(
            f"{name} has {b} x {b} bins, which cannot be merged into {bins} x {bins}; "
            f"use --bins {b} or a divisor of it"
        )
    f = b // bins
    return counts.reshape(bins, f, bins, f).sum((1, 3))


def reference_histogram(
    path, bins: int = 64, topology=None, atom_indices=None
) -> tuple[np.ndarray, str]:
    """phi/psi histogram of an alanine-dipeptide reference.

    Parameters
    ----------
    path : str or Path
        ``.npz`` with ``counts`` or ``histogram`` (B x B over :math:`[-\\pi, \\pi]^2`,
        phi along axis 0; merged into ``bins`` when ``bins`` divides B), ``phi_psi``
        (F, 2) radians or ``positions`` (F, 22, 3) nm; or a trajectory (``.dcd``,
        ``.xtc``, ``.h5``) read with ``topology`` (a PDB path).

    atom_indices : sequence of int, optional
        For coarse-grained positions/trajectories (see :func:`alanine_phi_psi`).

    Returns
    -------
    p : ndarray, shape (bins, bins)
    description : str
    """

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"reference {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            for key in ("counts", "histogram"):
                if key in z:
                    p = _rebin(np.asarray(z[key], dtype=np.float64), bins, path.name)
                    return _normalise(p), f"{path.name} ({key})"
            if "phi_psi" in z:
                angles = z["phi_psi"]
            elif "positions" in z:
                pos = z["positions"]
                angles = alanine_phi_psi(pos, atom_indices if pos.shape[1] != 22 else None)
            else:
                raise ValueError(
                    f"{path.name} holds none of 'histogram', 'phi_psi', 'positions': {list(z)}"
                )
        return angle_histogram(angles, bins)[0], f"{path.name} ({len(angles)} frames)"
    import mdtraj

    if topology is None:
        raise ValueError(f"reading the trajectory {path.name} needs a topology (PDB)")
    try:
        traj = mdtraj.load(str(path), top=str(topology))
    except Exception as err:
        raise ValueError(f"cannot read reference trajectory {path}: {err}") from None
    angles = alanine_phi_psi(traj.xyz, atom_indices if traj.n_atoms != 22 else None)
    return angle_histogram(angles, bins)[0], f"{path.name} ({traj.n_frames} frames)"


@contextlib.contextmanager
def _quiet_c_stdout():
    """Silence what C code prints on file descriptor 1 (mdtraj's DCD plugin banner)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (e.g. captured)
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _load_xyz(path: Path, top: Path) -> np.ndarray:
    import mdtraj

    with _quiet_c_stdout():
        return mdtraj.load(str(path), top=str(top)).xyz


def load_run_positions(run_dir, walkers: bool = True) -> np.ndarray:
    """All trajectory frames of a run folder, shape (F, N, 3) in nm (walkers concatenated)."""
    run_dir = Path(run_dir)
    top = run_dir / "topology.pdb"
    files = sorted(
        p
        for ext in ("dcd", "xtc", "h5")
        for p in run_dir.glob(f"trajectory*.{ext}")
        if walkers or "_w" not in p.stem
    )
    if not files or not top.is_file():
        raise ValueError(f"{run_dir} holds no trajectory*.dcd/xtc/h5 with topology.pdb")
    return np.concatenate([_load_xyz(f, top) for f in files]).astype(np.float64)


def alanine_phi_psi(positions, atom_indices=None) -> np.ndarray:
    """(phi, psi) of alanine dipeptide frames, radians, shape (F, 2).

    Parameters
    ----------
    positions : array_like, shape (F, N, 3)
        All 22 atoms, or a coarse-grained subset (e.g. the 5 backbone atoms of a
        learned model) given by ``atom_indices`` into the 22-atom structure.
    atom_indices : sequence of int, optional
        Which of the 22 atoms the ``N`` particles are (must include the 5 backbone atoms).
    """
    from ...data.alanine_dipeptide import PHI_ATOMS, PSI_ATOMS, dihedrals, phi_psi

    x = np.asarray(positions, dtype=np.float64)
    if atom_indices is None:
        if x.shape[1] != 22:
            raise ValueError(
                f"the Ramachandran analysis is for alanine dipeptide (22 atoms); this run has "
                f"{x.shape[1]} particles and no atom_indices"
            )
        return phi_psi(x)
    where = {int(a): i for i, a in enumerate(atom_indices)}
    if len(where) != x.shape[1] or not set(PHI_ATOMS + PSI_ATOMS) <= set(where):
        raise ValueError(
            f"atom_indices {list(atom_indices)} must list the {x.shape[1]} particles and "
            f"include the backbone atoms {sorted(set(PHI_ATOMS + PSI_ATOMS))}"
        )
    quads = [[where[a] for a in PHI_ATOMS], [where[a] for a in PSI_ATOMS]]
    return dihedrals(x, quads)


def _load_config(run_dir: Path) -> dict[str, Any]:
    import yaml

    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ValueError(f"{run_dir} is not a `sci-moe md run` output folder (no config.yaml)")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _plot_traces(log: dict[str, np.ndarray], path: Path) -> None:
    from matplotlib.figure import Figure

    # A bare Figure: no pyplot state, no backend switch in the caller's session.
    fig = Figure(figsize=(7, 5))
    axes = fig.subplots(2, 1, sharex=True)
    t = log["time_ps"]
    axes[0].plot(t, log["potential_energy_kj_mol"], lw=0.8)
    axes[0].set_ylabel("potential energy (kJ/mol)")
    temp = log.get("temperature_k")
    if temp is not None and np.isfinite(temp).any():
        axes[1].plot(t, temp, lw=0.8, color="C1")
        axes[1].axhline(np.nanmean(temp), color="k", lw=0.8, ls="--")
    axes[1].set_ylabel("temperature (K)")
    axes[1].set_xlabel("time (ps)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_surface(p, edges, path: Path, labels, title, ref=None) -> None:
    """Free energies in units of kT on one colour scale for both panels.

    The scale spans the larger finite range of the two panels, kept within 4-12 kT: a short
    run's few counts alone would give a range of ~1 kT and saturate the reference panel.
    """
    from matplotlib.figure import Figure

    panels = [("this run", p)] + ([("reference", ref)] if ref is not None else [])
    fig = Figure(figsize=(5.2 * len(panels), 4.4))
    axes = fig.subplots(1, len(panels), squeeze=False)
    ranges = []
    for _, hist in panels:
        f = free_energy(hist)
        if np.isfinite(f).any():
            ranges.append(float(f[np.isfinite(f)].max()))
    vmax = float(np.clip(max(ranges, default=4.0), 4.0, 12.0))
    for ax, (name, hist) in zip(axes[0], panels, strict=True):
        f = free_energy(hist)
        if hist.ndim == 1:
            centres = 0.5 * (edges[0][1:] + edges[0][:-1])
            ax.plot(centres, np.where(np.isfinite(f), f, np.nan))
            ax.set_ylim(0, 1.05 * vmax)
            ax.set_xlabel(labels[0])
            ax.set_ylabel("free energy (kT)")
        else:
            f = np.where(np.isfinite(f), f, np.nan)
            mesh = ax.pcolormesh(
                edges[0], edges[1], f.T, cmap="viridis", shading="flat", vmin=0, vmax=vmax
            )
            fig.colorbar(mesh, ax=ax, label="free energy (kT)")
            ax.set_xlabel(labels[0])
            ax.set_ylabel(labels[1])
        ax.set_title(f"{title}: {name}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def analyse_run(
    run_dir,
    reference=None,
    bins: int = 64,
    burn_in_ps: float = 0.0,
    out_dir=None,
) -> dict[str, Any]:
    """Analyse a ``sci-moe md run`` folder: plots and, given a reference, the JS divergence.

    Alanine dipeptide (22 atoms): phi/psi Ramachandran free energy ``ramachandran.png``;
    the reference defaults to :func:`shipped_reference`. Toy systems: the density of the
    coordinates ``density.png`` against the exact Boltzmann histogram. Always: energy and
    temperature traces ``traces.png``. Everything is also written to ``analysis.json``.

    Parameters
    ----------
    run_dir : str or Path
    reference : str or Path, optional
        See :func:`reference_histogram`.
    bins : int
        Bins per axis.
    burn_in_ps : float
        Frames before this time are dropped.
    out_dir : str or Path, optional
        Where to write (default ``run_dir``).

    Returns
    -------
    dict
        ``frames``, ``js_divergence`` (nats, or ``None`` without a reference),
        ``pmf_error``, ``reference``, file names of the plots, energy/temperature means.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a folder")
    if int(bins) != bins or bins < 2:
        raise ValueError(f"bins must be an integer >= 2, got {bins}")
    cfg = _load_config(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"run": str(run_dir), "system": cfg.get("system"), "bins": bins}
    log_path = run_dir / "log.csv"
    if log_path.is_file():
        log = read_log(log_path)
        if len(log["step"]):
            _plot_traces(log, out_dir / "traces.png")
            result["traces_png"] = "traces.png"
            result["mean_potential_energy_kj_mol"] = float(np.mean(log["potential_energy_kj_mol"]))
            temp = log["temperature_k"]
            if np.isfinite(temp).any():
                result["mean_temperature_k"] = float(np.nanmean(temp))
    dt_ps = float(cfg["timestep_fs"]) * 1e-3
    interval = int(cfg["report_interval"])
    x = load_run_positions(run_dir)
    walkers = max(1, len(list(run_dir.glob("trajectory_w*"))))
    per_walker = len(x) // walkers
    # Frame k (k = 1, 2, ...) is at time k * interval * dt: drop those before burn_in_ps.
    skip = min(per_walker, max(0, math.ceil(burn_in_ps / (dt_ps * interval) - 1e-9) - 1))
    keep = np.concatenate(
        [np.arange(w * per_walker + skip, (w + 1) * per_walker) for w in range(walkers)]
    )
    x = x[keep]
    if len(x) == 0:
        raise ValueError(f"no frames left after a burn-in of {burn_in_ps} ps")
    result["frames"] = len(x)
    toy = cfg.get("system") in ("muller-brown", "double-well")
    result["js_divergence"] = result["pmf_error"] = result["reference"] = None
    if toy:
        kT = float(cfg.get("kt") or (23.0 if cfg["system"] == "muller-brown" else 1.0))
        p_ref, p, edges, labels = _toy_histograms(cfg["system"], x, bins, kT)
        png = "density.png"
        result["reference"] = f"exact Boltzmann density at kT={kT:g}"
        title = cfg["system"]
    else:
        atom_indices = (cfg.get("extra") or {}).get("atom_indices")
        p, edges = angle_histogram(alanine_phi_psi(x, atom_indices), bins)
        labels, png, title = ("phi (rad)", "psi (rad)"), "ramachandran.png", "alanine dipeptide"
        ref_path = reference
        if ref_path is None:
            ref_path = shipped_reference(
                cfg.get("forcefield", "amber99sbildn"),
                cfg.get("implicit_solvent"),
                cfg.get("temperature_k", 300.0),
            )
        p_ref = None
        if ref_path is not None:
            p_ref, result["reference"] = reference_histogram(
                ref_path, bins, topology=run_dir / "topology.pdb", atom_indices=atom_indices
            )
    if p_ref is not None:
        result["js_divergence"] = js_divergence(p_ref, p)
        result["pmf_error"] = pmf_error(p_ref, p)
    _plot_surface(p, edges, out_dir / png, labels, title, ref=p_ref)
    result["free_energy_png"] = png
    tmp = out_dir / ".analysis.json.tmp"
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / "analysis.json")
    return result


def _toy_histograms(system: str, x: np.ndarray, bins: int, kT: float):
    import torch

    from .potentials import DoubleWell, MuellerBrown

    if system == "muller-brown":
        pot, ranges, dims, labels = MuellerBrown(), [(-1.8, 1.1), (-0.5, 2.0)], 2, ("x", "y")
    else:
        pot, ranges, dims, labels = DoubleWell(dim=1), [(-2.5, 2.5)], 1, ("x",)
    samples = x[:, 0, :dims]
    p, edges = histogram(samples, bins, ranges)

    def energy(g):
        t = torch.as_tensor(g, dtype=torch.float64)[:, None, :]
        return pot(t).detach().numpy()

    return boltzmann_histogram(energy, kT, edges), p, edges, labels
