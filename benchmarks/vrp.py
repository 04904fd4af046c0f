"""MoSES (multi-task VRP with gated-LoRA basis experts) vs baselines, gap to PyVRP 0.14 ILS.

For every seed: pretrain a CVRP backbone (stage 1), train the four basis LoRA experts
on OVRP / VRPB / VRPL / VRPTW (stage 2), train the adaptive gate + residual LoRA on the
seen variants (stage 3; exact-match and dense routing, from the same stage-2 model);
train a same-architecture multi-task model without experts on the seen variants for the
same number of updates (MTPOMO-like). Evaluate on seen and held-out variants against
PyVRP 0.14 ILS (fixed time limit) and nearest neighbour, all on the same instances.
Gap = mean over instances of ``cost / pyvrp - 1`` in %.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time

import _common
import torch

from sci_moe.vrp import (
    MTVRPPolicy,
    PolicyConfig,
    TrainConfig,
    actions_to_routes,
    check_solution,
    generate_instances,
    nearest_neighbour,
    solve,
    solve_pyvrp,
    train_stage,
)
from sci_moe.vrp.variants import SEEN

EVAL = ("CVRP", "VRPTW", "OVRPB", "VRPBLTW", "OVRPBLTW")
HELD = ("VRPBLTW", "OVRPBLTW")
BASIS_VARIANTS = ["OVRP", "VRPB", "VRPL", "VRPTW"]
GATE_NAMES = ("backbone", "O", "B", "L", "TW")


def _gap(cost, ref):
    return 100.0 * float((cost / ref - 1).mean())


def _gate(policy, ins):
    solve(policy, ins, augmentations=1)
    enc = [m for m in policy.layers.modules() if getattr(m, "last_gate", None) is not None]
    g = torch.stack([m.last_gate.reshape(-1, 5).mean(0) for m in enc]).mean(0)
    return g.tolist()


def main(argv=None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--num-customers", type=int, default=20)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--pyvrp-seconds", type=float, default=None)
    args = p.parse_args(argv)
    _common.setup(args)
    load = _common.OtherLoad()
    q = args.quick
    N = args.num_customers
    n_eval = 8 if q else 32
    t_lim = args.pyvrp_seconds or (0.2 if q else 1.0)
    s1, s2, s3, bs = (12, 6, 6, 8) if q else (150, 60, 60, 16)
    s_mt = s1 + s2 + s3
    cfg = PolicyConfig(d_model=32, num_heads=4, num_layers=2, d_ff=64, rank=4)

    evals = {v: generate_instances(n_eval, N, v, seed=10_000 + i) for i, v in enumerate(EVAL)}
    ref, nn_cost = {}, {}
    for v, ins in evals.items():
        sols = [solve_pyvrp(ins, b, t_lim, seed=0) for b in range(n_eval)]
        if not all(s["feasible"] for s in sols):
            raise SystemExit(f"PyVRP returned an infeasible solution on {v}")
        ref[v] = torch.tensor([s["cost"] for s in sols])
        nn_cost[v] = nearest_neighbour(ins.to(torch.float64))[0].float()
    rows, gaps, gates, times = [], {}, {}, {}
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        moses = MTVRPPolicy(cfg)
        tc = lambda steps, k: TrainConfig(steps, bs, N, 1e-3, 100 * seed + k)  # noqa: E731, B023
        train_stage(moses, "backbone", "CVRP", tc(s1, 1), progress=False)
        backbone = copy.deepcopy(moses)
        backbone.mode = "backbone"
        train_stage(moses, "expert", BASIS_VARIANTS, tc(s2, 2), progress=False)
        dense = copy.deepcopy(moses)
        for m in dense.moses_layers():
            m.routing = "dense"
        train_stage(moses, "gated", list(SEEN), tc(s3, 3), progress=False)
        train_stage(dense, "gated", list(SEEN), tc(s3, 3), progress=False)
        torch.manual_seed(seed)
        mt = MTVRPPolicy(PolicyConfig(**{**cfg.__dict__, "rank": 0}))
        train_stage(mt, "backbone", list(SEEN), tc(s_mt, 4), progress=False)
        models = {
            "moses_exact": moses,
            "moses_dense": dense,
            "backbone": backbone,
            "mt_no_experts": mt,
        }
        for v, ins in evals.items():
            for name, pol in models.items():
                t0 = time.perf_counter()
                cost, acts = solve(pol, ins)
                times.setdefault(name, []).append((time.perf_counter() - t0) / n_eval)
                bad = sum(
                    bool(check_solution(ins, b, actions_to_routes(acts[b]))) for b in range(n_eval)
                )
                if bad:
                    raise SystemExit(f"{name} produced {bad} infeasible solutions on {v}")
                gaps.setdefault((v, name), []).append(_gap(cost, ref[v]))
            for name in ("moses_exact", "moses_dense"):
                gates.setdefault((v, name), []).append(_gate(models[name], ins))
        print(f"seed {seed} done", file=sys.stderr, flush=True)
    params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    table = []
    for v in EVAL:
        split = "held-out" if v in HELD else "seen"
        base = statistics.mean(gaps[(v, "mt_no_experts")])
        for name in ("moses_exact", "moses_dense", "backbone", "mt_no_experts"):
            g = gaps[(v, name)]
            m, sd = statistics.mean(g), statistics.stdev(g) if len(g) > 1 else 0.0
            case = f"{v} N={N} {split} {name}"
            ratio = (base / m) if name != "mt_no_experts" and m > 0 else None
            rows.append(_common.Row(case, "gap_vs_pyvrp_mean", m, "%", "mt_no_experts", ratio))
            rows.append(_common.Row(case, "gap_vs_pyvrp_std_over_seeds", sd, "%"))
            table.append([case, m, sd])
        nn_gap = _gap(nn_cost[v], ref[v])
        rows.append(
            _common.Row(f"{v} N={N} {split} nearest_neighbour", "gap_vs_pyvrp_mean", nn_gap, "%")
        )
        table.append([f"{v} N={N} {split} nearest_neighbour", nn_gap, 0.0])
        rows.append(
            _common.Row(
                f"{v} N={N} pyvrp_0.14_ils_{t_lim}s", "mean_cost", float(ref[v].mean()), "distance"
            )
        )
        for name in ("moses_exact", "moses_dense"):
            mean_gate = torch.tensor(gates[(v, name)]).mean(0).tolist()
            for gname, a in zip(GATE_NAMES, mean_gate, strict=True):
                rows.append(_common.Row(f"{v} gate {name}", f"alpha_{gname}", a, "1"))
    for name, t in times.items():
        rows.append(
            _common.Row(
                f"N={N} {name}",
                "inference_s_per_instance",
                statistics.mean(t),
                "s",
                "pyvrp_time_limit",
                t_lim / statistics.mean(t),
            )
        )
    for name, n in params.items():
        rows.append(_common.Row(f"{name}", "parameters", float(n), "count"))
    _common.print_table(
        ["case", "gap % (mean)", "std over seeds"],
        table,
        title=f"gap to PyVRP 0.14 ILS ({t_lim}s), N={N}, {args.seeds} seeds",
    )
    if args.json:
        machine = _common.machine_info(
            seed=args.seed,
            quick=q,
            seeds=list(range(args.seeds)),
            steps={"backbone": s1, "expert": s2, "gated": s3, "mt_no_experts": s_mt, "batch": bs},
            eval_instances_per_variant=n_eval,
            reference=f"PyVRP 0.14 ILS, {t_lim} s per instance",
            contention=load.report(),
        )
        _common.write_json(args.json, "vrp", machine, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
