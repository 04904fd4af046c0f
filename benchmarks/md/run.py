"""Molecular dynamics speed: alanine dipeptide with OpenMM amber and with a learned-style model.

Cases (alanine dipeptide, 22 atoms, 300 K, friction 1/ps, 2 fs):

* ``openmm amber CPU`` (baseline): amber99sbildn + OBC implicit solvent, no cutoff, X-H
  bonds constrained, ``LangevinMiddleIntegrator`` on OpenMM's CPU platform with
  ``--threads`` threads. ``openmm amber Reference``: the same on the Reference platform
  (single-threaded, deterministic; faster than CPU for 22 atoms).
* ``learned stand-in W=...``: a **stand-in** energy model used only for timing, NOT a
  trained model: every atom pair's distance expanded in 32 Gaussian radial basis functions,
  a 32-64-64-1 SiLU MLP per pair, summed (231 pairs; about the cost of a small invariant
  network; float32). Forces by autograd (:class:`~sci_moe.sampling.md.ModelForces`),
  integrated with :class:`~sci_moe.sampling.md.LangevinBAOAB` for ``W`` = 1, 16 and 256
  walkers in one batch, no constraints. With ``--model FILE`` (or ``--model default``, the
  shipped ``sci_moe.sampling.diffusion.ALANINE_MODEL``) a saved sci-moe energy model
  (``load_energy_model``, float32) replaces the stand-in; coarse-grained models (10 heavy
  atoms or 5 backbone beads) run on those atoms.
* ``learned via OpenMM PythonForce``: the same model driving an OpenMM ``Simulation`` on the
  Reference platform through :func:`~sci_moe.sampling.md.model_simulation` (one walker).

Metrics: steps/s (integration steps of the whole batch per second), ns/day of simulated
time summed over walkers (``W * steps/s * 2 fs``), with the ratio against the OpenMM CPU
baseline; the bare force evaluation time (one ``energy_and_forces`` call on the batch) and
the integrator overhead ``t_step / t_force - 1`` (aim < 15 %; ratio = ``t_force / t_step``),
measured by interleaved timings (minimum of 5 rounds each; noisy on a loaded machine),
and, robust to load, the integrator's own work per step measured with a zero-force
provider (``ops/force``: that time over the force evaluation time).

First contact (issue 40), each against OpenMM in the same run, both as a user gets them
(fresh processes, no thread settings in the environment):

* ``time to first step``: from starting ``sci-moe md run`` (the default run: the shipped
  model, here with the demo's 64 walkers) to its first step in ``log.csv``, against a
  plain OpenMM script (import, amber99sbildn + OBC from the shipped PDB, ``Simulation``
  on the CPU platform, one step); the median of 3 starts each.
* ``sampling rate, default settings``: ``sci-moe md run`` with ``make demo``'s settings
  (64 walkers, 1 fs, torch threads by default) against OpenMM's CPU platform on its default
  threads (amber99sbildn + OBC, 2 fs, X-H constraints); ns/day summed over the walkers.
* the same two rates **with a second busy process** (a Python busy loop started for the
  measurement). The rates are measured over a shorter run with ``--compile``, what a run of
  the demo's length does by default (compiling is on from 20,000 steps).
* ``make demo`` (set-up excluded): the wall time of its two commands (``md run`` of 64
  walkers x 100 ps, ``md analyse``) beside a busy process, and the JS divergence it prints.

The CPU time other processes (the busy loop included) used during each pair of rate
measurements and during the demo is recorded as ``quiet_load``, ``busy_load`` and
``demo_load``.

Run: ``python benchmarks/md/run.py [--quick] [--json PATH] [--threads N] [--model FILE]``.
``--quick`` times fewer steps (about two minutes on one core).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    machine_info,
    print_table,
    setup,
    time_fn,
    warn_if_busy,
    write_json,
)

from sci_moe.sampling.md import (
    BACKBONE_ATOMS,
    HEAVY_ATOMS,
    ForceProvider,
    LangevinBAOAB,
    ModelForces,
    alanine_dipeptide_pdb,
    build_system,
    model_simulation,
)

BENCHMARK = "md"
TIMESTEP_FS = 2.0


class PairMLPEnergy(torch.nn.Module):
    """Timing stand-in: sum over atom pairs of an MLP of Gaussian RBFs of the distance."""

    def __init__(self, n_atoms: int = 22, n_rbf: int = 32, hidden: int = 64, cutoff: float = 1.2):
        super().__init__()
        iu = torch.triu_indices(n_atoms, n_atoms, 1)
        self.register_buffer("i", iu[0])
        self.register_buffer("j", iu[1])
        self.register_buffer("centers", torch.linspace(0.0, cutoff, n_rbf))
        self.width = cutoff / n_rbf
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(n_rbf, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.SiLU(),
            torch.nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = (x[:, self.i] - x[:, self.j]).norm(dim=-1)
        rbf = torch.exp(-(((r[..., None] - self.centers) / self.width) ** 2))
        return self.mlp(rbf).squeeze(-1).sum(-1)


def ns_per_day(steps_per_s: float, walkers: int = 1) -> float:
    return walkers * steps_per_s * TIMESTEP_FS * 1e-6 * 86400


def time_openmm(platform: str, threads: int | None, n_steps: int) -> float:
    """Steps/s of amber99sbildn + OBC, HBonds, LangevinMiddle 2 fs (``threads`` None: the
    platform's default)."""
    import openmm
    import openmm.unit as u

    _, system, pos = build_system("amber99sbildn", "obc", "hbonds")
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.002)
    integ.setRandomNumberSeed(1)
    props = {"Threads": str(threads)} if platform == "CPU" and threads is not None else {}
    ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName(platform), props)
    ctx.setPositions(pos)
    openmm.LocalEnergyMinimizer.minimize(ctx, 1.0, 200)
    ctx.setVelocitiesToTemperature(300 * u.kelvin, 1)
    t = time_fn(lambda: integ.step(n_steps), repeats=3, warmup=1)
    return n_steps / t.median


