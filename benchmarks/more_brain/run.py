"""MoRE-Brain stage 1 on nonlinear planted fMRI, trained until flat: decoding, groups, transfer.

Data (:func:`sci_moe.neuro.plant_nonlinear_voxels`, issue 45): targets are real
all-MiniLM-L6-v2 embeddings (384-d) of the ~1500 offline mini-newsgroups sentences
(:func:`sci_moe.data.planted_fmri.sentence_targets`); voxels sit in 4 networks of 4
regions; each network responds to its own target subspace with its own nonlinear family
(exponential rate, cubic, saturating, tuning bump), each region to its own further
subspace with its own parameter of the family; every subject mixes pairs of voxels of a
region, permutes the voxels and scales them by its own gains; unit noise at SNR
``snr``. A linear read-out is not optimal. Split per subject: last 300 sentences test
(retrieval among them, chance top-1 = 1/300), the 150 before them validation, the rest
train.

Contestants (subjects 1-2 trained jointly, validated and tested on subject 1):

* ``ridge``: closed-form ridge (alpha from 13 values in 1e-1..1e5, by held-out cosine);
* ``flat MoE``: one expert-choice level of 16 experts (same front end, experts, loss);
* ``MoRE-Brain``: the 2 -> 4 -> 8 -> 16 expert-choice tree (:class:`MoREBrainEncoder`).

Every learned fit (both MoEs, the linear-data tree, the three transfer fits) trains on the
shared trainer (AdamW, cosine schedule, no warm-up) *until flat*, in cycles
(:func:`_common.until_flat`, :func:`fit_until_flat`): a cycle is ``steps`` steps (transfer:
``ft_steps``) with a validation evaluation every ``eval_every`` (``ft_eval_every``) steps;
cycle ``c`` draws its batches with the seed ``seed + 100 c`` (cycle 0 is the plain
fixed-step run of before, bit for bit) and is a fresh cosine schedule from the previous
cycle's best validation top-1 weights. After each cycle the concatenated validation curve is
judged; the first flat one ends the fit, and at most ``cycles`` cycles run (full plan 4,
``--quick`` 2; ``--max-cycles N`` overrides), a fit that reaches the cap unflat records
``flat`` false. The fit's result is the best validation top-1 weights over all its cycles
(a later cycle replaces them only when strictly better). Recorded per fit: the
concatenated curve, ``cycles``, ``steps`` (all cycles together) and ``flat``. A curve is
*flat* (:func:`sci_moe.train.is_flat`, :data:`FLAT_RULE`) when its best validation top-1
of the last 20 % of its steps beat the best before them by less than ``FLAT_ATOL`` = 0.01
(the resolution of a top-1 over 150 validation sentences, steps of 1/150: one sentence more
is no gain) or by less than 1 % relative (never the looser one below a top-1 of 1). The
stored runs of the fixed-step plan (one cycle) were judged by the same rule written by hand
(the best of the whole curve against the best of its first 80 %, < 0.01); on their stored
curves both give the same flags, so their ``flat`` rows stand.

Measured per seed (data and model seed ``seed + i``): top-1/top-5 retrieval; ARI of the
voxel -> expert assignment (tree level 1 against the 4 networks, tree level 3 and the flat
MoE against the 16 regions) against spectral clustering of the absolute voxel
correlations (training rows) into 4 and 16 clusters; transfer to subject 3 with
``new_rows`` of its training rows: router(+front-end)-only fine-tuning of the trained tree,
full fine-tuning of it, a tree trained from scratch, and ridge on the same rows. And a
diagnosis of the issue-41 result (the tree far below ridge): on that run's *linear*
planted data (:func:`sci_moe.neuro.plant_voxels`, SNR ``linear_snr``, one subject) the
tree trained by the old recipe (``old_steps`` steps, constant learning rate, no
validation) and by this run's, against ridge.

Run: ``python benchmarks/more_brain/run.py [--quick] [--json PATH] [--seed 0] [--seeds 5]
[--max-cycles N] [--plots DIR] [--max-hours H] [--resume]``; ``--max-hours`` stops between
seeds, ``--resume`` continues from ``JSON.state.json`` (which stores the settings: a state
of other settings, such as one of the fixed-step plan, which stored none, is refused); the
JSON is rewritten from the finished seeds after every seed. ``--verdicts-only PATH``
recomputes a stored JSON's verdicts. ``--device cuda`` trains the encoders on a GPU
(default cpu, the reference of the stored results); it is not one of the settings (a run
resumes on any device), the JSON's machine record notes the last piece's.

Cost (one thread): a seed of the fixed-step plan (one cycle per fit) took ~290 s, ~95 % of
it in the fits; a fit's cost grows with its cycles, so the worst case (every fit at the cap
of 4 cycles) is ~4 x 290 s, about 20 min a seed and ~3.2 h for 10 seeds; fits flat after
one cycle cost what they did.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    OtherLoad,
    base_parser,
    check_resume_settings,
    machine_info,
    piece_arguments,
    piece_deadline,
    refuse,
    resume_state,
    setup,
    state_path,
    verdicts_only,
    write_json,
    write_json_doc,
)
from _common import verdict_entry as verdict_entry
from _more_brain_plots import plot
from _more_brain_report import TRANSFER as TRANSFER
from _more_brain_report import rows_of
from _more_brain_train import FLAT_RULE, run_seed
from _more_brain_train import N_TEST as N_TEST
from _more_brain_train import N_VAL as N_VAL
from _more_brain_train import fit_until_flat as fit_until_flat
from _more_brain_train import flat as flat
from _more_brain_verdicts import verdicts

from sci_moe.data.planted_fmri import sentence_targets

BENCHMARK = "more_brain"


def settings(quick: bool, max_cycles: int | None = None) -> dict:
    """Sizes of the run (``--quick``: tiny, for CI and checks).

    ``cycles`` is the most training cycles of a fit (full plan 4, quick 2); ``max_cycles``
    (``--max-cycles``) overrides it.
    """
    if max_cycles is not None and max_cycles < 1:
        raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
    cfg = _plan(quick)
    if max_cycles is not None:
        cfg["cycles"] = int(max_cycles)
    return cfg


def _plan(quick: bool) -> dict:
    if quick:
        return {
            "voxels": 64,
            "snr": 4.0,
            "d": 8,
            "batch": 32,
            "steps": 200,
            "eval_every": 20,
            "ft_steps": 80,
            "ft_eval_every": 10,
            "new_rows": [25, 100],
            "lr": 3e-3,
            "old_steps": 100,
            "linear_snr": 0.3,
            "cycles": 2,
        }
    return {
        "voxels": 128,
        "snr": 4.0,
        "d": 16,
        "batch": 64,
        "steps": 2000,
        "eval_every": 100,
        "ft_steps": 500,
        "ft_eval_every": 50,
        "new_rows": [25, 100, 400],
        "lr": 3e-3,
        "old_steps": 300,
        "linear_snr": 0.3,
        "cycles": 4,
    }


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    ap.add_argument("--plots", type=Path, default=None, metavar="DIR")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--max-cycles",
        type=int,
        default=None,
        metavar="N",
        help="the most training cycles of a fit (default: the plan's, 4; --quick 2)",
    )
    piece_arguments(ap)
    args = ap.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    if args.max_cycles is not None and args.max_cycles < 1:
        ap.error(f"--max-cycles must be >= 1, got {args.max_cycles}")
    cfg = settings(args.quick, args.max_cycles)
    state = resume_state(args)
    if state:  # a new run (empty state) passes
        try:
            check_resume_settings(
                state.get("settings"),
                cfg,
                state_path(args.json),
                before="the fixed-step plan (one training cycle per fit), not this run's "
                "training until flat",
            )
        except ValueError as err:
            refuse(str(err))
    state["settings"] = cfg
    setup(args)
    deadline = piece_deadline(args)
    load = OtherLoad()
    t0 = time.perf_counter()
    _, targets = sentence_targets()
    seeds = [args.seed + i for i in range(args.seeds)]
    for i, seed in enumerate(seeds):
        if str(seed) in state:
            continue
        if time.perf_counter() > deadline:
            print("--max-hours spent: stopping between seeds (continue with --resume)")
            break
        ts = time.perf_counter()
        plots = args.plots if i == 0 else None
        state[str(seed)] = run_seed(seed, cfg, targets, plots, args.device)
        state[str(seed)]["seed_seconds"] = time.perf_counter() - ts
        print(f"seed {seed}: {state[str(seed)]['seed_seconds']:.0f} s")
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json_doc(state_path(args.json), state)
    done = [s for s in seeds if str(s) in state]
    print(f"piece: {time.perf_counter() - t0:.0f} s; finished seeds {done}")
    if args.json is None or len(done) < 2:
        return 0
    rows, curves = rows_of(state, cfg, done)
    info = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=done,
        complete=len(done) == len(seeds),
        params=cfg,
        flat_rule=FLAT_RULE,
        seed_seconds_total=float(sum(state[str(s)]["seed_seconds"] for s in done)),
        contention_last_piece=load.report(),
        device=args.device,  # of the last piece, for information (not in the settings)
    )
    write_json(args.json, BENCHMARK, info, rows)
    doc = json.loads(args.json.read_text())
    doc["curves"] = curves
    doc["verdicts"] = verdicts(doc)
    write_json_doc(args.json, doc)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={v['p_value']}  {v['claim']}")
    if args.plots is not None:
        plot(doc, args.plots)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
