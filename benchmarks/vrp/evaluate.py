"""MoSES vs the unified model (and the basis model) on the 16 variants, in pieces.

Evaluates the policies of a long run (``train_long.py``: ``RUN_DIR/seed<k>/<model>.pt``) on
``--instances`` instances of each of the 16 variants at ``--customers`` (seen and held-out
variants; every instance drawn alone from its seed, :mod:`_vrp`), x8 augmentation, greedy
multi-start, every solution checked by the independent checker. References: PyVRP 0.14
ILS at each ``--pyvrp-limits`` (seconds, seed 0) and greedy savings, cached per instance
in ``--references`` (a piece computes what is missing until ``--max-hours``; with
``--references-only`` it stops there). Gap = ``100 (cost / reference - 1)``.

Reported per variant and model: mean gap to PyVRP at each limit (mean over seeds of the
instance mean), its spread over seeds, the gap of greedy savings, the wall time per
instance, and MoSES vs unified paired over the instances (the per-instance gap averaged
over the seeds; Wilcoxon signed-rank p-value). Verdicts (:func:`verdicts`, paired t-test
over the seeds of the mean gap, :func:`_common.decide_verdict`): MoSES beats the unified
model on the seen and on the held-out variants; MoSES beats the basis model (the adaptive
gate adds to the basis experts); the learned solver beats greedy savings on CVRP.
Decisive only when every model converged (from ``--train-json``) and p < 0.05.

Pieces: one unit is one (seed, model); the JSON keeps the finished units under ``runs``.

``--device cuda`` decodes the policies on a GPU (the instances, references, checks and gaps
stay on the CPU; the wall time per instance then times the GPU). The device is recorded in
the JSON's ``machine`` block for information only, not among the settings ``--resume``
compares: a run may go on on another device (the stored CPU results stay the reference).

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vrp/evaluate.py \\
        --threads 1 --references-only --max-hours 3 --pyvrp-limits 1 10
    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vrp/evaluate.py \\
        --threads 1 --max-hours 3 --resume --json benchmarks/vrp/results/vrp_evaluate.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import _vrp
import torch

from sci_moe.train import run_device
from sci_moe.vrp import HELD_OUT, SEEN, VARIANTS, actions_to_routes, check_solution
from sci_moe.vrp.moses import load_policy, solve


def _mean(xs):
    return statistics.fmean(xs)


def _seed_means(doc, model, variants, field):
    """Per seed: ``model``'s gap to ``field`` averaged over the instances of ``variants``."""
    out = []
    for seed in sorted(doc["runs"], key=int):
        gaps = doc["runs"][seed][model]["gaps"][field]
        out.append(_mean([g for v in variants for g in gaps[v]]))
    return out


def verdicts(doc: dict) -> list[dict]:
    """The paper's claims from the stored per-instance gaps (rule in the module docstring)."""
    field = _vrp.pyvrp_name(doc["machine"]["pyvrp_limits"][0])
    conv = doc.get("converged", {})
    models = doc["machine"]["models"]
    done = doc["machine"]["variants"]
    seen = [v for v in SEEN if v in done]
    held = [v for v in HELD_OUT if v in done]
    out = []

    def both(a, b):
        return bool(conv.get(a)) and bool(conv.get(b))

    if "moses" in models and "unified" in models:
        for claim, vs in (
            ("MoSES beats the unified multi-task model (seen variants)", seen),
            ("MoSES beats the unified model on variants unseen in training", held),
        ):
            if not vs:
                continue
            out.append(
                _common.decide_verdict(
                    claim,
                    metric=f"gap to {field} (%), mean over the {len(vs)} variants",
                    ours=_seed_means(doc, "moses", vs, field),
                    baseline="unified (no experts, equal budget)",
                    baseline_values=_seed_means(doc, "unified", vs, field),
                    higher_is_better=False,
                    converged=both("moses", "unified"),
                )
            )
    if "moses" in models and "basis" in models:
        out.append(
            _common.decide_verdict(
                "the adaptive gate adds to the basis experts (every evaluated variant)",
                metric=f"gap to {field} (%), mean over the {len(done)} variants",
                ours=_seed_means(doc, "moses", done, field),
                baseline="basis (experts without the gate, equal budget)",
                baseline_values=_seed_means(doc, "basis", done, field),
                higher_is_better=False,
                converged=both("moses", "basis"),
            )
        )
    if "moses" in models and "CVRP" in done:
        sav = _mean(doc["savings_gap"][field]["CVRP"])
        ours = _seed_means(doc, "moses", ["CVRP"], field)
        out.append(
            _common.decide_verdict(
                "the learned solver (MoSES) beats greedy savings on CVRP",
                metric=f"CVRP gap to {field} (%)",
                ours=ours,
                baseline="greedy savings (same instances)",
                baseline_values=[sav] * len(ours),
                higher_is_better=False,
                converged=bool(conv.get("moses")),
                note="savings is deterministic: a one-sample test of the seeds against it",
            )
        )
    return out


