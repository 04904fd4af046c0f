import pytest
import torch

from sci_moe.vrp import (
    VARIANTS,
    MTVRPPolicy,
    PolicyConfig,
    actions_to_routes,
    check_solution,
    generate_instances,
    greedy_savings,
    load_policy,
    nearest_neighbour,
    save_policy,
    solution_cost,
    train_moses,
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


def test_policy_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    costs = train_moses(pol, (1, 1, 1), batch_size=2, num_customers=5, progress=False)
    assert set(costs) == {"backbone", "expert", "gated"} and pol.mode == "gated"
    path = save_policy(tmp_path / "m.pt", pol, steps=[1, 1, 1])
    back, meta = load_policy(path)
    assert meta == {"steps": [1, 1, 1]} and back.mode == "gated"
    ins = generate_instances(2, 6, ["VRPTW", "OVRPBL"], seed=1)
    pol.eval()
    with torch.no_grad():
        a = pol(ins, greedy=True)
        b = back(ins, greedy=True)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot load"):
        load_policy(tmp_path / "junk.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"not a sci_moe\.vrp policy checkpoint"):
        load_policy(tmp_path / "other.pt")
    with pytest.raises(ValueError, match="does not exist"):
        load_policy(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="steps must give"):
        train_moses(pol, (1, 1))
