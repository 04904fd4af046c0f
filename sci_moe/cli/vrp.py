"""``sci-moe vrp``: train a MoSES multi-task VRP solver, solve a VRPLIB instance with it.

Examples
--------
.. code-block:: console

    $ sci-moe vrp generate --variant VRPTW --customers 20 --count 3 --out instances
    $ sci-moe vrp train --out moses.pt --steps 200 80 80 --customers 20
    $ sci-moe vrp solve instances/VRPTW_000.vrp --model moses.pt --out VRPTW_000.sol
    $ sci-moe vrp solve my_instance.vrp --model moses.pt --pyvrp-seconds 2 --json result.json
    $ sci-moe vrp solve my_instance.vrp   # the policy shipped in the package, if any
    $ sci-moe vrp solve my_instance.vrp --model moses.pt --plot routes.png
    $ sci-moe vrp train --out moses.pt --steps 2000 1000 1000 --device cuda

Instance files follow VRPLIB (see :mod:`sci_moe.vrp.vrplib_io` for the fields of the 16
variants). ``--device`` (``train`` and ``solve``; default ``cpu``) runs the policy on
``cuda`` or ``cuda:N``: instances are still drawn (``train``) or read (``solve``) on the
CPU and moved to the policy's device; the checkpoint holds CPU tensors, the routes and
costs come back to the CPU. Exit codes: 0 success, 2 bad input (malformed file, demand
above the capacity, a time window or length limit no route can meet, a missing or
foreign checkpoint, ``--device cuda`` where torch sees no GPU: refused before anything is
read or written).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ._threads import add_threads_argument, torch_threads

__all__ = ["add_parser", "generate", "plot_routes", "solve", "train"]


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``vrp`` subcommand (``generate``, ``train``, ``solve``) to ``sub``."""
    p = sub.add_parser(
        "vrp",
        help="multi-task vehicle routing (MoSES): train a solver, solve VRPLIB instances",
        description="Multi-task vehicle routing with gated-LoRA basis experts (MoSES).",
    )
    vs = p.add_subparsers(dest="vrp_command", required=True)

    g = vs.add_parser("generate", help="write random instances (RouteFinder's distribution)")
    g.add_argument("--variant", default="CVRP", help="one of the 16 variants (default CVRP)")
    g.add_argument("--customers", type=int, default=20, help="customers per instance (20)")
    g.add_argument("--count", type=int, default=1, help="number of instances (default 1)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--out", default=".", help="output folder (default .)")
    g.set_defaults(func=generate)

    t = vs.add_parser("train", help="train a MoSES policy (3 stages) and save a checkpoint")
    t.add_argument("--out", required=True, help="checkpoint file to write (.pt)")
    t.add_argument(
        "--steps",
        type=int,
        nargs=3,
        default=[100, 50, 50],
        metavar=("BACKBONE", "EXPERTS", "GATE"),
        help="updates of the 3 stages (default 100 50 50)",
    )
    t.add_argument("--customers", type=int, default=20, help="training instance size (20)")
    t.add_argument("--batch-size", type=int, default=16, help="instances per update (16)")
    t.add_argument("--d-model", type=int, default=64, help="embedding size (64)")
    t.add_argument("--layers", type=int, default=2, help="encoder layers (2)")
    t.add_argument("--rank", type=int, default=8, help="LoRA rank of the experts (8)")
    t.add_argument(
        "--gate", default="sigmoid", help="gate activation: sigmoid, softmax, norm_softplus"
    )
    t.add_argument("--routing", default="exact", help="exact (variant-aware) or dense")
    t.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (1e-3)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--no-progress", action="store_true", help="no progress output")
    add_threads_argument(t, THREADS, "the small policy trains fastest on one")
    _add_device_argument(t, "training")
    t.set_defaults(func=train)

    s = vs.add_parser("solve", help="solve a VRPLIB instance with a trained policy")
    s.add_argument("instance", help="VRPLIB instance file")
    s.add_argument(
        "--model",
        default=None,
        help="checkpoint written by 'sci-moe vrp train' (default: the trained MoSES policy "
        "shipped with the package, when it ships one)",
    )
    s.add_argument("--augment", type=int, default=8, help="x8 symmetry augmentation (1-8)")
    s.add_argument("--out", help="write the routes as a VRPLIB .sol file")
    s.add_argument("--json", help="write the result (routes, costs, seconds) as JSON")
    s.add_argument("--plot", help="draw the routes into this image file (.png, .pdf, .svg)")
    s.add_argument(
        "--pyvrp-seconds",
        type=float,
        help="also solve with PyVRP 0.14 ILS for this many seconds and report the gap",
    )
    add_threads_argument(s, THREADS, "the small policy's rollouts run fastest on one")
    _add_device_argument(s, "decoding")
    s.set_defaults(func=solve)
    return p


