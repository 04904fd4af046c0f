"""Energy-based diffusion with and without the Fokker-Planck regulariser (ScoreMD).

Reproduces, at CPU scale, the central claim of Plainer et al. (NeurIPS 2025, arXiv
2506.17139): a diffusion model with an energy-parameterised score gives good i.i.d. samples,
but Langevin dynamics with its forces at t -> 0 is much worse unless the Fokker-Planck (FP)
residual is regularised; with FP (and/or a time mixture whose small-t expert is the force
field) simulation and i.i.d. metrics agree.

Mueller-Brown (kT = 23, ScoreMD's data recipe), four variants x seeds:

* ``plain``: one MLP energy (3 x 92, SiLU) on t in [1e-5, 1], DSM only (mid 0.5);
* ``fp``: the same with the two-probe FP term, weight 5e-4;
* ``moe``: time mixture (score MLPs on [0.6, 1] and [0.099, 0.6], energy MLP on
  [1e-5, 0.099]) trained high t first, DSM only;
* ``both``: the mixture with FP (5e-4) on the small-t energy expert.

Metrics against an independent reference run (ScoreMD's definitions, see
:mod:`sci_moe.sampling.diffusion.metrics`): JS divergence (100 x 100 bins on the box) and
PMF error (64 bins, (kT)^2, no root) of i.i.d. samples (reverse SDE, Euler-Maruyama) and of
Langevin dynamics with the learned forces; the FP residual sqrt(E r^2)/D at small t;
training time. ``floor`` compares the training data itself with the reference.

Alanine dipeptide (``--aldp MODEL.safetensors``): phi/psi JS and PMF of i.i.d. samples and
Langevin MD with the shipped model against the reference data, and bond-length
Wasserstein distances. The atoms a model describes come from its metadata
(``atom_indices``: the 5 beads by default, or e.g. the 10 heavy atoms of
``scripts/train_alanine_energy_model.py --atoms heavy``); phi/psi are taken on
:data:`~sci_moe.sampling.md.PHI_ATOMS` / ``PSI_ATOMS`` within them and the bond
W1 on the topology's bonds between them. ``--aldp-plot-name`` names the PNG.

Run: ``python benchmarks/energy_diffusion/run.py --json
benchmarks/energy_diffusion/results/energy_diffusion.json --plots docs/results/img``
(``--quick`` for a reduced run). :func:`verdicts` decides the paper's claims from the rows
and writes them into the JSON; ``--verdicts-only PATH`` recomputes a stored JSON's verdicts
(no training); ``--quoted-only PATH`` marks a stored paper-budget JSON's ScoreMD figures
(quoted from issue 28, not measured in that run) as quoted rows
(:func:`_energy_diffusion_paper.quoted_rows`).

``--paper-budget`` runs in pieces: ``--max-hours H`` stops after H hours (between cases,
or inside a case's training, which checkpoints every epoch) and writes the finished cases
(``machine["complete"]`` false); the same command again continues from ``--work-dir``
(finished cases are read back, an unfinished one resumes exactly). A long run keeps its
work folder beside its JSON and commits, after each piece, what the next piece reads:
``speed.json``, every finished case's ``result.json`` and the unfinished case's folder
(its checkpoint). Finished cases' training folders (per-step metrics, megabytes each),
``samples.npz`` and the data cache (rebuilt from its seeds) are not needed. Each case
records whether its training converged (``train_last_gain``, ``train_flat``:
:func:`sci_moe.train.is_flat` over the last stage's per-epoch loss, the best of its final
fifth of epochs less than 1 % below the best before; judged again from the stored curves
whenever a finished case is read back); the verdicts are decisive only when every case of a
pair did, over at least five seeds.

``--device cuda`` trains the diffusion models on a GPU (``TrainConfig.device``; the
draws of every step are the CPU generators', moved); the i.i.d. sampling, the Langevin MD
and the FP residual curve run on the CPU as in the stored results (the model is moved
back after training), and the paper budget's speed ratio stays a CPU measurement. The
device is recorded in ``machine`` for information (the stored CPU results are the
reference)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
from _ed_aldp import run_aldp
from _ed_mb import VARIANTS, run_mb
from _ed_verdicts import verdicts
from _energy_diffusion_paper import (
    PAPER,
    SCOREMD_SOURCE,
    quoted_rows,
    replot,
    run_paper_budget,
)


def main() -> None:
    p = _common.base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--plots", default="", help="folder for PNGs, e.g. docs/results/img")
    p.add_argument(
        "--aldp", default=None, help="alanine model files to evaluate, NAME=PATH[,NAME=PATH...]"
    )
    p.add_argument("--skip-mb", action="store_true", help="only the alanine part")
    p.add_argument("--aldp-reference", default="/work/data/alanine_reference.npz")
    p.add_argument(
        "--aldp-plot-name", default="energy_diffusion_aldp.png", help="PNG name for --aldp"
    )
    p.add_argument(
        "--paper-budget",
        action="store_true",
        help="Mueller-Brown at ScoreMD's budget (_energy_diffusion_paper.py); --quick shrinks it",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="--paper-budget: epochs (default ScoreMD's 180; fewer = a stated reduced budget)",
    )
    p.add_argument("--paper-seeds", default="1", help="--paper-budget: seeds, e.g. 1,2,3")
    p.add_argument(
        "--paper-iid",
        type=int,
        nargs=2,
        default=(100_000, 1000),
        metavar=("N", "STEPS"),
        help="--paper-budget: i.i.d. samples and reverse-SDE steps (ScoreMD: 100k)",
    )
    p.add_argument(
        "--paper-md",
        type=int,
        nargs=2,
        default=(100, 1000),
        metavar=("WALKERS", "FRAMES"),
        help="--paper-budget: Langevin walkers and frames (x 50 steps; ScoreMD: 100k frames)",
    )
    p.add_argument(
        "--eager",
        action="store_true",
        help="--paper-budget: train with the eager step (default: TrainConfig(compile=True))",
    )
    p.add_argument(
        "--work-dir",
        default="benchmarks/.energy_diffusion_paper",
        help="--paper-budget: checkpoints and per-case results (a rerun resumes)",
    )
    p.add_argument(
        "--paper-plot-name",
        default="energy_diffusion_mb_paper_curves.png",
        help="--paper-budget: PNG name of the learning curves",
    )
    p.add_argument(
        "--paper-replot",
        action="store_true",
        help="--paper-budget with --plots: redraw --paper-plot-name from the finished cases "
        "of --work-dir (nothing trained, the JSON untouched)",
    )
    p.add_argument(
        "--max-hours",
        type=float,
        default=None,
        metavar="H",
        help="--paper-budget: stop after H hours, inside a case's training if need be; the "
        "same command again continues from --work-dir",
    )
    p.add_argument(
        "--quoted-only",
        type=Path,
        default=None,
        metavar="JSON",
        help="mark a stored paper-budget JSON's ScoreMD figures as quoted rows (no training)",
    )
    args = p.parse_args()
    if _common.verdicts_only(args) is not None:
        return
    if args.quoted_only is not None:
        _common.rederive_rows(args.quoted_only, quoted_rows)
        return
    args.variants = [v for v in args.variants.split(",") if v]
    bad = set(args.variants) - set(VARIANTS)
    if bad:
        raise SystemExit(f"unknown variants {bad}; choose from {VARIANTS}")
    policy = _common.setup(args)
    if args.paper_budget:
        return _paper_main(args, policy)
    if args.quick:
        args.n_data, args.epochs, args.batch, args.batches_per_epoch = 20_000, 4, 256, 100
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 4000, 200, 100, 40
        args.aldp_iid, args.aldp_walkers, args.aldp_frames, args.aldp_stride = 1000, 50, 50, 50
    else:
        args.n_data, args.epochs, args.batch, args.batches_per_epoch = 50_000, 15, 256, 100
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 10_000, 500, 200, 50
        args.aldp_iid, args.aldp_walkers, args.aldp_frames, args.aldp_stride = 10_000, 100, 300, 50
    rows: list[_common.Row] = []
    table: list[list] = []
    t0 = time.perf_counter()
    if not args.skip_mb:
        run_mb(args, rows, table)
    if args.aldp:
        run_aldp(args, rows, table)
    _common.print_table(
        ["case", "iid JS", "MD JS", "iid PMF", "MD PMF", "FP r(1e-3)", "train s"],
        table,
        title=f"Energy diffusion; Mueller-Brown: {args.seeds} seeds (means)",
    )
    machine = _common.machine_info(
        seed=args.seed,
        quick=args.quick,
        malloc=policy,
        seeds=args.seeds,
        epochs=args.epochs,
        batch=args.batch,
        batches_per_epoch=args.batches_per_epoch,
        n_data=args.n_data,
        wall_s=time.perf_counter() - t0,
        device=args.device,
    )
    if args.json:
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        _common.write_json(args.json, "energy_diffusion", machine, rows, verdicts=verdicts(doc))


def _paper_main(args, policy: str) -> None:
    other, t0 = _common.OtherLoad(), time.perf_counter()
    args.paper_seeds = [int(s) for s in args.paper_seeds.split(",") if s]
    args.n_data, args.steps_per_epoch = PAPER["n_data"], PAPER["steps_per_epoch"]
    args.epochs = args.epochs or (2 if args.quick else PAPER["epochs"])
    args.n_iid, args.sde_steps = args.paper_iid
    args.walkers, args.md_frames = args.paper_md
    args.speed_steps = 300
    if args.quick:
        args.n_data, args.steps_per_epoch = 4000, 10
        args.n_iid, args.sde_steps, args.walkers, args.md_frames = 2000, 50, 20, 20
        args.speed_steps = 20
    if args.paper_replot:
        if not args.plots:
            _common.refuse("--paper-replot needs --plots DIR (where the PNG goes)")
        path = replot(args)
        print(f"wrote {path}")
        return
    rows, complete = run_paper_budget(args)
    machine = _common.machine_info(
        seed=args.seed,
        quick=args.quick,
        malloc=policy,
        paper_seeds=args.paper_seeds,
        variants=args.variants,
        epochs=args.epochs,
        paper_epochs=PAPER["epochs"],
        budget_fraction=args.epochs / PAPER["epochs"],
        device=args.device,
        steps_per_epoch=args.steps_per_epoch,
        n_data=args.n_data,
        n_iid=args.n_iid,
        sde_steps=args.sde_steps,
        md_walkers_x_frames=[args.walkers, args.md_frames],
        ema="ema_decay=0.005 (ScoreMD's 'EMA 0.995'), reset every epoch",
        compiled=not args.eager,
        scoremd_source=SCOREMD_SOURCE,
        complete=complete,
        convergence="sci_moe.train.is_flat over the last stage's per-epoch loss: its best "
        "over the last 20 % of epochs < 1 % below its best before (train_last_gain, "
        "train_flat)",
    )
    _common.finish(args, "energy_diffusion_paper", machine, rows, other, t0)
    if args.json is not None:  # the verdicts, by the same rule as --verdicts-only
        _common.rederive_verdicts(args.json, verdicts)


if __name__ == "__main__":
    main()
