import pytest
import torch

from sci_moe.vrp import (
    VARIANTS,
    actions_to_routes,
    check_solution,
    generate_instances,
    greedy_savings,
    nearest_neighbour,
    solution_cost,
)


def test_greedy_savings_is_feasible_and_beats_nearest_neighbour():
    ins = generate_instances(32, 15, list(VARIANTS), seed=6, dtype=torch.float64)
    cost, acts = greedy_savings(ins)
    nn_cost, _ = nearest_neighbour(ins)
    for b in range(32):
        routes = actions_to_routes(acts[b])
        assert check_solution(ins, b, routes) == [], VARIANTS[b % 16]
        assert solution_cost(ins, b, routes) == pytest.approx(float(cost[b]), abs=1e-12)
    assert float(cost.mean()) < 0.9 * float(nn_cost.mean())


def test_greedy_savings_merges_by_saving():
    # depot at the origin, customers 1 and 2 close together far away, 3 opposite
    ins = generate_instances(1, 3, "CVRP", seed=0, dtype=torch.float64)
    ins.locs[0] = torch.tensor([[0.5, 0.5], [0.9, 0.9], [0.9, 0.95], [0.1, 0.1]])
    ins.demand_linehaul[0] = torch.tensor([1.0, 1.0, 1.0])
    _, acts = greedy_savings(ins)
    routes = sorted(actions_to_routes(acts[0]), key=len)
    # saving(1,2) is large; joining 3 is positive too (symmetric detour) unless capacity binds
    assert [1, 2] in [sorted(r) for r in routes] or len(routes) == 1
    ins.demand_linehaul[0] = torch.tensor([6.0, 6.0, 6.0])  # capacity 13: only pairs fit
    _, acts = greedy_savings(ins)
    routes = actions_to_routes(acts[0])
    assert sorted(map(sorted, routes)) == [[1, 2], [3]]
