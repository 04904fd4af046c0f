r"""
A multi-task VRP solver from basis experts (MoSES), on a time-window instance
=============================================================================

MoSES (Pan et al., NeurIPS 2025, arXiv 2510.21453) learns one neural solver for 16
vehicle-routing variants: CVRP combined with any subset of open routes (O), backhauls
(B), a route length limit (L) and time windows (TW). It trains in three stages:

1. a CVRP **backbone** (an attention encoder-decoder, POMO);
2. one **LoRA expert per basis constraint**, each on its single-constraint variant, with
   the backbone frozen;
3. an **adaptive gate** that mixes the backbone and the experts,
   :math:`h_{out} = \alpha_0 W_0 h + \sum_i \alpha_i B_i A_i h + \hat B \hat A h`, so that a
   variant such as VRPBLTW is solved by composing the B, L and TW experts.

This tutorial trains a tiny MoSES for a few seconds, writes a VRPTW instance in VRPLIB
format, reads it back (as ``sci-moe vrp solve`` does with a user's file) and solves it,
next to the greedy-savings and nearest-neighbour baselines. With this little training the
policy is far from the paper's quality; ``benchmarks/vrp/run.py`` measures it properly
(see the results page).
"""

# %%
# Train a small MoSES
# -------------------
# Instances follow RouteFinder's distribution (:func:`~sci_moe.vrp.generate_instances`).
# :func:`~sci_moe.vrp.moses.train_moses` runs the three stages with REINFORCE and the POMO
# shared baseline on the training engine; each stage trains only its own parameters and
# is scored on fixed validation instances (``val_cost``) every ``eval_every`` updates.

import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from sci_moe.vrp import (
    actions_to_routes,
    check_solution,
    generate_instances,
    greedy_savings,
    nearest_neighbour,
    read_vrplib,
    solution_cost,
    to_unit_square,
    write_vrplib,
)
from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig, TrainConfig, solve, train_moses

torch.manual_seed(0)
torch.set_num_threads(1)
policy = MTVRPPolicy(PolicyConfig(d_model=32, num_heads=4, num_layers=2, d_ff=64, rank=4))
t0 = time.perf_counter()
config = TrainConfig(batch_size=8, num_customers=10, eval_every=6, val_instances=32, progress=False)
results = train_moses(policy, (30, 12, 12), config=config)
print(f"trained in {time.perf_counter() - t0:.1f} s")
for stage, res in results.items():
    val = [e["val_cost"] for e in res.evals]
    print(f"stage {stage:8s}: validation cost {val[0]:.3f} -> {val[-1]:.3f} ({res.step} steps)")

# %%
# A VRPTW instance as a VRPLIB file
# ---------------------------------
# :func:`~sci_moe.vrp.write_vrplib` writes every field of the variant (here
# ``SERVICE_TIME_SECTION`` and ``TIME_WINDOW_SECTION``); :func:`~sci_moe.vrp.read_vrplib`
# reads it back and checks it: a demand above the capacity, or a window no vehicle can
# reach in time, is a ``ValueError`` naming the customer and the field.

folder = Path(tempfile.mkdtemp())
path = write_vrplib(folder / "vrptw.vrp", generate_instances(1, 20, "VRPTW", seed=7))
print("\n".join(path.read_text().splitlines()[:8]))
instance = read_vrplib(path)

bad = path.read_text().replace("CAPACITY: 30", "CAPACITY: 5")
(folder / "bad.vrp").write_text(bad)
try:
    read_vrplib(folder / "bad.vrp")
except ValueError as err:
    print(str(err)[:160], "...")

# %%
# Solve it
# --------
# :func:`~sci_moe.vrp.moses.solve` decodes greedily from every start customer (POMO) on the 8
# symmetries of the unit square and keeps the best rollout; the environment's masks keep
# every move feasible, and the independent checker confirms it.

unit, scale = to_unit_square(instance)
_, actions = solve(policy.double(), unit, augmentations=8)
routes = actions_to_routes(actions[0])
assert check_solution(instance, 0, routes) == []
results = {"MoSES (tiny)": (solution_cost(instance, 0, routes), routes)}
for name, fn in (("greedy savings", greedy_savings), ("nearest neighbour", nearest_neighbour)):
    cost, acts = fn(instance)
    results[name] = (float(cost[0]), actions_to_routes(acts[0]))
for name, (cost, r) in results.items():
    print(f"{name:18s} cost {cost:.3f} with {len(r)} routes")

# %%
# The routes
# ----------
# Each colour is one vehicle; the square is the depot.

xy = instance.locs[0]
fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True)
for ax, (name, (cost, r)) in zip(axes, results.items(), strict=True):
    for route in r:
        path_xy = xy[[0, *route, 0]]
        ax.plot(path_xy[:, 0], path_xy[:, 1], "-o", ms=3)
    ax.plot(xy[0, 0], xy[0, 1], "ks", ms=8)
    ax.set_title(f"{name}: {cost:.3f}")
    ax.set_aspect("equal")
fig.tight_layout()
plt.show()
