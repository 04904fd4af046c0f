"""Analysis of ``sci-moe md run`` output folders: trajectories, logs, plots, metrics.

The metrics (histograms, free energies, JS divergence, PMF error) live in
:mod:`~sci_moe.sampling.md.histograms`, the alanine-dipeptide references in
:mod:`~sci_moe.sampling.md.reference` and the dihedrals in
:mod:`~sci_moe.sampling.md.alanine`; their names are re-exported here.

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
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..._util import atomic_write_text
from .alanine import alanine_phi_psi
from .config import TOY_SYSTEMS
from .histograms import (
    angle_histogram,
    boltzmann_histogram,
    free_energy,
    histogram,
    js_divergence,
    kl_divergence,
    pmf_error,
)
from .log_reporter import LogReporter
from .manifest import MANIFEST_NAME, record_outputs
from .reference import reference_histogram, shipped_reference
from .trajectory_formats import read_trajectory, walker_paths

__all__ = [
    "MIN_FRAMES",
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


#: Fewer frames than this after the burn-in: ``analyse_run`` warns that the histograms,
#: the JS divergence and the PMF error are noise-dominated.
MIN_FRAMES = 100


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
    log = {n: data[:, i] for i, n in enumerate(names)}
    # Reduced-unit logs (toy systems) name their columns without units: also expose them
    # under the standard names, so that one reader serves both.
    for reduced, standard in zip(LogReporter.REDUCED_COLUMNS, LogReporter.COLUMNS, strict=True):
        if reduced in log and standard not in log:
            log[standard] = log[reduced]
    return log


@contextlib.contextmanager
def _quiet_c_stdout():
    """Silence what C code prints on file descriptor 1 (mdtraj's DCD plugin banner).

    Also when Python's ``sys.stdout`` is captured (pytest, sphinx-gallery in the docs
    build): the C code writes to descriptor 1 itself, through C's buffered ``stdout``,
    which is flushed into the null device before the descriptor is restored.
    """
    fd = 1
    try:
        sys.stdout.flush()
        saved = os.dup(fd)
    except (AttributeError, OSError, ValueError):  # no descriptor 1 to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), fd)
            try:
                yield
            finally:
                _flush_c_stdio()
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _flush_c_stdio() -> None:
    """``fflush(NULL)``: write out what C code left in its stdio buffers (POSIX)."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # pragma: no cover - no C library handle
        pass


def _load_xyz(path: Path, top: Path) -> np.ndarray:
    with _quiet_c_stdout():
        return read_trajectory(path, top).xyz  # also from non-ASCII paths


def _trajectory_files(run_dir: Path) -> list[Path]:
    """The run's trajectory files: the names its ``config.yaml`` implies (a user's
    ``trajectory_mine.dcd`` in the folder is not read); a glob without a config."""
    try:
        cfg = _load_config(run_dir)
        names = walker_paths(run_dir / f"trajectory.{cfg['trajectory_format']}", cfg["walkers"])
    except (ValueError, KeyError, TypeError):
        return sorted(p for ext in ("dcd", "xtc", "h5") for p in run_dir.glob(f"trajectory*.{ext}"))
    return [p for p in names if p.is_file()]


def load_run_positions(run_dir, walkers: bool = True) -> np.ndarray:
    """All trajectory frames of a run folder, shape (F, N, 3) in nm (walkers concatenated).

    The files are those the run's ``config.yaml`` names (``trajectory.<format>``, or
    ``trajectory_w000.<format>``, ... for several walkers); ``walkers=False`` keeps a
    single-walker file only.
    """
    run_dir = Path(run_dir)
    top = run_dir / "topology.pdb"
    files = [p for p in _trajectory_files(run_dir) if walkers or "_w" not in p.stem]
    if not files or not top.is_file():
        raise ValueError(f"{run_dir} holds no trajectory*.dcd/xtc/h5 with topology.pdb")
    return np.concatenate([_load_xyz(f, top) for f in files]).astype(np.float64)


