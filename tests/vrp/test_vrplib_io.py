import math

import pytest
import torch

from sci_moe.vrp import (
    VARIANTS,
    actions_to_routes,
    check_solution,
    generate_instances,
    instance_problems,
    nearest_neighbour,
    read_vrplib,
    solution_cost,
    to_unit_square,
    validate_instance,
    write_solution,
    write_vrplib,
)

pytest.importorskip("vrplib")

FIELDS = (
    "locs",
    "demand_linehaul",
    "demand_backhaul",
    "capacity",
    "service_time",
    "time_windows",
    "distance_limit",
    "open_route",
    "flags",
)


def test_round_trip_of_all_sixteen_variants(tmp_path):
    ins = generate_instances(16, 7, list(VARIANTS), seed=4, dtype=torch.float64)
    for b, v in enumerate(VARIANTS):
        path = write_vrplib(tmp_path / f"{v}.vrp", ins, b)
        text = path.read_text()
        assert f"TYPE: {v}\n" in text and text.endswith("EOF\n")
        assert ("TIME_WINDOW_SECTION" in text) == ("TW" in v)
        assert ("BACKHAUL_SECTION" in text) == ("B" in v)
        assert ("DISTANCE:" in text) == ("L" in v)
        back = read_vrplib(path)
        one = ins.index(slice(b, b + 1))
        for f in FIELDS:
            assert torch.equal(getattr(back, f), getattr(one, f)), (v, f)


def test_pyvrp_reads_our_files(tmp_path):
    pyvrp = pytest.importorskip("pyvrp")
    ins = generate_instances(1, 9, "VRPBTW", seed=2, dtype=torch.float64)
    data = pyvrp.read(write_vrplib(tmp_path / "a.vrp", ins))
    assert data.num_clients == 9
    pick = [c.pickup[0] for c in data.clients()]
    assert pick == [round(x) for x in ins.demand_backhaul[0].tolist()]


def test_generated_instances_have_no_problems():
    ins = generate_instances(48, 20, list(VARIANTS), seed=1, dtype=torch.float64)
    validate_instance(ins)
    assert all(instance_problems(ins, b) == [] for b in range(48))


def _file(tmp_path, variant="VRPTW", edit=None, n=5, seed=0):
    ins = generate_instances(1, n, variant, seed=seed, dtype=torch.float64)
    if edit is not None:
        edit(ins)
    return write_vrplib(tmp_path / "x.vrp", ins)


def test_infeasible_customers_are_named(tmp_path):
    def big(ins):
        ins.demand_linehaul[0, 2] = 99

    with pytest.raises(ValueError, match=r"customer 3: linehaul demand 99 exceeds .*CAPACITY 15"):
        read_vrplib(_file(tmp_path, "CVRP", big))

    def late(ins):
        ins.time_windows[0, 4] = torch.tensor([0.0, 1e-4])

    with pytest.raises(ValueError, match=r"TIME_WINDOW_SECTION: customer 4 cannot be reached"):
        read_vrplib(_file(tmp_path, "VRPTW", late))

    def closing(ins):
        ins.time_windows[0, 0, 1] = float(ins.time_windows[0, 2, 0]) + 1e-3

    with pytest.raises(ValueError, match=r"customer 2 served .* cannot return before the depot"):
        read_vrplib(_file(tmp_path, "VRPTW", closing))

    def empty(ins):
        ins.time_windows[0, 1] = torch.tensor([2.0, 1.0])

    with pytest.raises(ValueError, match=r"customer 1 has an empty window"):
        read_vrplib(_file(tmp_path, "VRPLTW", empty))

    def short(ins):
        ins.distance_limit[0] = 0.05

    with pytest.raises(ValueError, match=r"customer \d+: the trip .* limit DISTANCE 0.05"):
        read_vrplib(_file(tmp_path, "VRPL", short))

    def both(ins):
        ins.demand_backhaul[0, 0] = 3.0
        ins.demand_linehaul[0, 0] = 2.0

    with pytest.raises(ValueError, match=r"customer 1: has both a linehaul"):
        read_vrplib(_file(tmp_path, "VRPB", both))


def test_malformed_files_are_named(tmp_path):
    good = _file(tmp_path, "VRPTW").read_text()
    bad = tmp_path / "bad.vrp"
    cases = {
        "garbage line\n": "not a valid VRPLIB file",
        good.replace("TYPE: VRPTW", "TYPE: TSP"): "TYPE 'TSP' is not supported",
        good.replace("TYPE: VRPTW", "TYPE: CVRP"): "has a TIME_WINDOW_SECTION but TYPE CVRP",
        good.replace("TYPE: VRPTW", "TYPE: VRPBTW"): "TYPE VRPBTW has backhauls .* no BACKHAUL",
        good.replace(
            "DIMENSION: 6", "DIMENSION: 7"
        ): "NODE_COORD_SECTION has 6 rows, DIMENSION is 7",
        good.replace(
            "\n3 6\n", "\n3 six\n"
        ): r"DEMAND_SECTION row 3 \(customer 2 \(node 3\)\) is not",
        good.replace("EUC_2D", "EXPLICIT"): "only Euclidean instances",
        good.replace("CAPACITY: 15\n", ""): "CAPACITY",
    }
    for text, msg in cases.items():
        assert text != good
        bad.write_text(text)
        with pytest.raises(ValueError, match=msg):
            read_vrplib(bad)
    lines = good.splitlines()
    i = lines.index("TIME_WINDOW_SECTION") + 3
    lines[i] = lines[i] + " 7.0"  # a row with an extra value
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"TIME_WINDOW_SECTION row 3 \(customer 2 .* 3 values"):
        read_vrplib(bad)
    with pytest.raises(ValueError, match="does not exist"):
        read_vrplib(tmp_path / "nope.vrp")


def test_unit_square_keeps_feasibility_and_scales_cost(tmp_path):
    ins = generate_instances(4, 10, ["VRPLTW", "OVRPBTW", "CVRP", "OVRPL"], seed=3)
    ins = ins.to(torch.float64)
    big = ins.index(slice(None))
    big.locs = ins.locs * 250 + 40
    big.service_time = ins.service_time * 250
    big.time_windows = ins.time_windows * 250
    big.distance_limit = ins.distance_limit * 250
    unit, scale = to_unit_square(big)
    assert unit.locs.min() >= 0 and unit.locs.max() <= 1 + 1e-12
    cost, acts = nearest_neighbour(unit)
    for b in range(4):
        routes = actions_to_routes(acts[b])
        assert check_solution(big, b, routes, tol=1e-7) == []
        assert solution_cost(big, b, routes) == pytest.approx(float(cost[b] * scale[b]))
    sol = write_solution(tmp_path / "a.sol", [[1, 2], [3]], 1.5, Model="x")
    assert sol.read_text() == "Route #1: 1 2\nRoute #2: 3\nCost: 1.500000\nModel: x\n"
    assert not math.isinf(float(scale[0]))