def time_learned(
    model, masses, pos, walkers: int, n_steps: int, seed: int, rounds: int = 5
) -> tuple[float, float]:
    """(seconds per force evaluation, seconds per BAOAB step) for ``walkers`` walkers."""
    prov = ModelForces(model, masses)
    g = torch.Generator().manual_seed(seed)
    x0 = torch.as_tensor(pos, dtype=torch.float32)[None].repeat(walkers, 1, 1)
    x0 = x0 + 0.002 * torch.randn(x0.shape, generator=g)
    integ = LangevinBAOAB(TIMESTEP_FS * 1e-3, temperature_k=300.0, friction_per_ps=1.0)
    state = integ.init_state(prov, x0, g)
    n_force = n_steps

    def forces():
        for _ in range(n_force):
            prov.energy_and_forces(state.positions)

    def steps():
        integ.step(state, prov, g, n_steps)

    # interleave the two measurements so that load changes hit both alike; the minimum of
    # several rounds is the least disturbed estimate on a shared machine
    tf, ts = [], []
    forces()
    steps()
    for _ in range(rounds):
        tf.append(time_fn(forces, repeats=1, warmup=0).median / n_force)
        ts.append(time_fn(steps, repeats=1, warmup=0).median / n_steps)
    return min(tf), min(ts)


class _ZeroForces(ForceProvider):
    """Zero forces (with the same input check): isolates the integrator's own work."""

    dim = 3

    def __init__(self, masses):
        self.masses = torch.as_tensor(masses, dtype=torch.float64)

    def energy_and_forces(self, positions):
        self.check(positions)
        return positions.new_zeros(positions.shape[0]), torch.zeros_like(positions)


def time_integrator_only(masses, pos, walkers: int, n_steps: int, seed: int) -> float:
    """Seconds per BAOAB step with zero forces (the integrator's arithmetic and RNG)."""
    prov = _ZeroForces(masses)
    g = torch.Generator().manual_seed(seed)
    x0 = torch.as_tensor(pos, dtype=torch.float32)[None].repeat(walkers, 1, 1)
    integ = LangevinBAOAB(TIMESTEP_FS * 1e-3, temperature_k=300.0, friction_per_ps=1.0)
    state = integ.init_state(prov, x0, g)
    t = time_fn(lambda: integ.step(state, prov, g, n_steps), repeats=5, warmup=1)
    return min(t.times) / n_steps


