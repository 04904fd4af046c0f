import pytest
import torch

from sci_moe.vrp import (
    MTVRPPolicy,
    PolicyConfig,
    TrainConfig,
    actions_to_routes,
    augment,
    check_solution,
    generate_instances,
    solve,
    train_stage,
)


def _tiny(rank=2):
    return MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=rank))


def test_three_stages_train_only_their_parameters():
    pol = _tiny()
    cfg = TrainConfig(steps=2, batch_size=3, num_customers=6, seed=1)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    train_stage(pol, "backbone", "CVRP", cfg, progress=False)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and not any("lora" in n or "router" in n for n in changed)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    train_stage(pol, "expert", ["OVRP", "VRPB", "VRPL", "VRPTW"], cfg, progress=False)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and all("experts" in n or "expert_gate" in n for n in changed)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    costs = train_stage(pol, "gated", ["VRPTW", "OVRPB"], cfg, progress=False)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and all("router" in n or "residual" in n for n in changed)
    assert len(costs) == 2
    with pytest.raises(ValueError, match="nothing to train"):
        train_stage(_tiny(rank=0), "expert", "OVRP", cfg, progress=False)


def test_training_is_reproducible():
    cfg = TrainConfig(steps=2, batch_size=2, num_customers=5, seed=3)
    torch.manual_seed(0)
    a = train_stage(_tiny(), "backbone", "CVRP", cfg, progress=False)
    torch.manual_seed(0)
    b = train_stage(_tiny(), "backbone", "CVRP", cfg, progress=False)
    assert a == b


def test_augment_keeps_distances_and_solve_is_feasible():
    ins = generate_instances(3, 7, ["VRPBLTW", "OVRPL", "CVRP"], seed=2, dtype=torch.float64)
    aug = augment(ins, 8)
    d = aug.distances().view(8, 3, 8, 8)
    torch.testing.assert_close(d, ins.distances().expand(8, -1, -1, -1))
    pol = _tiny().double()
    pol.mode = "gated"
    cost, acts = solve(pol, ins)
    for b in range(3):
        assert check_solution(ins, b, actions_to_routes(acts[b])) == []
    _, _, c1 = pol(ins, greedy=True)
    assert (cost <= c1.min(1).values + 1e-12).all()
    with pytest.raises(ValueError, match="k must be"):
        augment(ins, 9)
