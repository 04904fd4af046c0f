"""The evaluation of ``run.py``: i.i.d. and MD JS of a model file over seeds, and its predecessor.

:func:`evaluate` scores a model file over seeds (:mod:`_alanine_energy_model`'s
i.i.d. sampler and ``sci-moe md run``), :func:`before_model` extracts the model shipped at
:data:`BEFORE_REV` with ``git show``, and :func:`exact_md_phi_psi` runs MD on the exact
amber force field for the floor. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np
from _alanine_energy_model import (
    BINS,
    drop_burn_in,
    iid_phi_psi,
    js_to_reference,
    md_js,
)
from _common import (
    Row,
)

from sci_moe.sampling.md import alanine_phi_psi, angle_histogram

__all__ = [
    "BEFORE_REV",
    "ROOT",
    "SHIPPED",
    "before_model",
    "evaluate",
    "exact_md_phi_psi",
]


ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "sci_moe/sampling/files/alanine_energy_model.safetensors"
BEFORE_REV = "c975d24"


def exact_md_phi_psi(
    seed: int,
    walkers: int = 16,
    time_ps: float = 100.0,
    frame_ps: float = 0.2,
    burn_in_ps: float = 0.0,
) -> np.ndarray:
    """phi/psi (F, 2) of the demo's sampling with the *exact* force field: the floor.

    ``walkers`` OpenMM runs (amber99sbildn + OBC, hbonds, LangevinMiddle 2 fs, 300 K,
    1/ps, Reference platform) of ``time_ps`` each from the minimised shipped structure,
    a frame every ``frame_ps``, the frames before ``burn_in_ps`` of each walker dropped:
    what ``make demo``'s JS would be if the learned model were the force field it learns.
    """
    import openmm
    import openmm.unit as u

    from sci_moe.sampling.md import build_system

    _, system, pos = build_system("amber99sbildn", "obc", "hbonds")
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 2 * u.femtosecond)
    integ.setRandomNumberSeed(2 * seed + 1)
    ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos)
    openmm.LocalEnergyMinimizer.minimize(ctx)
    start = ctx.getState(getPositions=True).getPositions()
    every = round(frame_ps / 0.002)
    frames = []
    for w in range(walkers):
        ctx.setPositions(start)
        ctx.setVelocitiesToTemperature(300 * u.kelvin, 1000 * seed + w + 1)
        for _ in range(round(time_ps / frame_ps)):
            integ.step(every)
            frames.append(ctx.getState(getPositions=True).getPositions(asNumpy=True)._value)
    return drop_burn_in(alanine_phi_psi(np.array(frames)), walkers, frame_ps, burn_in_ps)


def before_model(work: Path) -> Path | None:
    """The model file shipped before issue 28 (``git show BEFORE_REV:...``), or None."""
    dst = work / "alanine_energy_model_before.safetensors"
    rel = SHIPPED.relative_to(ROOT)
    try:
        blob = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE_REV}:{rel}"],
            check=True,
            capture_output=True,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    dst.write_bytes(blob)
    return dst


def evaluate(
    path,
    label: str,
    seeds,
    md_seeds,
    n_iid: int,
    iid_steps: int,
    walkers: int,
    time_ns: float,
    work: Path,
    p_ref: np.ndarray,
    demo_dir: Path | None = None,
    reuse_md: dict[int, Path] | None = None,
    burn_in_ps: float = 0.0,
) -> tuple[list[Row], dict]:
    """Rows (per seed and mean) of i.i.d. JS (``seeds``) and MD JS (``md_seeds``).

    ``demo_dir``: an existing ``make demo`` folder (seed 0, the demo's settings) used as
    the seed-0 MD run instead of running it again; ``reuse_md``: seed -> finished run
    folder of the same settings (e.g. run in parallel), analysed instead of run.
    """
    rows, per = [], {"iid": [], "md": [], "iid_phi_pos": [], "md_phi_pos": []}
    for s in seeds:
        t0 = time.perf_counter()
        ang = iid_phi_psi(path, n_iid, s, iid_steps)
        t_iid = time.perf_counter() - t0
        j_iid = js_to_reference(ang, p_ref)
        if "hist_iid" not in per:  # the first seed's histogram, for the figure
            per["hist_iid"] = angle_histogram(ang, BINS)[0]
        per["iid"].append(j_iid)
        per["iid_phi_pos"].append(float((ang[:, 0] > 0).mean()))
        print(f"{label} seed {s}: iid JS {j_iid:.4f} ({t_iid:.0f} s)", flush=True)
        case = f"{label} seed {s}"
        rows += [
            Row(case, "iid_js", round(j_iid, 4), "nats"),
            Row(case, "iid_phi_positive_fraction", round(per["iid_phi_pos"][-1], 4), "1"),
            Row(case, "iid_seconds", round(t_iid, 1), "s"),
        ]
    for s in md_seeds:
        reuse = (reuse_md or {}).get(s)
        if reuse is None and demo_dir is not None and s == 0:
            reuse = demo_dir
        wait = reuse is not None and s in (reuse_md or {})
        md = md_js(path, s, walkers, time_ns, work, reuse, wait, burn_in_ps)
        if "hist_md" not in per:
            per["hist_md"] = md["hist"]
        per["md"].append(md["js"])
        per["md_phi_pos"].append(md["phi_positive_fraction"])
        print(f"{label} seed {s}: MD JS {md['js']:.4f} ({md['frames']} frames)", flush=True)
        case = f"{label} seed {s}"
        rows += [
            Row(case, "md_js", round(md["js"], 4), "nats"),
            Row(case, "md_phi_positive_fraction", round(md["phi_positive_fraction"], 4), "1"),
        ]
        if md["wall_s"] is not None:
            rows.append(Row(case, "md_wall_seconds", round(md["wall_s"], 1), "s"))
    for k in ("iid", "md"):
        if not per[k]:
            continue
        v = np.array(per[k])
        rows.append(Row(f"{label} mean", f"{k}_js", round(float(v.mean()), 4), "nats"))
        rows.append(
            Row(
                f"{label} mean",
                f"{k}_js_std",
                round(float(v.std(ddof=1)) if len(v) > 1 else 0.0, 4),
                "nats",
            )
        )
    return rows, per
