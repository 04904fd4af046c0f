"""Simulated tempering: exact spectral gaps against the decomposition bounds, and sampling.

Part 1, **exact gaps** (:mod:`sci_moe.theory.spectral`). A 1-D two-mode Gaussian mixture
``0.5 N(-D/2, 1) + 0.5 N(D/2, 1)`` on a grid of step ``h = 0.25`` (padded by 5 sigma),
grid RWMH with proposal scale 1, and the discretised simulated-tempering chain built on it
(:func:`simulated_tempering_chain` defaults: geometric ladder from ``beta = 1/D^2`` with
``ceil(2 ln D) + 2`` levels, matched level weights, power tempering). For every separation
``D`` the table gives the exact spectral gap of RWMH and of ST, the ratio ST / RWMH, and
the three lower bounds on the ST gap from :func:`check_bound` (``martin-randall`` and
``jstv`` with the hard (level, component) partition, ``soft`` with the component
responsibilities), each as bound / exact gap (<= 1 when the bound holds; closer to 1 is a
tighter bound). These are the classical decompositions, not Garg-Balasubramanian-Zhou's
constants (not available as text; see ``sci_moe.theory.spectral``). Plot: gap vs ``D``
on log-log axes (ST roughly polynomial, RWMH ``~ exp(-D^2/8)``).

Part 2, **sampling** (:mod:`sci_moe.sampling.tempering`). Two-mode mixtures
``0.3 N(-D/2 e_1, I) + 0.7 N(D/2 e_1, I)`` with ``D = 8`` in ``d = 2`` and ``d = 10``.
Observable: the mode indicator ``1[x_1 > 0]`` (exact mean 0.7). Contestants:

* ``RWMH``: :func:`sample` with :class:`RWMH`, 64 chains;
* ``ST``: :class:`SimulatedTempering` with RWMH, 64 chains, SAMS level weights (learned
  online, no prior knowledge of the normalising constants), estimates from the samples at
  ``beta = 1`` (:func:`masked_mean`);
* ``PT``: :class:`ParallelTempering` with RWMH, ``64 // L`` systems of ``L`` replicas.

Budget: a **fixed number of log-density evaluations**, ``64 * n_iterations`` for every
contestant (RWMH and ST spend one evaluation per chain and iteration, PT one per replica),
and the same ladder (geometric from ``1/D^2``; ``L = 7`` in 2-D, ``L = 12`` in 10-D) for ST
and PT. Chains start alternately at the two mode centres (half at each), so a sampler that
never crosses reports a weight near 0.5 (error about 0.2). Proposal scale at ``beta = 1``:
``2.38 / sqrt(d)``. Reported per contestant: estimate, |error|, its standard error, the
ESS of the indicator (Sokal IAT on the pooled series; ST: ``p (1 - p) / se^2`` from
:func:`masked_mean`) and ESS per second of wall time. Rows carry ``ratio`` against RWMH:
error_RWMH / error and ESS/s / ESS/s_RWMH (> 1: tempering better).

Part 3, **Muller-Brown** (md-engine's :class:`~sci_moe.sampling.md.potentials.MuellerBrown`,
standard parameters) at ``kT = 10`` (barrier out of the deepest minimum A ~ 10.6 kT), as
the log-density ``-E/kT`` (:func:`energy_log_prob`). Observable: the populations of the
three nearest-minimum (Voronoi) states A, B, C, exact by grid quadrature. 64 chains,
half started in A and half in B; every local kernel (RWMH step 0.06, MALA step 0.03,
Langevin BAOAB with timestep 0.02 and friction 10, unit mass) alone vs inside simulated
tempering (8 geometric levels from ``beta = 0.06``, i.e. up to kT = 167, SAMS weights),
the same number of iterations (one local step + one level move per iteration), the first
fifth discarded. Reported: populations, max |error|, the standard error of P(B), the
state changes per chain seen at the target level, round trips, ESS/s of the B indicator,
and ratios ST / plain for the same kernel.

Part 4, **alanine dipeptide** (md-engine's ``build_system``: amber99sbildn + OBC,
H-bond constraints; LangevinMiddle 1/ps, 2 fs, OpenMM Reference platform): plain MD at
300 K vs OpenMM simulated tempering (:class:`OpenMMSimulatedTempering`, 10 geometric
temperatures 300-800 K, SAMS weights, Gibbs level moves every 50 steps, velocities
rescaled) for the same number of MD steps. Frames every 50 steps (0.1 ps); macrostates
from (phi, psi): beta/C7eq (phi < 0, psi outside (-120, 50) deg), alpha_R, alpha_L/C7ax
(phi > 0); ST uses the frames at 300 K only. Reported: populations with standard errors
(Sokal IAT), phi transitions between the cores (-180, -30) and (30, 130) deg at 300 K (and
for ST at any level), temperature round trips, ESS/s of the alpha_L indicator, and the
running P(alpha_L) vs simulated time.

Run: ``python benchmarks/tempering/run.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--threads N] [--theory]``; ``--theory`` runs only the issue-47 section instead (the
restricted-gap decomposition of :mod:`sci_moe.theory.spectral.st_bound` against exact
gaps, with verdicts; see ``benchmarks/tempering/_tempering_theory.py``). ``--quick``: D in
(2, 4, 8), 10000 iterations, Muller-Brown 3000 iterations, alanine 0.1 ns per sampler
(about 1 min on one core); full: D in (2, 4, 6, 8, 10, 12), 50000 iterations,
Muller-Brown 20000 iterations, alanine 5 ns per sampler (about 7-10 min on one core, most
of it the 5 million MD steps of the alanine part).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import OtherLoad, Row, base_parser, machine_info, setup, write_json
from _tempering_alanine import (
    ALA_LEVELS,
    ALA_STEPS,
    ALA_T0,
    ALA_TMAX,
    plot_extra,
    report_alanine,
    run_alanine,
)
from _tempering_gaps import H, exact_gaps, plot_gaps, report_gaps
from _tempering_mb import MB_BETA_MIN, MB_KT, MB_LEVELS, report_muller_brown, run_muller_brown
from _tempering_sampling import N_CHAINS, plot_sampling, report_sampling, run_sampling

BENCHMARK = "tempering"


# ------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0])
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument(
        "--theory",
        action="store_true",
        help="run only the issue-47 section (benchmarks/tempering/_tempering_theory.py): the "
        "restricted-gap decomposition vs exact gaps in D and d, TV vs log(1/eps), ST-MH vs "
        "MH over 5 seeds, with verdicts",
    )
    args = parser.parse_args(argv)
    setup(args)
    if args.theory:
        from _tempering_theory import main_theory

        return main_theory(args)
    Ds = [2.0, 4.0, 8.0] if args.quick else [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    n_iter = 10000 if args.quick else 50000
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        separations=Ds,
        grid_step=H,
        n_iterations=n_iter,
        n_chains=N_CHAINS,
        budget="fixed number of log-density evaluations",
        muller_brown={"kT": MB_KT, "levels": MB_LEVELS, "beta_min": MB_BETA_MIN},
        alanine={
            "temperatures_k": [ALA_T0, ALA_TMAX],
            "levels": ALA_LEVELS,
            "steps": 50_000 if args.quick else ALA_STEPS,
            "platform": "Reference",
        },
    )
    print(
        f"tempering: torch {machine['torch']}, {machine['cpu']}, "
        f"{torch.get_num_threads()} threads, seed {args.seed}, git {machine['git']}"
    )
    other = OtherLoad()
    rows: list[Row] = []

    gaps = exact_gaps(Ds)
    report_gaps(gaps, rows)
    print()
    samp = {d: run_sampling(d, n_iter, args.seed) for d in (2, 10)}
    report_sampling(samp, n_iter, rows)
    print()
    mb_iter = 3000 if args.quick else 20000
    mb = run_muller_brown(mb_iter, args.seed)
    report_muller_brown(mb, mb_iter, rows)
    print()
    ala_steps = 50_000 if args.quick else ALA_STEPS
    ala = run_alanine(ala_steps, args.seed)
    report_alanine(ala, rows)

    if args.plots is not None:
        plot_gaps(gaps, args.plots / "tempering_gaps.png")
        plot_sampling(samp, args.plots / "tempering_sampling.png")
        plot_extra(mb, ala, args.plots / "tempering_mb_alanine.png")
        print(f"plots in {args.plots}")
    load = other.report()
    machine["contention"] = load
    print(f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_s']} CPU s")
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