def _bead_topology(n: int):
    """A one-residue topology of ``n`` carbon beads (for OpenMM reporters of CG models)."""
    import openmm.app as app

    top = app.Topology()
    res = top.addResidue("CG", top.addChain())
    for i in range(n):
        top.addAtom(f"B{i}", app.Element.getBySymbol("C"), res)
    return top


def time_bridge(model, topology, masses, pos, n_steps: int) -> float:
    sim = model_simulation(
        model.double(), topology, masses, pos, timestep_fs=TIMESTEP_FS, platform="Reference"
    )
    t = time_fn(lambda: sim.step(n_steps), repeats=3, warmup=1)
    model.float()
    return n_steps / t.median


# ----------------------------------------------------------------- first contact

_OPENMM_SCRIPT = """
import openmm, openmm.app as app, openmm.unit as u
pdb = app.PDBFile({pdb!r})
ff = app.ForceField("amber99sbildn.xml", "amber99_obc.xml")
system = ff.createSystem(pdb.topology, nonbondedMethod=app.NoCutoff, constraints=app.HBonds)
integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.002 * u.picoseconds)
sim = app.Simulation(pdb.topology, system, integ, openmm.Platform.getPlatformByName("CPU"))
sim.context.setPositions(pdb.positions)
sim.step(1)
print("first step", flush=True)
"""
DEMO_WALKERS = 64


def _user_env() -> dict[str, str]:
    """This environment without thread settings: what a user's shell gives a command."""
    drop = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENMM_CPU_THREADS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _sci_moe() -> list[str]:
    exe = Path(sys.executable).with_name("sci-moe")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "sci_moe.cli.main"]


def _md_run(out: Path, steps: int, report_interval: int, *extra: str) -> list[str]:
    return [
        *_sci_moe(),
        *("md", "run", "--out", str(out), "--walkers", str(DEMO_WALKERS)),
        *("--steps", str(steps), "--report-interval", str(report_interval)),
        *("--checkpoint-interval", "10000", "--seed", "0", "--no-progress", *extra),
    ]


def first_step_sci_moe(out: Path) -> float:
    """Seconds from starting ``sci-moe md run`` to its first step's row in ``log.csv``."""
    log = out / "log.csv"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        _md_run(out, 2, 1), env=_user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    seen = None
    while seen is None:
        finished = proc.poll() is not None
        if log.is_file() and log.read_text().count("\n") >= 2:
            seen = time.perf_counter() - t0
        elif finished:
            raise SystemExit(f"sci-moe md run failed: {proc.stderr.read().decode()[-2000:]}")
        else:
            time.sleep(0.002)
    proc.wait()
    return seen


def first_step_openmm() -> float:
    """Seconds from starting the OpenMM script to its first step."""
    script = _OPENMM_SCRIPT.format(pdb=str(alanine_dipeptide_pdb()))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=_user_env(), stdout=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline()
    seen = time.perf_counter() - t0
    if proc.wait() or "first step" not in line:
        raise SystemExit("the OpenMM first-step script failed")
    return seen


def rate_sci_moe(out: Path, steps: int) -> float:
    """ns/day summed over the walkers of ``sci-moe md run`` with the demo's settings (from
    the last ``log.csv`` row: the run's speed since its first step)."""
    # --compile: what a run of the demo's length (100,000 steps) does by default
    cmd = _md_run(out, steps, 200, "--compile")
    subprocess.run(cmd, env=_user_env(), check=True, capture_output=True)
    header, *_, last = (out / "log.csv").read_text().strip().splitlines()
    return float(last.split(",")[header.split(",").index("speed_ns_per_day_all_walkers")])


