import pytest
import torch

from sci_moe.vrp import (
    SCALE,
    VARIANTS,
    actions_to_routes,
    check_solution,
    generate_instances,
    nearest_neighbour,
    pyvrp_route_distance,
    solution_cost,
    solve_pyvrp,
)

pytest.importorskip("pyvrp")


def test_cost_equals_pyvrp_on_the_same_routes():
    ins = generate_instances(16, 12, list(VARIANTS), seed=7, dtype=torch.float64)
    _, acts = nearest_neighbour(ins)
    for b in range(16):
        routes = actions_to_routes(acts[b])
        ours = solution_cost(ins, b, routes)
        theirs = pyvrp_route_distance(ins, b, routes)
        edges = sum(len(r) + 1 for r in routes)
        # PyVRP works in integers: every edge is rounded up to 1 / SCALE
        assert 0 <= theirs - ours <= edges / SCALE, VARIANTS[b]


@pytest.mark.parametrize("variant", ["CVRP", "OVRPB", "VRPLTW", "OVRPBLTW"])
def test_pyvrp_solutions_pass_the_checker(variant):
    ins = generate_instances(1, 10, variant, seed=1, dtype=torch.float64)
    res = solve_pyvrp(ins, 0, time_limit=0.05)
    assert res["pyvrp_feasible"] and res["feasible"]
    assert check_solution(ins, 0, res["routes"]) == []
    assert res["cost"] <= float(nearest_neighbour(ins)[0][0]) + 1e-9
    with pytest.raises(ValueError, match="time_limit"):
        solve_pyvrp(ins, 0, time_limit=0)
