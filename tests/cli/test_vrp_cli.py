"""``sci-moe vrp generate|train|solve`` through the installed entry point, in a subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("vrplib")


def _exe() -> list[str]:
    exe = Path(sys.executable).with_name("sci-moe")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("sci-moe")
    return [found] if found else [sys.executable, "-m", "sci_moe.cli.main"]


def _run(args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCI_MOE_PROGRESS": "off"}
    return subprocess.run(
        [*_exe(), "vrp", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def test_help_does_not_import_torch():
    probe = (
        "import sys\nfrom sci_moe.cli.main import main\n"
        "try:\n    main(['vrp', 'solve', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "usage: sci-moe vrp solve" in proc.stdout and "TORCH False" in proc.stdout


def test_generate_train_solve_and_bad_input(tmp_path):
    # generate and train in-process (quick); solve through the entry point
    from sci_moe.cli.main import main

    inst_dir, model = tmp_path / "inst", str(tmp_path / "m.pt")
    args = ["generate", "--variant", "OVRPBTW", "--customers", "8", "--out", str(inst_dir)]
    assert main(["vrp", *args]) == 0
    inst = inst_dir / "OVRPBTW_000.vrp"
    assert "TYPE: OVRPBTW" in inst.read_text()
    train = ["train", "--out", model, "--steps", "1", "1", "1", "--customers", "6"]
    train += ["--batch-size", "2", "--d-model", "16", "--rank", "2", "--no-progress"]
    assert main(["vrp", *train]) == 0
    solve = ["solve", str(inst), "--model", "m.pt", "--out", "a.sol", "--json", "a.json"]
    pyvrp = importlib.util.find_spec("pyvrp") is not None
    if pyvrp:
        solve += ["--pyvrp-seconds", "0.05"]
    p = _run(solve, tmp_path)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "a.json").read_text())
    assert res["variant"] == "OVRPBTW" and sorted(c for r in res["routes"] for c in r) == list(
        range(1, 9)
    )
    assert res["cost"] > 0 and "cost" in p.stdout
    assert res["greedy_savings_cost"] > 0 and res["nearest_neighbour_cost"] >= res["cost"] * 0.5
    if pyvrp:
        gap = 100 * (res["cost"] / res["pyvrp_0.14_ils_cost"] - 1)
        assert res["gap_vs_pyvrp_percent"] == pytest.approx(gap) and "PyVRP 0.14 ILS" in p.stdout
    sol = (tmp_path / "a.sol").read_text()
    assert sol.startswith("Route #1: ") and f"Cost: {res['cost']:.6f}" in sol
    # an infeasible instance: exit 2, the message names the customer and the field
    lines = inst.read_text().splitlines()
    i = lines.index("DEMAND_SECTION")
    lines[i + 2] = "2 99"  # customer 1 (node 2)
    text = "\n".join(lines) + "\n"
    (tmp_path / "bad.vrp").write_text(text)
    p = _run(["solve", "bad.vrp", "--model", "m.pt"], tmp_path)
    assert p.returncode == 2
    assert "sci-moe vrp solve: error:" in p.stderr and "customer 1" in p.stderr
    assert "CAPACITY" in p.stderr
    assert main(["vrp", "solve", str(inst), "--model", str(tmp_path / "missing.pt")]) == 2


def test_solve_defaults_to_the_shipped_policy(tmp_path, monkeypatch, capsys):
    from sci_moe.cli.main import main
    from sci_moe.vrp import generate_instances, write_vrplib
    from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig, save_policy
    from sci_moe.vrp.moses import checkpoint as ck

    inst = write_vrplib(tmp_path / "a.vrp", generate_instances(1, 6, "VRPTW", seed=0), 0)
    monkeypatch.setattr(ck, "SHIPPED_POLICY", tmp_path / "policies" / "moses.pt")
    assert main(["vrp", "solve", str(inst)]) == 2
    assert "no trained MoSES policy ships" in capsys.readouterr().err
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    save_policy(ck.SHIPPED_POLICY, pol)
    png = tmp_path / "routes.png"
    assert main(["vrp", "solve", str(inst), "--augment", "1", "--plot", str(png)]) == 0
    assert "policies/moses.pt" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"


TINY_TRAIN = ["--steps", "1", "1", "1", "--customers", "6", "--batch-size", "2"]
TINY_TRAIN += ["--d-model", "16", "--rank", "2", "--no-progress"]


def _policy_state(path):
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
@pytest.mark.parametrize("command", ["train", "solve"])
def test_cuda_without_a_gpu_is_refused_before_anything_is_written(tmp_path, capsys, command):
    from sci_moe.cli.main import main
    from sci_moe.vrp import generate_instances, write_vrplib

    out = tmp_path / "out"
    if command == "train":
        argv = ["train", "--out", str(out / "m.pt"), *TINY_TRAIN, "--device", "cuda"]
    else:
        inst = write_vrplib(tmp_path / "a.vrp", generate_instances(1, 6, "CVRP", seed=0), 0)
        argv = ["solve", str(inst), "--model", str(tmp_path / "m.pt"), "--device", "cuda"]
        argv += ["--json", str(out / "a.json"), "--out", str(out / "a.sol")]
    assert main(["vrp", *argv]) == 2
    err = capsys.readouterr().err
    assert f"sci-moe vrp {command}: error: --device='cuda'" in err and "no CUDA device" in err
    assert not out.exists()


def test_a_misspelt_device_is_refused(tmp_path, capsys):
    from sci_moe.cli.main import main

    out = tmp_path / "m.pt"
    assert main(["vrp", "train", "--out", str(out), *TINY_TRAIN, "--device", "gpu0"]) == 2
    assert "'cpu', 'cuda' or 'cuda:N'" in capsys.readouterr().err and not out.exists()


def test_device_cpu_is_the_default_bit_for_bit(tmp_path):
    from sci_moe.cli.main import main
    from sci_moe.vrp import generate_instances, write_vrplib

    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    assert main(["vrp", "train", "--out", str(a), *TINY_TRAIN]) == 0
    assert main(["vrp", "train", "--out", str(b), *TINY_TRAIN, "--device", "cpu"]) == 0
    sa, sb = _policy_state(a), _policy_state(b)
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    inst = write_vrplib(tmp_path / "i.vrp", generate_instances(1, 6, "VRPTW", seed=1), 0)
    res = []
    for extra in ([], ["--device", "cpu"]):
        js = tmp_path / f"r{len(res)}.json"
        solve = ["solve", str(inst), "--model", str(a), "--augment", "2", "--json", str(js)]
        assert main(["vrp", *solve, *extra]) == 0
        res.append(json.loads(js.read_text()))
    assert res[0]["cost"] == res[1]["cost"] and res[0]["routes"] == res[1]["routes"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_and_solve_on_cuda(tmp_path):
    import math

    from sci_moe.cli.main import main
    from sci_moe.vrp import generate_instances, write_vrplib

    model = tmp_path / "m.pt"
    assert main(["vrp", "train", "--out", str(model), *TINY_TRAIN, "--device", "cuda"]) == 0
    state = _policy_state(model)
    assert all(v.device.type == "cpu" and v.isfinite().all() for v in state.values())
    inst = write_vrplib(tmp_path / "i.vrp", generate_instances(1, 6, "OVRPBTW", seed=2), 0)
    res = {}
    for device in ("cpu", "cuda"):
        js = tmp_path / f"{device}.json"
        solve = ["solve", str(inst), "--model", str(model), "--json", str(js)]
        assert main(["vrp", *solve, "--device", device]) == 0
        res[device] = json.loads(js.read_text())
    assert math.isfinite(res["cuda"]["cost"]) and res["cuda"]["cost"] > 0
    assert sorted(c for r in res["cuda"]["routes"] for c in r) == list(range(1, 7))
    # float64 decoding: the same greedy choices up to near-ties
    assert res["cuda"]["cost"] == pytest.approx(res["cpu"]["cost"], rel=5e-2)