def _load_config(run_dir: Path) -> dict[str, Any]:
    import yaml

    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ValueError(f"{run_dir} is not a `sci-moe md run` output folder (no config.yaml)")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _plot_traces(log: dict[str, np.ndarray], path: Path, reduced: bool = False) -> None:
    """Energy and temperature traces; ``reduced`` labels toy systems' reduced units."""
    from matplotlib.figure import Figure

    # A bare Figure: no pyplot state, no backend switch in the caller's session.
    fig = Figure(figsize=(7, 5))
    axes = fig.subplots(2, 1, sharex=True)
    t = log["time_ps"]
    axes[0].plot(t, log["potential_energy_kj_mol"], lw=0.8)
    axes[0].set_ylabel(
        "potential energy (reduced units)" if reduced else "potential energy (kJ/mol)"
    )
    temp = log.get("temperature_k")
    if temp is not None and np.isfinite(temp).any():
        axes[1].plot(t, temp, lw=0.8, color="C1")
        axes[1].axhline(np.nanmean(temp), color="k", lw=0.8, ls="--")
    axes[1].set_ylabel("temperature (reduced units)" if reduced else "temperature (K)")
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
        Frames before this time are dropped (>= 0).
    out_dir : str or Path, optional
        Where to write (default ``run_dir``). In a run folder with a manifest, the files
        written are added to it (``md run --overwrite`` removes them).

    Returns
    -------
    dict
        ``frames``, ``js_divergence`` (nats, or ``None`` without a reference),
        ``pmf_error``, ``reference``, file names of the plots, energy/temperature means,
        ``few_frames`` (fewer than :data:`MIN_FRAMES` frames after the burn-in) and
        ``warnings`` (each also issued as a ``UserWarning``).

    Raises
    ------
    ValueError
        A folder that is not a run, ``bins`` < 2, a negative ``burn_in_ps`` or no frame
        left after it.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a folder")
    if int(bins) != bins or bins < 2:
        raise ValueError(f"bins must be an integer >= 2, got {bins}")
    if not math.isfinite(burn_in_ps) or burn_in_ps < 0:
        raise ValueError(f"burn_in_ps (--burn-in-ps) must be >= 0 ps, got {burn_in_ps:g}")
    cfg = _load_config(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir
    out_dir.mkdir(parents=True, exist_ok=True)

    def own(name: str) -> None:  # a run folder lists what is written in it (--overwrite)
        if (out_dir / MANIFEST_NAME).is_file():
            record_outputs(out_dir, [name])

    result: dict[str, Any] = {"run": str(run_dir), "system": cfg.get("system"), "bins": bins}
    toy = cfg.get("system") in TOY_SYSTEMS
    # Toy systems are in reduced units: no kJ/mol or K in their keys, labels or messages.
    energy_key, temp_key = (
        ("mean_potential_energy", "mean_temperature")
        if toy
        else ("mean_potential_energy_kj_mol", "mean_temperature_k")
    )
    result["units"] = (
        {"energy": "reduced", "temperature": "reduced", "pmf_error": "(kT)^2"}
        if toy
        else {"energy": "kJ/mol", "temperature": "K", "pmf_error": "(kT)^2"}
    )
    result["warnings"] = []
    log_path = run_dir / "log.csv"
    if log_path.is_file():
        log = read_log(log_path)
        if len(log["step"]):
            own("traces.png")
            _plot_traces(log, out_dir / "traces.png", reduced=toy)
            result["traces_png"] = "traces.png"
            result[energy_key] = float(np.mean(log["potential_energy_kj_mol"]))
            temp = log["temperature_k"]
            if np.isfinite(temp).any():
                result[temp_key] = float(np.nanmean(temp))
    dt_ps = float(cfg["timestep_fs"]) * 1e-3
    interval = int(cfg["report_interval"])
    x = load_run_positions(run_dir)
    walkers = max(1, len([p for p in _trajectory_files(run_dir) if "_w" in p.stem]))
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
    result["few_frames"] = len(x) < MIN_FRAMES
    if result["few_frames"]:
        msg = (
            f"only {len(x)} frames after a burn-in of {burn_in_ps:g} ps (fewer than "
            f"{MIN_FRAMES}): the histograms, JS divergence and PMF error are dominated by "
            "noise; run longer or report more often (--report-interval)"
        )
        result["warnings"].append(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)
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
            ref = reference_histogram(
                ref_path, bins, topology=run_dir / "topology.pdb", atom_indices=atom_indices
            )
            p_ref, result["reference"] = ref["p"], ref["description"]
            result["reference_conditions"] = _conditions((ref["metadata"] or {}).get("config"))
            mismatch = _mismatch(cfg, result["reference_conditions"])
            if mismatch:
                msg = (
                    f"the run ({mismatch[0]}) and the reference {ref['description']} "
                    f"({mismatch[1]}) differ: the JS divergence and PMF error mix the sampling "
                    "error with the difference between the two; pass --reference FILE with a "
                    "reference of the run's conditions"
                )
                result["warnings"].append(msg)
                warnings.warn(msg, UserWarning, stacklevel=2)
    if p_ref is not None:
        result["js_divergence"] = js_divergence(p_ref, p)
        result["pmf_error"] = pmf_error(p_ref, p)
    own(png)
    _plot_surface(p, edges, out_dir / png, labels, title, ref=p_ref)
    result["free_energy_png"] = png
    own("analysis.json")
    atomic_write_text(out_dir / "analysis.json", json.dumps(result, indent=2) + "\n")
    return result


def _conditions(config) -> dict[str, Any] | None:
    """Force field, implicit solvent and temperature of a shipped reference's config."""
    if not isinstance(config, dict) or "forcefield" not in config:
        return None
    return {
        "forcefield": config.get("forcefield"),
        "implicit_solvent": config.get("implicit_solvent"),
        "temperature_k": config.get("temperature_k"),
    }


def _describe(forcefield, solvent, temperature_k) -> str:
    return f"{forcefield} + {solvent or 'vacuum'}, {float(temperature_k):g} K"


def _mismatch(cfg: dict, ref: dict | None) -> tuple[str, str] | None:
    """(run, reference) descriptions when a force-field run and its reference differ."""
    if ref is None or cfg.get("model"):  # a learned model has no force field to compare
        return None
    run = (
        cfg.get("forcefield", "amber99sbildn"),
        cfg.get("implicit_solvent"),
        float(cfg.get("temperature_k", 300.0)),
    )
    other = (ref["forcefield"], ref["implicit_solvent"], float(ref["temperature_k"] or 300.0))
    if (
        run[0] == other[0]
        and (run[1] or None) == (other[1] or None)
        and abs(run[2] - other[2]) < 1e-6
    ):
        return None
    return _describe(*run), _describe(*other)


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