def _rows(doc: dict) -> list[dict]:
    from scipy import stats

    rows = []
    limits = doc["machine"]["pyvrp_limits"]
    models = doc["machine"]["models"]
    seeds = sorted(doc["runs"], key=int)
    for v in doc["machine"]["variants"]:
        split = "held-out" if v in HELD_OUT else "seen"
        for t in limits:
            f = _vrp.pyvrp_name(t)
            for m in models:
                per_seed = [_mean(doc["runs"][s][m]["gaps"][f][v]) for s in seeds]
                mean = _mean(per_seed)
                rows.append(_common.Row(f"{v} {split} {m}", f"gap_vs_{f}", mean, "%"))
                if len(per_seed) > 1:
                    rows.append(
                        _common.Row(
                            f"{v} {split} {m}",
                            f"gap_vs_{f}_std_over_seeds",
                            statistics.stdev(per_seed),
                            "%",
                        )
                    )
            rows.append(
                _common.Row(
                    f"{v} {split} greedy_savings",
                    f"gap_vs_{f}",
                    _mean(doc["savings_gap"][f][v]),
                    "%",
                )
            )
            if "moses" in models and "unified" in models:
                a = [
                    _mean(x)
                    for x in zip(
                        *(doc["runs"][s]["moses"]["gaps"][f][v] for s in seeds), strict=True
                    )
                ]
                b = [
                    _mean(x)
                    for x in zip(
                        *(doc["runs"][s]["unified"]["gaps"][f][v] for s in seeds), strict=True
                    )
                ]
                diff = [x - y for x, y in zip(a, b, strict=True)]
                p = 1.0 if not any(diff) else float(stats.wilcoxon(diff).pvalue)
                rows.append(_common.Row(f"{v} {split} moses vs unified", f"wilcoxon_p_{f}", p, "1"))
                rows.append(
                    _common.Row(
                        f"{v} {split} moses vs unified",
                        f"mean_gap_difference_{f}",
                        _mean(diff),
                        "%",
                    )
                )
        for m in models:
            rows.append(
                _common.Row(
                    f"{v} {split} {m}",
                    "wall_s_per_instance",
                    _mean([doc["runs"][s][m]["seconds"][v] for s in seeds]),
                    "s",
                )
            )
    return [_common.row_dict(r) for r in rows]


