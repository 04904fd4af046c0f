import pytest
import torch

from sci_moe.vrp import (
    VARIANTS,
    MTVRPEnv,
    actions_to_routes,
    check_solution,
    flags_tensor,
    generate_instances,
    nearest_neighbour,
    solution_cost,
    tour_cost,
    variant_flags,
    variant_name,
)


def test_sixteen_variants_round_trip():
    assert len(set(VARIANTS)) == 16
    for v in VARIANTS:
        assert variant_name(variant_flags(v)) == v
    assert flags_tensor(["OVRPBLTW"]).all()
    with pytest.raises(ValueError, match="unknown VRP variant"):
        variant_flags("VRPXYZ")
    with pytest.raises(ValueError, match="unknown VRP variant"):
        generate_instances(2, 5, "TSP")


def test_instance_to_moves_every_field_however_the_device_is_given():
    """``to_device`` calls ``ins.to(device)`` positionally: the bool fields (open-route
    flag, variant flags) must follow the float ones (a GPU run's node features
    concatenate them). The meta device stands for a GPU here."""
    from sci_moe._util import to_device

    ins = generate_instances(3, 5, list(VARIANTS), seed=1)
    for moved in (ins.to("meta"), ins.to(device="meta"), to_device(ins, "meta")):
        devices = {k: v.device.type for k, v in vars(moved).items()}
        assert devices == dict.fromkeys(vars(ins), "meta")
    cast = ins.to(torch.float64)  # a dtype only: floats cast, bools as they were
    assert cast.locs.dtype == torch.float64 and cast.open_route.dtype == torch.bool
    assert torch.equal(cast.flags, ins.flags) and cast.flags.device == ins.flags.device


def test_generator_distribution():
    ins = generate_instances(64, 20, list(VARIANTS), seed=3, dtype=torch.float64)
    f = ins.flags
    assert ins.locs.min() >= 0 and ins.locs.max() <= 1
    assert (ins.capacity == 30).all()
    dem = ins.demand_linehaul + ins.demand_backhaul
    assert ((dem >= 1) & (dem <= 9)).all()
    assert ((ins.demand_linehaul > 0) & (ins.demand_backhaul > 0)).sum() == 0
    assert (ins.demand_backhaul[~f[:, 1]] == 0).all()
    assert 0.1 < float((ins.demand_backhaul[f[:, 1]] > 0).double().mean()) < 0.3
    assert torch.isinf(ins.distance_limit[~f[:, 2]]).all()
    d0 = (ins.locs[:, 1:] - ins.locs[:, :1]).norm(dim=-1).max(1).values
    assert (ins.distance_limit[f[:, 2]] >= 2 * d0[f[:, 2]]).all()
    tw = ins.time_windows[f[:, 3]]
    # every customer can be served on a route of its own, back before the depot closes
    d = (ins.locs[f[:, 3], 1:] - ins.locs[f[:, 3], :1]).norm(dim=-1)
    assert (d <= tw[:, 1:, 1]).all()
    assert (tw[:, 1:, 1] + ins.service_time[f[:, 3], 1:] + d <= tw[:, :1, 1]).all()
    assert torch.isinf(ins.time_windows[~f[:, 3], :, 1]).all()
    assert (ins.open_route == f[:, 0]).all()


def _random_rollout(ins, seed):
    env = MTVRPEnv(ins)
    g = torch.Generator().manual_seed(seed)
    acts = []
    while not bool(env.done.all()):
        mask = env.action_mask()
        assert mask.any(1).all()
        # prefer customers so routes are long and constraints bind
        w = mask.double() * torch.cat([torch.full((1,), 0.05), torch.ones(mask.shape[1] - 1)])
        a = torch.multinomial(w, 1, generator=g).squeeze(1)
        acts.append(a)
        env.step(a)
        assert env.steps <= 2 * ins.num_customers + 2
    return env, torch.stack(acts, 1)


@pytest.mark.parametrize("seed", [0, 1])
def test_masks_never_allow_an_infeasible_move(seed):
    ins = generate_instances(96, 15, list(VARIANTS), seed=seed, dtype=torch.float64)
    env, acts = _random_rollout(ins, seed)
    costs = tour_cost(ins, acts)
    for b in range(ins.batch_size):
        routes = actions_to_routes(acts[b])
        assert check_solution(ins, b, routes) == [], VARIANTS[b % 16]
        assert solution_cost(ins, b, routes) == pytest.approx(float(costs[b]), abs=1e-9)
        assert float(env.cost[b]) == pytest.approx(float(costs[b]), abs=1e-9)


