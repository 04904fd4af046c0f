"""The shipped alanine-dipeptide energy model: i.i.d. and MD phi/psi JS vs the amber reference.

Evaluates a 5-bead energy-diffusion model file (default: the shipped
``sci_moe/sampling/files/alanine_energy_model.safetensors``) the way ``make demo`` does
and over several seeds:

* **i.i.d.**: reverse-SDE samples of the whole time mixture (Euler-Maruyama, 1000 steps,
  ScoreMD's sampler), phi/psi of the bead positions;
* **MD**: ``sci-moe md run --model FILE`` (torch engine, Langevin BAOAB, 1 fs, 300 K,
  the small-t expert's energy at ``t_eval`` as the force field) with the demo's settings
  (64 walkers x 100 ps from one minimised structure, a frame every 200 steps), then
  ``sci-moe md analyse --burn-in-ps 10`` (each walker's first 10 ps dropped;
  ``--md-walkers``, ``--md-time-ns`` and ``--burn-in-ps`` change the protocol; issue 28's
  earlier demo was 16 walkers, no burn-in);

each histogrammed on 64 x 64 bins over [-pi, pi]^2 and compared with the shipped
reference (amber99sbildn + OBC, 300 K, 36.8 ns) by the JS divergence in nats. The finite
sample floor is the JS of two halves of the reference itself (in the reference file).

``--before FILE`` evaluates a second model (default: the model of git revision
``c975d24``, the one shipped before issue 28, extracted with ``git show``) in the same run.

Run::

    OMP_NUM_THREADS=1 python benchmarks/alanine_energy_model/run.py --json \\
        benchmarks/alanine_energy_model/results/alanine_energy_model.json
    OMP_NUM_THREADS=1 python benchmarks/alanine_energy_model/run.py --quick   # < 3 min

``--quick``: one seed, 1000 i.i.d. samples with 200 sampler steps and a 4 x 5 ps MD run,
new model only (a smoke test, not a measurement). :func:`verdicts` decides issue 28's
target and the model comparison from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no sampling).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _aem_compare import compare_runs
from _aem_eval import BEFORE_REV, ROOT, SHIPPED, before_model, evaluate, exact_md_phi_psi
from _aem_plots import plot, plot_finetune, plot_protocol
from _aem_verdicts import verdicts
from _alanine_energy_model import (
    BINS,
    js_to_reference,
    reference,
)
from _alanine_energy_model import drop_burn_in as drop_burn_in
from _common import (
    OtherLoad,
    Row,
    base_parser,
    finish,
    machine_info,
    print_table,
    rederive_verdicts,
    setup,
    verdicts_only,
)

from sci_moe.sampling.md import angle_histogram

#: ``make demo``'s sampling: walkers x 100 ps from one minimised structure, and the
#: frames of each walker's first ``DEMO_BURN_IN_PS`` dropped by ``md analyse``.
DEMO_WALKERS = 64
DEMO_BURN_IN_PS = 10.0


def _seed_dir(text: str) -> tuple[int, Path]:
    seed, _, folder = text.partition(":")
    if not folder:
        raise SystemExit(f"--reuse-md takes SEED:DIR, got {text!r}")
    return int(seed), Path(folder)


def main() -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts)
    p.add_argument("--model", type=Path, default=SHIPPED)
    p.add_argument("--before", type=Path, default=None, help="model to compare (default: git)")
    p.add_argument("--no-before", action="store_true", help="evaluate --model only")
    p.add_argument("--label", default="after", help="case label of --model (default after)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="i.i.d. seeds")
    p.add_argument(
        "--md-seeds", type=int, nargs="+", default=None, help="MD seeds (default --seeds)"
    )
    p.add_argument(
        "--reuse-md",
        nargs="+",
        default=[],
        metavar="SEED:DIR",
        help="finished MD runs of --model (same settings) to analyse instead of running; "
        "a run started in parallel is waited for until DIR.done exists",
    )
    p.add_argument(
        "--before-json",
        type=Path,
        default=None,
        help="JSON of an earlier --label before run: adds before/after ratio rows",
    )
    p.add_argument(
        "--demo-dir",
        type=Path,
        default=None,
        help="a `make demo` folder of --model: its MD seed 0 (not run again)",
    )
    p.add_argument(
        "--hist-out", type=Path, default=None, help="save the first seed's histograms (.npz)"
    )
    p.add_argument(
        "--plot-finetune",
        type=Path,
        nargs=3,
        default=None,
        metavar=("HIST_NPZ", "TRAINING_JSON", "RESULT_JSON"),
        help="only draw the fine-tune's figures from a --hist-out file, its training JSON "
        "and the comparison JSON",
    )
    p.add_argument(
        "--plot",
        type=Path,
        nargs=3,
        default=None,
        metavar=("BEFORE_RUN", "AFTER_RUN", "TRAINING_JSON"),
        help="only draw the figures (docs/results/img/) from two demo runs and the curves",
    )
    p.add_argument(
        "--compare-runs",
        nargs=3,
        default=None,
        metavar=("BEFORE_DIR", "AFTER_DIR", "PS"),
        help="only: JS of the first PS ps per walker of two demo runs + the exact floor",
    )
    p.add_argument("--no-iid", action="store_true", help="MD only")
    p.add_argument(
        "--plot-protocol",
        type=Path,
        default=None,
        metavar="NPZ",
        help="Ramachandran figure of a --no-iid run's --hist-out (docs/results/img)",
    )
    p.add_argument(
        "--md-time-ns",
        type=float,
        default=None,
        help="MD length per walker in ns (default: the demo's 0.1)",
    )
    p.add_argument(
        "--exact-floor",
        action="store_true",
        help="also run the demo's sampling with the exact force field (OpenMM): the floor",
    )
    p.add_argument("--n-iid", type=int, default=5000, help="i.i.d. samples per seed")
    p.add_argument(
        "--md-walkers", type=int, default=None, help=f"MD walkers (default {DEMO_WALKERS})"
    )
    p.add_argument(
        "--burn-in-ps",
        type=float,
        default=None,
        help=f"MD frames dropped per walker (default {DEMO_BURN_IN_PS}, the demo's)",
    )
    args = p.parse_args()
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    if args.plot is not None:
        plot(*args.plot, ROOT / "docs/results/img")
        return 0
    if args.plot_protocol is not None:
        plot_protocol(args.plot_protocol, ROOT / "docs/results/img")
        return 0
    if args.plot_finetune is not None:
        plot_finetune(*args.plot_finetune, ROOT / "docs/results/img")
        return 0
    if args.compare_runs is not None:
        t0, other = time.perf_counter(), OtherLoad()
        b, a, ps = args.compare_runs
        rows = compare_runs(Path(b), Path(a), float(ps), reference()["p"])
        machine = machine_info(args.seed, mode="compare-runs", before_dir=b, after_dir=a, ps=ps)
        return finish(args, "alanine_energy_model_demo_partial", machine, rows, other, t0)
    t0 = time.perf_counter()
    other = OtherLoad()
    ref = reference()
    p_ref = ref["p"]
    meta = ref["metadata"] or {}
    seeds = args.seeds[:1] if args.quick else args.seeds
    md_seeds = (
        seeds if args.md_seeds is None else args.md_seeds[: len(seeds) if args.quick else None]
    )
    n_iid, steps = (1000, 200) if args.quick else (args.n_iid, 1000)
    walkers, time_ns = (4, 0.005) if args.quick else (DEMO_WALKERS, 0.1)
    burn_in = 1.0 if args.quick else DEMO_BURN_IN_PS
    if args.md_time_ns is not None:
        time_ns = args.md_time_ns
    if args.md_walkers is not None:
        walkers = args.md_walkers
    if args.burn_in_ps is not None:
        burn_in = args.burn_in_ps
    if args.no_iid:
        seeds = []
    rows = [
        Row("reference", "frames", float(meta.get("n_frames", 0)), "frames"),
        Row(
            "reference",
            "js_first_vs_second_half",
            round(meta.get("js_first_vs_second_half", 0.0), 4),
            "nats",
        ),
    ]
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = [(args.label, args.model)]
        if not (args.quick or args.no_before):
            before = args.before or before_model(work)
            if before is not None:
                models.insert(0, ("before", before))
        for label, path in models:
            r, per = evaluate(
                path,
                label,
                seeds,
                md_seeds,
                n_iid,
                steps,
                walkers,
                time_ns,
                work,
                p_ref,
                args.demo_dir if label == args.label else None,
                dict(_seed_dir(v) for v in args.reuse_md) if label == args.label else None,
                burn_in,
            )
            rows += r
            summary[label] = per
    if args.exact_floor:
        vals = []
        for s in md_seeds:
            t1 = time.perf_counter()
            ang = exact_md_phi_psi(s, walkers, 1000 * time_ns, burn_in_ps=burn_in)
            vals.append(js_to_reference(ang, p_ref))
            if len(vals) == 1:  # the first seed's histogram, for the figure (--hist-out)
                summary.setdefault("exact", {})["hist_md"] = angle_histogram(ang, BINS)[0]
            print(
                f"exact force field seed {s}: MD JS {vals[-1]:.4f} "
                f"({time.perf_counter() - t1:.0f} s)"
            )
            rows.append(Row(f"exact seed {s}", "md_js", round(vals[-1], 4), "nats"))
        rows.append(Row("exact mean", "md_js", round(float(np.mean(vals)), 4), "nats"))
        sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
        rows.append(Row("exact mean", "md_js_std", round(sd, 4), "nats"))
    if args.before_json is not None and args.before_json.is_file():
        old = {
            (r["case"], r["metric"]): r["value"]
            for r in json.loads(args.before_json.read_text())["rows"]
        }
        new = {(r.case, r.metric): r.value for r in rows}
        for case, metric in (("mean", "iid_js"), ("seed 0", "md_js"), ("mean", "md_js")):
            b, a = old.get((f"before {case}", metric)), new.get((f"{args.label} {case}", metric))
            if b is not None and a:
                rows.append(
                    Row(
                        f"{args.label} {case}",
                        f"{metric}_before",
                        b,
                        "nats",
                        vs=f"before {case}",
                        ratio=round(b / a, 3),
                    )
                )
    if "before" in summary and "after" in summary:
        for k in ("iid", "md"):
            if not summary["after"][k]:
                continue
            b, a = np.mean(summary["before"][k]), np.mean(summary["after"][k])
            rows.append(
                Row(
                    "after mean",
                    f"{k}_js_improvement",
                    round(float(b / a), 3),
                    "x",
                    vs="before mean",
                    ratio=round(float(b / a), 3),
                )
            )
    if args.hist_out is not None:
        from sci_moe._util import atomic_save_npz

        h = summary[args.label]
        hists = {k[5:]: h[k] for k in ("hist_iid", "hist_md") if k in h}
        for label, per in summary.items():  # every model's, as <label>_iid / <label>_md
            hists.update({f"{label}_{k[5:]}": per[k] for k in ("hist_iid", "hist_md") if k in per})
        atomic_save_npz(args.hist_out, {"reference": p_ref, **hists})
    print_table(
        ["case", "metric", "value", "unit"], [[r.case, r.metric, r.value, r.unit] for r in rows]
    )
    machine = machine_info(
        args.seed,
        seeds=list(seeds),
        n_iid=n_iid,
        iid_steps=steps,
        md_walkers=walkers,
        md_time_ns=time_ns,
        md_burn_in_ps=burn_in,
        quick=args.quick,
        model=str(args.model),
        before_rev=BEFORE_REV,
    )
    code = finish(args, "alanine_energy_model", machine, rows, other, t0)
    if args.json is not None and verdicts({"machine": machine, "rows": [vars(r) for r in rows]}):
        rederive_verdicts(args.json, verdicts)  # the same rule as --verdicts-only
    return code


if __name__ == "__main__":
    raise SystemExit(main())