def main(argv=None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    _common.piece_arguments(p, unit="(seed, model)")
    _vrp.add_run_dir_argument(p)
    p.add_argument(
        "--train-json", type=Path, default=Path("benchmarks/vrp/results/vrp_train_long.json")
    )
    p.add_argument(
        "--references", type=Path, default=Path("benchmarks/vrp/cache/vrp_references.json")
    )
    p.add_argument("--references-only", action="store_true")
    p.add_argument("--instances", type=int, default=None, help="per variant (100)")
    p.add_argument("--customers", type=int, default=None, help="(50)")
    p.add_argument("--pyvrp-limits", type=float, nargs="+", default=None, help="s (1 10)")
    p.add_argument("--augment", type=int, default=8)
    p.add_argument(
        "--chunk", type=int, default=10, help="instances per solve call (memory: x8 x N rollouts)"
    )
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = p.parse_args(argv)
    if (done := _common.verdicts_only(args)) is not None:
        return done
    _common.setup(args)
    q = args.quick
    n = args.instances or (2 if q else 100)
    size = args.customers or (7 if q else 50)
    limits = args.pyvrp_limits or ([0.01, 0.02] if q else [1.0, 10.0])
    deadline = _common.piece_deadline(args)
    t0 = time.perf_counter()
    batch, keys = _vrp.instances(args.variants, size, n)
    cache = _vrp.ReferenceCache(args.references)
    left = cache.fill(batch, keys, limits, deadline=deadline)
    if left:
        print(f"references: {left} values left; run again (with --resume) to go on")
        return 0 if args.references_only else 3
    if args.references_only:
        print(f"references complete in {args.references}")
        return 0
    if args.json is None:
        raise SystemExit("--json PATH is needed")
    train = json.loads(args.train_json.read_text()) if args.train_json.is_file() else {}
    models = (train.get("settings") or {}).get("models") or list(_vrp.MODELS)
    seeds = sorted({int(s) for s in (train.get("runs") or {})}) or [0]
    machine = {
        "instances_per_variant": n,
        "customers": size,
        "pyvrp_limits": limits,
        "augmentations": args.augment,
        "models": models,
        "variants": args.variants,
        "seeds": seeds,
    }
    prev = _common.previous_run(args)
    if prev is not None:
        try:
            _common.check_resume_settings(
                {k: prev["machine"].get(k) for k in machine},
                machine,
                args.json,
                fix="resume with the same flags",
            )
        except ValueError as err:
            _common.refuse(str(err))
    doc = prev or {"benchmark": "vrp_evaluate", "runs": {}, "rows": []}
    doc["converged"] = {
        m: all(
            (train.get("runs") or {}).get(str(s), {}).get(m, {}).get("converged", False)
            for s in seeds
        )
        for m in models
    }
    by_v = {v: [i for i, k in enumerate(keys) if k.startswith(f"{v}/")] for v in args.variants}
    doc["savings_gap"] = {}
    for t in limits:
        f = _vrp.pyvrp_name(t)
        g = _vrp.gap(cache.costs(keys, "savings"), cache.costs(keys, f))
        doc["savings_gap"][f] = {v: g[idx].tolist() for v, idx in by_v.items()}
    load = _common.OtherLoad()
    for seed in seeds:
        for m in models:
            if m in doc["runs"].get(str(seed), {}):
                continue
            if time.perf_counter() >= deadline:
                break
            pol, _ = load_policy(args.run_dir / f"seed{seed}" / f"{m}.pt")
            pol = pol.double().to(run_device(args.device))  # solve answers on the CPU
            rec = {"gaps": {_vrp.pyvrp_name(t): {} for t in limits}, "seconds": {}}
            for v, idx in by_v.items():
                ins = batch.index(torch.tensor(idx))
                ts = time.perf_counter()
                parts = [
                    solve(pol, ins.index(slice(c, c + args.chunk)), augmentations=args.augment)
                    for c in range(0, len(idx), args.chunk)
                ]
                rec["seconds"][v] = (time.perf_counter() - ts) / len(idx)
                cost = torch.cat([c for c, _ in parts])
                width = max(a.shape[1] for _, a in parts)
                acts = torch.cat(
                    [torch.nn.functional.pad(a, (0, width - a.shape[1])) for _, a in parts]
                )
                bad = [
                    keys[i]
                    for j, i in enumerate(idx)
                    if check_solution(ins, j, actions_to_routes(acts[j]))
                ]
                if bad:
                    raise SystemExit(f"{m} seed {seed}: infeasible solutions on {bad[:5]}")
                for t in limits:
                    f = _vrp.pyvrp_name(t)
                    ref = cache.costs([keys[i] for i in idx], f)
                    rec["gaps"][f][v] = _vrp.gap(cost, ref).tolist()
            doc["runs"].setdefault(str(seed), {})[m] = rec
            _common.write_json_doc(args.json, {**doc, "machine": {**machine}, "rows": []})
            print(f"seed {seed} {m} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    complete = all(m in doc["runs"].get(str(s), {}) for s in seeds for m in models)
    doc["complete"] = complete
    doc["machine"] = {
        **_common.machine_info(
            seed=args.seed,
            quick=q,
            wall_s=round(time.perf_counter() - t0, 1),
            device=args.device,  # information only: not in the settings --resume compares
        ),
        **machine,
        "contention": load.report(),
    }
    if complete:
        doc["rows"] = _rows(doc)
        doc["verdicts"] = [_common.verdict_entry(**v) for v in verdicts(doc)]
        _common.print_table(
            ["claim", "verdict", "p"],
            [[v["claim"], v["verdict"], v["p_value"]] for v in doc["verdicts"]],
        )
    _common.write_json_doc(args.json, doc)
    print(f"{'complete' if complete else 'paused; continue with --resume'}; wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