def test_masks_are_not_trivially_conservative():
    # with every constraint active, the mask still allows several customers at the start
    ins = generate_instances(16, 15, "OVRPBLTW", seed=2, dtype=torch.float64)
    env = MTVRPEnv(ins)
    assert env.action_mask()[:, 1:].sum(1).min() >= 1
    # and a capacity-violating move is masked: fill the vehicle
    ins = generate_instances(1, 15, "CVRP", seed=4, dtype=torch.float64)
    env = MTVRPEnv(ins)
    env.load_linehaul[:] = ins.capacity - 0.5
    env.current[:] = 1
    assert not env.action_mask()[0, 1:].any()


def test_checker_detects_violations():
    ins = generate_instances(1, 6, "VRPBLTW", seed=0, dtype=torch.float64)
    ins.demand_backhaul[0] = torch.tensor([0.0, 0, 0, 0, 0, 5])
    ins.demand_linehaul[0] = torch.tensor([9.0, 9, 9, 9, 9, 0])
    assert any("exceeds capacity" in m for m in check_solution(ins, 0, [[1, 2, 3, 4], [5, 6]]))
    assert any(
        "follows a backhaul" in m for m in check_solution(ins, 0, [[6, 1], [2], [3], [4], [5]])
    )
    assert any("missing [6]" in m for m in check_solution(ins, 0, [[1], [2], [3], [4], [5]]))
    ins.distance_limit[0] = 0.01
    assert any("exceeds the limit" in m for m in check_solution(ins, 0, [[j] for j in range(1, 7)]))
    ins.distance_limit[0] = float("inf")
    ins.time_windows[0, 1:, 1] = 1e-3
    assert any("window closes" in m for m in check_solution(ins, 0, [[j] for j in range(1, 7)]))


def test_open_routes_do_not_pay_the_return():
    ins = generate_instances(2, 8, ["CVRP", "OVRP"], seed=0, dtype=torch.float64)
    ins.locs[1] = ins.locs[0]
    ins.open_route[1] = True
    acts = torch.arange(1, 9).expand(2, -1)
    c = tour_cost(ins, acts)
    back = ins.distances()[0, 8, 0]
    assert float(c[0] - c[1]) == pytest.approx(float(back))


def test_nearest_neighbour_is_feasible():
    ins = generate_instances(32, 12, list(VARIANTS), seed=5, dtype=torch.float64)
    cost, acts = nearest_neighbour(ins)
    for b in range(32):
        routes = actions_to_routes(acts[b])
        assert check_solution(ins, b, routes) == []
        assert solution_cost(ins, b, routes) == pytest.approx(float(cost[b]), abs=1e-9)


def test_keep_drops_rollouts_without_changing_the_others():
    # Dropping rollouts mid-way (as the policy drops finished instances) leaves the kept
    # ones' masks, transitions and costs exactly those of the full environment.
    ins = generate_instances(8, 10, list(VARIANTS)[::2], seed=3, dtype=torch.float64)
    full, part = MTVRPEnv(ins), MTVRPEnv(ins)
    g = torch.Generator().manual_seed(0)
    rows = torch.tensor([6, 1, 3])
    for t in range(30):
        if t == 4:
            part.keep(rows)
        mask = full.action_mask()
        if t >= 4:
            assert torch.equal(part.action_mask(), mask[rows])
            assert torch.equal(part.dist, full.dist[rows])
        a = torch.multinomial(mask.double(), 1, generator=g).squeeze(1)
        full.step(a)
        part.step(a if t < 4 else a[rows])
    for name in ("current", "visited", "cost", "time", "length", "load_linehaul"):
        assert torch.equal(getattr(part, name), getattr(full, name)[rows])
    with pytest.raises(ValueError, match="1-D int64"):
        part.keep(torch.tensor([0.0]))
    with pytest.raises(ValueError, match="index the 3"):
        part.keep(torch.tensor([3]))