def _add_device_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--device",
        default="cpu",
        help=f"torch device of the policy's {what}: cpu (default), cuda or cuda:N",
    )


def _check_device(args: argparse.Namespace):
    """``--device`` as a torch device; ValueError (exit code 2) for a device this machine
    lacks, before anything is read or written."""
    from .._util import resolve_device

    return resolve_device(getattr(args, "device", "cpu"), what="--device")


#: torch threads of ``vrp train`` and ``vrp solve`` unless ``--threads``: the policy is
#: small (measured: >= 4.9x slower training on torch's default threads beside a busy process).
THREADS = 1


def generate(args: argparse.Namespace) -> int:
    """``sci-moe vrp generate``: write ``--count`` instances as VRPLIB files."""
    import torch

    from ..vrp import generate_instances, write_vrplib

    if args.count < 1:
        raise ValueError(f"--count must be >= 1, got {args.count}")
    ins = generate_instances(
        args.count, args.customers, args.variant, seed=args.seed, dtype=torch.float64
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for b in range(args.count):
        path = write_vrplib(out / f"{args.variant}_{b:03d}.vrp", ins, b)
        print(f"wrote {path}")
    return 0


def train(args: argparse.Namespace) -> int:
    """``sci-moe vrp train`` on ``--threads`` torch threads (default 1)."""
    _check_device(args)
    with torch_threads(getattr(args, "threads", None), default=THREADS):
        return _train(args)


def _train(args: argparse.Namespace) -> int:
    """``sci-moe vrp train``: the three MoSES stages at ``--customers``, then a checkpoint.

    The same training as ``sci-moe train vrp`` (:func:`sci_moe.vrp.moses.fit_moses`), without
    a run folder: only the model file ``--out`` is written (CPU tensors, whatever
    ``--device`` trained it).
    """
    from ..vrp.moses import MoSESConfig, fit_moses, save_policy
    from .train.vrp import model_meta

    cfg = MoSESConfig(
        steps=args.steps[0],
        expert_steps=args.steps[1],
        gate_steps=args.steps[2],
        num_customers=args.customers,
        batch_size=args.batch_size,
        d_model=args.d_model,
        num_heads=4 if args.d_model % 4 == 0 else 1,
        num_layers=args.layers,
        rank=args.rank,
        gate_score=args.gate,
        routing=args.routing,
        lr=args.lr,
        seed=args.seed,
        threads=getattr(args, "threads", None),
        device=getattr(args, "device", "cpu"),
        progress=not args.no_progress,
    )
    t0 = time.perf_counter()
    policy, summary = fit_moses(cfg)
    for stage, res in summary["phases"].items():
        vals = [e["val_cost"] for e in res["evals"]]
        if vals:
            print(
                f"stage {stage}: validation cost {vals[0]:.3f} -> {vals[-1]:.3f} "
                f"({res['step']} steps)"
            )
    meta = model_meta(cfg)
    path = save_policy(args.out, policy, **meta, seconds=round(time.perf_counter() - t0, 1))
    print(f"wrote {path}")
    return 0


def solve(args: argparse.Namespace) -> int:
    """``sci-moe vrp solve`` on ``--threads`` torch threads (default 1)."""
    _check_device(args)
    with torch_threads(getattr(args, "threads", None), default=THREADS):
        return _solve(args)


def _solve(args: argparse.Namespace) -> int:
    """``sci-moe vrp solve``: best of the policy's greedy multi-start rollouts.

    The policy decodes on ``--device``; the instance is read on the CPU and moved there,
    and the actions come back to the CPU (:func:`sci_moe.vrp.moses.solve`).
    """
    from ..vrp import (
        actions_to_routes,
        check_solution,
        greedy_savings,
        nearest_neighbour,
        read_vrplib,
        solution_cost,
        to_unit_square,
        variant_name,
        write_solution,
    )
    from ..vrp.moses import load_policy, shipped_policy
    from ..vrp.moses import solve as policy_solve

    if not 1 <= args.augment <= 8:
        raise ValueError(f"--augment must be in 1..8, got {args.augment}")
    ins = read_vrplib(args.instance)  # raises ValueError naming the field / customer
    if args.model is None:
        args.model = str(shipped_policy())  # ValueError (exit 2) when none ships
    policy, _ = load_policy(args.model)
    policy = policy.double().to(_check_device(args))
    unit, _ = to_unit_square(ins)  # the model sees the unit square; costs come from ins
    t0 = time.perf_counter()
    _, acts = policy_solve(policy, unit, augmentations=args.augment)
    seconds = time.perf_counter() - t0
    routes = actions_to_routes(acts[0])
    problems = check_solution(ins, 0, routes)
    if problems:  # the masks make this unreachable; never hand out an infeasible answer
        raise RuntimeError("the policy's solution failed the checker: " + "; ".join(problems))
    cost = solution_cost(ins, 0, routes)
    variant = variant_name(ins.flags[0].tolist())
    res = {
        "instance": str(args.instance),
        "variant": variant,
        "customers": ins.num_customers,
        "model": str(args.model),
        "cost": cost,
        "routes": routes,
        "seconds": seconds,
        "nearest_neighbour_cost": float(nearest_neighbour(ins)[0][0]),
        "greedy_savings_cost": float(greedy_savings(ins)[0][0]),
    }
    print(f"{variant}, {ins.num_customers} customers: cost {cost:.4f} with {len(routes)} routes")
    print(f"  model {args.model} ({seconds:.2f} s, x{args.augment} augmentation)")
    print(f"  nearest neighbour {res['nearest_neighbour_cost']:.4f}")
    print(f"  greedy savings    {res['greedy_savings_cost']:.4f}")
    if args.pyvrp_seconds is not None:
        from ..vrp import solve_pyvrp

        ref = solve_pyvrp(ins, 0, time_limit=args.pyvrp_seconds)
        res["pyvrp_0.14_ils_cost"] = ref["cost"]
        res["gap_vs_pyvrp_percent"] = 100 * (cost / ref["cost"] - 1)
        print(
            f"  PyVRP 0.14 ILS ({args.pyvrp_seconds:g} s) {ref['cost']:.4f}: "
            f"gap {res['gap_vs_pyvrp_percent']:.2f} %"
        )
    for k, r in enumerate(routes, 1):
        print(f"Route #{k}: " + " ".join(map(str, r)))
    if args.out:
        write_solution(args.out, routes, cost, Model=args.model, Variant=variant)
        print(f"wrote {args.out}")
    if args.plot:
        plot_routes(args.plot, ins, routes, f"{variant}, cost {cost:.4f}, {len(routes)} routes")
        print(f"wrote {args.plot}")
    if args.json:
        from .._util import atomic_save_json

        atomic_save_json(args.json, res)
    return 0


def plot_routes(path, instance, routes, title: str = "") -> Path:
    """Draw the routes of instance 0 of ``instance`` into the image file ``path``.

    The depot is a black square, linehaul customers circles, backhaul customers triangles;
    each route has its own colour and starts and ends at the depot (open routes end at
    their last customer).

    Parameters
    ----------
    path : path-like
        Image file (the format from its suffix).
    instance : MTVRPInstance
    routes : list of list of int
        Customer indices (1-based) of each route.
    title : str
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xy = instance.locs[0].detach().cpu().double()
    open_ = bool(instance.open_route[0])
    backhaul = (instance.demand_backhaul[0] > 0).tolist()
    fig, ax = plt.subplots(figsize=(6, 6), constrained_layout=True)
    cmap = plt.get_cmap("tab20")
    for k, r in enumerate(routes):
        path_nodes = [0, *r] + ([] if open_ else [0])
        pts = xy[path_nodes]
        ax.plot(pts[:, 0], pts[:, 1], "-", color=cmap(k % 20), lw=1.4)
    for j in range(1, xy.shape[0]):
        ax.plot(*xy[j].tolist(), "^" if backhaul[j - 1] else "o", color="0.25", ms=4)
    ax.plot(*xy[0].tolist(), "s", color="k", ms=9)
    ax.set_aspect("equal")
    ax.set_title(title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
