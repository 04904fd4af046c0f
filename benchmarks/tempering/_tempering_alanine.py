"""Part 4 of ``run.py``: plain MD vs OpenMM simulated tempering on alanine dipeptide.

:func:`run_alanine` runs both samplers for the same number of MD steps (OpenMM Reference
platform) and summarises the (phi, psi) macrostate populations at 300 K;
:func:`report_alanine` prints the table and appends the rows; :func:`plot_extra` draws the
figure of parts 3 and 4 (Muller-Brown populations, running P(alpha_L)). A helper module:
``run.py`` imports it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from _common import Row, print_table
from _tempering_mb import MB_KT

from sci_moe.sampling.tempering import (
    masked_mean,
)

__all__ = [
    "ALA_LEVELS",
    "ALA_STEPS",
    "ALA_STEPS_PER_FRAME",
    "ALA_T0",
    "ALA_TMAX",
    "ala_states",
    "plot_extra",
    "report_alanine",
    "run_alanine",
]


# ----------------------------------------------------------- part 4: alanine dipeptide

ALA_T0, ALA_TMAX, ALA_LEVELS = 300.0, 800.0, 10
ALA_STEPS_PER_FRAME = 50  # 0.1 ps at 2 fs: frames of plain MD, ST iterations
ALA_STEPS = 2_500_000  # 5 ns per sampler (full run)


def ala_states(pp: np.ndarray) -> np.ndarray:
    """Macrostates from (phi, psi) radians: 0 = beta/C7eq/PII (phi < 0, psi outside
    (-120, 50) deg), 1 = alpha_R (phi < 0, -120 < psi < 50 deg), 2 = alpha_L/C7ax (phi > 0).
    """
    phi, psi = np.degrees(pp[..., 0]), np.degrees(pp[..., 1])
    out = np.where((psi > -120) & (psi < 50), 1, 0)
    return np.where(phi > 0, 2, out)


def _core_transitions(phi_deg: np.ndarray) -> int:
    """phi < 0 <-> phi > 0 transitions between cores (-180, -30) and (30, 130) deg."""
    n, side = 0, 0
    for v in phi_deg:
        s = -1 if v < -30 else (1 if 30 < v < 130 else 0)
        if s != 0:
            if side != 0 and s != side:
                n += 1
            side = s
    return n


def run_alanine(n_steps: int, seed: int) -> dict:
    import openmm
    import openmm.app as app
    import openmm.unit as u

    from sci_moe.sampling.md import build_system, phi_psi
    from sci_moe.sampling.tempering import OpenMMSimulatedTempering, OpenMMTemperingConfig

    top, system, pos = build_system(constraints="hbonds")
    n_frames = n_steps // ALA_STEPS_PER_FRAME
    out = {"n_steps": n_steps, "timestep_fs": 2.0, "frame_ps": ALA_STEPS_PER_FRAME * 0.002}

    # plain MD at 300 K: LangevinMiddle, 1/ps, 2 fs, H-bond constraints, Reference platform
    integ = openmm.LangevinMiddleIntegrator(ALA_T0 * u.kelvin, 1 / u.picosecond, 0.002)
    integ.setRandomNumberSeed(seed + 1)
    sim = app.Simulation(top, system, integ, openmm.Platform.getPlatformByName("Reference"))
    sim.context.setPositions(pos * u.nanometer)
    sim.minimizeEnergy()
    sim.context.setVelocitiesToTemperature(ALA_T0 * u.kelvin, seed + 1)
    frames = np.empty((n_frames, 22, 3), np.float32)
    t0 = time.perf_counter()
    for i in range(n_frames):
        integ.step(ALA_STEPS_PER_FRAME)
        st = sim.context.getState(positions=True)
        frames[i] = st.getPositions(asNumpy=True).value_in_unit(u.nanometer)
    wall = time.perf_counter() - t0
    pp = phi_psi(frames)
    lab = ala_states(pp)
    out["MD"] = _ala_summary(lab, np.ones(n_frames, bool), pp, wall)

    cfg = OpenMMTemperingConfig(
        min_temperature_k=ALA_T0,
        max_temperature_k=ALA_TMAX,
        n_temperatures=ALA_LEVELS,
        steps_per_iteration=ALA_STEPS_PER_FRAME,
        weights="sams",
        seed=seed,
    )
    stt = OpenMMSimulatedTempering.from_system(top, system, pos, cfg, platform="Reference")
    res = stt.run(n_frames, progress=False)
    pp = phi_psi(res.positions)
    lab = ala_states(pp)
    s = _ala_summary(lab, res.target_frames(), pp, res.wall_time)
    summ = res.summary()
    s["round_trips"] = summ["round_trips"]
    s["level_histogram"] = summ["level_histogram"].tolist()
    s["level_acceptance"] = summ["level_acceptance"].tolist()
    s["target_fraction"] = summ["target_fraction"]
    s["temperatures_k"] = res.temperatures_k.tolist()
    s["log_z_estimate"] = summ["log_z_estimate"].tolist()
    s["transitions_all_levels"] = _core_transitions(np.degrees(pp[:, 0]))
    out["ST"] = s
    return out


def _ala_summary(lab: np.ndarray, mask: np.ndarray, pp: np.ndarray, wall: float) -> dict:
    pops, ses = [], []
    for k in range(3):
        m, se = masked_mean((lab == k).astype(float)[:, None], mask[:, None])
        pops.append(m)
        ses.append(se)
    phi_t = np.degrees(pp[mask, 0])
    n_trans = _core_transitions(phi_t)
    # the ESS of the alpha_L indicator means something only if the sampler went there
    # and back at 300 K; otherwise its Sokal window measures wiggles inside one basin
    p = pops[2]
    ess = p * (1 - p) / ses[2] ** 2 if ses[2] > 0 and n_trans > 0 else None
    # running estimate of P(alpha_L) at the target temperature vs simulated time
    ind = (lab == 2).astype(float)
    cum = np.cumsum(ind * mask) / np.maximum(np.cumsum(mask), 1)
    checkpoints = np.unique(np.linspace(0, lab.size - 1, 21).astype(int))
    return {
        "populations": pops,
        "stderr": ses,
        "ess_alphaL": ess,
        "wall_s": float(wall),
        "ess_per_s": None if ess is None else float(ess / wall),
        "transitions_target": n_trans,
        "running_alphaL": [[int(c + 1), float(cum[c])] for c in checkpoints],
    }


def report_alanine(out: dict, rows: list[Row]) -> None:
    ns = out["n_steps"] * 2e-6
    table = []
    base = out["MD"]
    for who in ("MD", "ST"):
        r = out[who]
        s_ratio = None
        if who == "ST" and base["ess_per_s"] and r["ess_per_s"]:
            s_ratio = r["ess_per_s"] / base["ess_per_s"]
        t_ratio = None
        if who == "ST" and base["transitions_target"] > 0:
            t_ratio = r["transitions_target"] / base["transitions_target"]
        table.append(
            [
                who,
                "/".join(f"{v:.4f}" for v in r["populations"]),
                "/".join(f"{v:.4f}" for v in r["stderr"]),
                r["transitions_target"],
                r.get("transitions_all_levels"),
                r.get("round_trips"),
                r["wall_s"],
                "not mixed" if r["ess_per_s"] is None else r["ess_per_s"],
                s_ratio,
            ]
        )
        case = f"alanine-dipeptide 300K {who}"
        vs = "alanine-dipeptide 300K MD" if who == "ST" else None
        for k, name in enumerate(("beta", "alphaR", "alphaL")):
            rows.append(Row(case, f"population_{name}", r["populations"][k], "1"))
            rows.append(Row(case, f"population_{name}_stderr", r["stderr"][k], "1"))
        rows.append(
            Row(
                case,
                "phi_transitions_300K_per_ns",
                r["transitions_target"] / ns,
                "1/ns",
                vs,
                t_ratio,
            )
        )
        if r["ess_per_s"] is not None:  # only for a sampler that crossed at 300 K
            rows.append(Row(case, "ess_per_s_alphaL", r["ess_per_s"], "1/s", vs, s_ratio))
        rows.append(Row(case, "wall_time", r["wall_s"], "s"))
        if who == "ST":
            rows.append(Row(case, "round_trips", r["round_trips"], "1"))
            rows.append(
                Row(
                    case,
                    "phi_transitions_all_levels_per_ns",
                    r["transitions_all_levels"] / ns,
                    "1/ns",
                )
            )
            rows.append(Row(case, "target_level_fraction", r["target_fraction"], "1"))
    print_table(
        [
            "sampler",
            "P(beta)/P(aR)/P(aL)",
            "stderr",
            "phi trans 300K",
            "phi trans all",
            "trips",
            "wall s",
            "ESS/s aL",
            "x ESS/s",
        ],
        table,
        title=f"alanine dipeptide (amber99sbildn + OBC, H-bond constraints, 2 fs), {ns:g} ns "
        f"per sampler: plain MD at {ALA_T0:g} K vs OpenMM simulated tempering "
        f"{ALA_T0:g}-{ALA_TMAX:g} K ({ALA_LEVELS} levels, SAMS, Gibbs moves every "
        f"{ALA_STEPS_PER_FRAME} steps); populations at {ALA_T0:g} K; 'not mixed': no phi "
        "transition at 300 K, so no ESS",
    )
    st = out["ST"]
    print(
        "  ST level histogram "
        + " ".join(f"{v:.3f}" for v in st["level_histogram"])
        + "; min level acceptance "
        + f"{min(st['level_acceptance']):.2f}"
    )
    print("  running P(alpha_L) at 300 K (frames -> estimate):")
    for who in ("MD", "ST"):
        pts = out[who]["running_alphaL"]
        print(f"    {who}: " + ", ".join(f"{n}:{v:.3f}" for n, v in pts[:: max(1, len(pts) // 6)]))


def plot_extra(mb: dict, ala: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncol = 2 if ala is not None else 1
    fig, axes = plt.subplots(1, ncol, figsize=(5 * ncol, 3.8), squeeze=False)
    ax = axes[0, 0]
    names = ("RWMH", "ST+RWMH", "MALA", "ST+MALA", "BAOAB", "ST+BAOAB")
    ax.bar(
        range(len(names)),
        [mb[n]["populations"][1] for n in names],
        yerr=[mb[n]["stderr"][1] for n in names],
        color=["C0", "C1"] * 3,
    )
    ax.axhline(mb["exact"][1], color="k", ls="--", label="exact")
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_yscale("log")
    ax.set_ylabel("P(state B)")
    ax.set_title(f"Muller-Brown, kT={MB_KT:g}")
    ax.legend(fontsize=8)
    if ala is not None:
        ax = axes[0, 1]
        frame_ns = ala["frame_ps"] / 1000
        for who, c in (("MD", "C0"), ("ST", "C1")):
            pts = np.array(ala[who]["running_alphaL"])
            ax.plot(pts[:, 0] * frame_ns, pts[:, 1], "o-", color=c, label=who)
        ax.set_xlabel("simulated time per sampler (ns)")
        ax.set_ylabel("running P(alpha_L) at 300 K")
        ax.set_title("alanine dipeptide")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
