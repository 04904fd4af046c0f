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

Run: ``python benchmarks/md.py [--quick] [--json PATH] [--threads N] [--model FILE]``.
``--quick`` times fewer steps (about a minute on one core).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

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

from sci_moe.data.alanine_dipeptide import (
    BACKBONE_ATOMS,
    HEAVY_ATOMS,
    alanine_dipeptide_pdb,
    build_system,
)
from sci_moe.sampling.md import ForceProvider, LangevinBAOAB, ModelForces, model_simulation

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


def time_openmm(platform: str, threads: int, n_steps: int) -> float:
    """Steps/s of amber99sbildn + OBC, HBonds, LangevinMiddle 2 fs."""
    import openmm
    import openmm.unit as u

    _, system, pos = build_system("amber99sbildn", "obc", "hbonds")
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.002)
    integ.setRandomNumberSeed(1)
    props = {"Threads": str(threads)} if platform == "CPU" else {}
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
            busy_warning=warn,
            command="python benchmarks/md.py"
            + (" --quick" if args.quick else "")
            + (f" --model {args.model}" if args.model else "")
            + f" --threads {threads}",
        )
        write_json(args.json, BENCHMARK, machine, rows)
        print(f"wrote {args.json}")
    assert all(math.isfinite(r.value) for r in rows)


if __name__ == "__main__":
    main()
