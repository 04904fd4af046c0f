"""Every VRP solver and the environment refuse malformed / infeasible instances up front."""

import pytest
import torch

from sci_moe.vrp import (
    MTVRPEnv,
    generate_instances,
    greedy_savings,
    instance_problems,
    nearest_neighbour,
    pyvrp_model,
    tour_cost,
    validate_instance,
)
from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig


def _solvers():
    policy = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    return {
        "env": MTVRPEnv,
        "nearest_neighbour": nearest_neighbour,
        "greedy_savings": greedy_savings,
        "policy": policy,
        "pyvrp_model": lambda ins: pyvrp_model(ins, 0),
    }


@pytest.mark.parametrize("name", list(_solvers()))
def test_nan_coordinate_is_refused_naming_the_coordinate(name):
    ins = generate_instances(1, 10, "CVRP", seed=0)
    ins.locs[0, 3, 0] = float("nan")
    with pytest.raises(ValueError, match=r"customer 3 has a non-finite coordinate: x = nan"):
        _solvers()[name](ins)


@pytest.mark.parametrize("name", list(_solvers()))
def test_negative_demand_is_refused(name):
    ins = generate_instances(1, 10, "CVRP", seed=0)
    ins.demand_linehaul[0, 2] = -5.0
    with pytest.raises(ValueError, match=r"customer 3: demands must be finite and >= 0"):
        _solvers()[name](ins)


@pytest.mark.parametrize("name", list(_solvers()))
def test_infeasible_instance_is_refused_before_any_rollout(name):
    ins = generate_instances(1, 10, "VRPTW", seed=0)
    ins.time_windows[0, 4] = torch.tensor([0.0, 1e-4])  # cannot be reached in time
    with pytest.raises(ValueError, match=r"customer 4 cannot be reached in time"):
        _solvers()[name](ins)


def test_batch_check_names_the_bad_instance_only():
    ins = generate_instances(6, 8, "CVRP", seed=1)
    ins.demand_backhaul[4, 1] = float("nan")
    assert [instance_problems(ins, b) == [] for b in range(6)] == [True] * 4 + [False, True]
    with pytest.raises(ValueError, match=r"^instance is infeasible or malformed: instance 4: "):
        validate_instance(ins)
    ins.demand_linehaul[:, 0] = -1.0  # every instance now bad: 5 messages shown, 2 counted
    with pytest.raises(ValueError, match=r"instance 0: customer 1: .*\(and 2 more\)$"):
        validate_instance(ins)


def test_nan_time_window_is_a_problem():
    ins = generate_instances(1, 5, "VRPTW", seed=0, dtype=torch.float64)
    ins.time_windows[0, 2, 0] = float("nan")
    assert instance_problems(ins) == [
        "TIME_WINDOW_SECTION: customer 2 has a NaN in its window [nan, "
        f"{float(ins.time_windows[0, 2, 1])}]"
    ]


def test_distances_are_exact_above_25_points():
    # torch.cdist's default uses the matrix-product formula above 25 points: errors of
    # ~5e-4 in float32 and a nonzero depot-to-depot distance
    ins = generate_instances(4, 59, "CVRP", seed=0)  # 60 points, float32
    d = ins.distances()
    x = ins.locs.double()
    ref = (x[:, :, None] - x[:, None]).norm(dim=-1)
    off = ref > 0
    rel = ((d.double() - ref).abs()[off] / ref[off]).max()
    assert float(rel) < 1e-6
    assert (d.diagonal(dim1=1, dim2=2) == 0).all()
    # so a finished rollout (at the depot, stepping to the depot) pays exactly nothing
    _, acts = nearest_neighbour(ins)
    padded = torch.cat([acts, torch.zeros(4, 5, dtype=acts.dtype)], 1)
    assert torch.equal(tour_cost(ins, padded), tour_cost(ins, acts))
    env = MTVRPEnv(ins)
    for a in acts.T:
        env.step(a)
    assert bool(env.done.all())
    before = env.cost.clone()
    env.step(torch.zeros(4, dtype=torch.long))
    assert torch.equal(env.cost, before)