def demo_wall(out: Path) -> tuple[float, float]:
    """Wall seconds of ``make demo``'s two commands (set-up excluded) and the JS divergence
    ``md analyse`` prints."""
    run = [
        *_sci_moe(),
        *("md", "run", "--out", str(out), "--walkers", str(DEMO_WALKERS), "--time-ns", "0.1"),
        *("--report-interval", "200", "--checkpoint-interval", "10000", "--seed", "0"),
        *("--overwrite", "--no-progress"),
    ]
    analyse = [*_sci_moe(), "md", "analyse", str(out), "--burn-in-ps", "10"]
    t0 = time.perf_counter()
    for cmd in (run, analyse):
        subprocess.run(cmd, env=_user_env(), check=True, capture_output=True)
    wall = time.perf_counter() - t0
    return wall, float(json.loads((out / "analysis.json").read_text())["js_divergence"])


class BusyProcess:
    """A second process that keeps one core busy (a Python loop) while in the block."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)  # running before the measurement starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def first_contact(quick: bool) -> tuple[list[Row], list[list], dict]:
    """Time to first step and default-settings sampling rates, quiet and beside a busy
    process, against OpenMM in the same run (see the module docstring)."""
    rows: list[Row] = []
    table = []
    steps = 2000 if quick else 10000
    n_omm = 2000 if quick else 10000
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ours = [first_step_sci_moe(tmp / f"first{i}") for i in range(3)]
        theirs = [first_step_openmm() for _ in range(3)]
        t_ours, t_omm = sorted(ours)[1], sorted(theirs)[1]
        case, base = "sci-moe md run (shipped model)", "openmm script (amber, CPU)"
        rows.append(Row(base, "time to first step", t_omm, "s"))
        rows.append(Row(case, "time to first step", t_ours, "s", base, t_omm / t_ours))
        table.append([case, "time to first step", t_ours, "s", t_omm / t_ours])
        table.append([base, "time to first step", t_omm, "s", None])
        info = {}
        for busy in (False, True):
            tag = " + busy process" if busy else ""
            with BusyProcess() if busy else contextlib.nullcontext():
                load = OtherLoad()
                ours = rate_sci_moe(tmp / f"rate{int(busy)}", steps)
                omm = ns_per_day(time_openmm("CPU", None, n_omm))
                info["busy_load" if busy else "quiet_load"] = load.report()
            base = f"openmm amber CPU, default threads{tag}"
            case = f"sci-moe md run default settings, {DEMO_WALKERS} walkers{tag}"
            rows.append(Row(base, "ns/day", omm, "ns/day"))
            rows.append(Row(case, "ns/day (all walkers)", ours, "ns/day", base, ours / omm))
            table.append([case, "ns/day (all walkers)", ours, "ns/day", ours / omm])
            table.append([base, "ns/day", omm, "ns/day", None])
        with BusyProcess():
            load = OtherLoad()
            wall, js = demo_wall(tmp / "demo")
            info["demo_load"] = load.report()
        case = "make demo (set-up excluded) + busy process"
        rows.append(Row(case, "wall time", wall, "s"))
        rows.append(Row(case, "JS divergence vs amber reference", js, "nats"))
        table.append([case, "wall time", wall, "s", None])
    return rows, table, info


def main() -> None:
    p = base_parser(__doc__.split("\n", 1)[0])
    p.add_argument(
        "--model",
        default=None,
        help="a saved sci-moe energy model (safetensors), or 'default' for the shipped one",
    )
    args = p.parse_args()
    setup(args)
    threads = args.threads or torch.get_num_threads()
    warn = warn_if_busy()
    other = OtherLoad()
    torch.use_deterministic_algorithms(True)
    import openmm.app as app

    pdb = app.PDBFile(str(alanine_dipeptide_pdb()))
    _, system, pos = build_system("amber99sbildn", None, None)
    masses = np.array([system.getParticleMass(i)._value for i in range(22)])
    topology = pdb.topology
    if args.model:
        from sci_moe.sampling.diffusion import ALANINE_MODEL, load_energy_model

        path = ALANINE_MODEL if args.model == "default" else args.model
        model, model_masses, _, _ = load_energy_model(path, dtype=torch.float32)
        n = len(model_masses) if model_masses is not None else 22
        subsets = {22: tuple(range(22)), len(HEAVY_ATOMS): HEAVY_ATOMS, 5: BACKBONE_ATOMS}
        if n not in subsets:
            raise SystemExit(f"{path}: a model of {n} particles is not an alanine dipeptide model")
        idx = list(subsets[n])
        pos, masses = pos[idx], masses[idx]
        if model_masses is not None:
            masses = model_masses.numpy()
        topology = _bead_topology(n) if n != 22 else topology
        model_name = f"model {Path(path).name} ({n} particles)"
    else:
        torch.manual_seed(args.seed)
        model = PairMLPEnergy()
        model_name = "learned stand-in (pair-RBF MLP, untrained)"
    model.eval()

    n_omm = 2000 if args.quick else 20000
    walker_steps = {1: 100, 16: 50, 256: 8} if args.quick else {1: 500, 16: 200, 256: 40}
    rows: list[Row] = []
    table = []
    t0 = time.perf_counter()

    contact_rows, contact_table, contact_info = first_contact(args.quick)
    print_table(
        ["case", "metric", "value", "unit", "vs OpenMM"],
        contact_table,
        title="first contact: sci-moe md run vs OpenMM, as a user starts them",
    )
    rows += contact_rows

    cpu = time_openmm("CPU", threads, n_omm)
    ref = time_openmm("Reference", 1, n_omm)
    base = "openmm amber CPU"
    for case, sps, vs in ((base, cpu, None), ("openmm amber Reference", ref, base)):
        r = None if vs is None else sps / cpu
        rows.append(Row(case, "steps/s", sps, "1/s", vs, r))
        rows.append(Row(case, "ns/day", ns_per_day(sps), "ns/day", vs, r))
        table.append([case, 1, sps, ns_per_day(sps), r, None, None, None])

    for w, n in walker_steps.items():
        t_force, t_step = time_learned(model, masses, pos, w, n, args.seed)
        sps = 1.0 / t_step
        case = f"learned stand-in W={w}" if not args.model else f"learned model W={w}"
        nsd = ns_per_day(sps, w)
        overhead = t_step / t_force - 1
        t_ops = time_integrator_only(masses, pos, w, 500, args.seed)
        rows += [
            Row(case, "integrator-only step (zero forces)", t_ops * 1e6, "us"),
            Row(
                case,
                "integrator overhead from ops",
                100 * t_ops / t_force,
                "%",
                "bare force",
                t_force / (t_force + t_ops),
            ),
            Row(case, "steps/s", sps, "1/s"),
            Row(case, "ns/day (all walkers)", nsd, "ns/day", base, nsd / ns_per_day(cpu)),
            Row(case, "force evaluation", t_force * 1e3, "ms", None, None),
            Row(case, "integrator overhead", 100 * overhead, "%", "bare force", t_force / t_step),
        ]
        table.append(
            [
                case,
                w,
                sps,
                nsd,
                nsd / ns_per_day(cpu),
                t_force * 1e3,
                100 * overhead,
                100 * t_ops / t_force,
            ]
        )

    bridge_sps = time_bridge(model, topology, masses, pos, 200 if args.quick else 1000)
    case = "learned via OpenMM PythonForce"
    rows.append(Row(case, "steps/s", bridge_sps, "1/s"))
    rows.append(Row(case, "ns/day", ns_per_day(bridge_sps), "ns/day", base, bridge_sps / cpu))
    table.append([case, 1, bridge_sps, ns_per_day(bridge_sps), bridge_sps / cpu, None, None, None])

    print_table(
        [
            "case",
            "walkers",
            "steps/s",
            "ns/day",
            "vs OpenMM CPU",
            "force ms",
            "overhead %",
            "ops/force %",
        ],
        table,
        title=f"alanine dipeptide MD, 2 fs, threads={threads}; model: {model_name}",
    )
    load = other.report()
    print(f"wall {time.perf_counter() - t0:.1f} s; other processes: {load}")
    if args.json:
        machine = machine_info(
            seed=args.seed,
            quick=args.quick,
            model=model_name,
            openmm_threads=threads,
            other_load=load,
            **contact_info,
            busy_warning=warn,
            command="python benchmarks/md/run.py"
            + (" --quick" if args.quick else "")
            + (f" --model {args.model}" if args.model else "")
            + f" --threads {threads}",
        )
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    assert all(math.isfinite(r.value) for r in rows)


if __name__ == "__main__":
    main()
