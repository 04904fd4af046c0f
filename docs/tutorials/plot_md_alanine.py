"""
Molecular dynamics of alanine dipeptide
=======================================

This tutorial simulates alanine dipeptide (ACE-ALA-NME, 22 atoms) twice:

1. from the **command line** with ``sci-moe md run`` (OpenMM's Langevin integrator on the
   amber99sb-ILDN force field with OBC implicit solvent), continuing a stopped run with
   ``--resume`` and analysing it with ``sci-moe md analyse``;
2. from **Python** with :class:`~sci_moe.sampling.md.Simulation`: the torch Langevin
   (BAOAB) integrator drives several walkers at once, forces come from any
   :class:`~sci_moe.sampling.md.ForceProvider` (here the same OpenMM force field; a
   learned energy model plugs in the same way), and OpenMM-style reporters write the
   trajectory, a CSV log and checkpoints.

Everything runs on a CPU in a few seconds; the runs are far too short for converged
statistics (a Ramachandran plot needs nanoseconds), but every file and number is the real
thing.
"""

# %%
# Command line
# ------------
# In a shell, the run below is
#
# .. code-block:: console
#
#     $ sci-moe md run --system alanine-dipeptide --steps 4000 --timestep-fs 2 \
#           --temperature-k 300 --friction-per-ps 1 --report-interval 40 \
#           --checkpoint-interval 1000 --seed 1 --out ala_run
#
# Flags carry their units; a TOML or YAML ``--config`` file can hold the same settings,
# and flags override it. Here we call the same entry point from Python. The run stops at
# step 2000 (think of a wall-clock limit, ``--max-hours``, or a killed job) and is then
# continued with ``--resume`` to 4000 steps: the checkpoint restores positions, velocities
# and the random state, and trajectory and log are cut back to the checkpoint before new
# frames are appended, so the result equals an uninterrupted run.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sci_moe.cli.main import main


def sci_moe(*args: str) -> None:
    """Run a ``sci-moe`` command; a non-zero exit code (bad input: 2) is an error here."""
    code = main(list(args))
    if code != 0:
        raise RuntimeError(f"sci-moe {' '.join(args)} exited with {code}")


work = Path(tempfile.mkdtemp(prefix="sci_moe_md_"))
out = work / "ala_run"
common = ["--no-progress", "--out", str(out)]
physics = ["--timestep-fs", "2", "--temperature-k", "300", "--friction-per-ps", "1"]
output = ["--report-interval", "40", "--checkpoint-interval", "1000", "--seed", "1"]
sci_moe("md", "run", "--system", "alanine-dipeptide", "--steps", "2000", *physics, *output, *common)
sci_moe("md", "run", "--resume", "--steps", "4000", *common)
print(sorted(p.name for p in out.iterdir()))

# %%
# The folder holds the trajectory (DCD; ``--trajectory-format xtc`` for XTC), the CSV
# log, the checkpoint (and the one before it), the starting structure and the resolved
# configuration, which records every setting, including the defaults:

print((out / "config.yaml").read_text())
print("\n".join((out / "log.csv").read_text().splitlines()[:4]))

# %%
# ``sci-moe md analyse`` draws the energy and temperature traces and the phi/psi free
# energy, and, when a reference is available (the alanine-dipeptide reference shipped
# with the package, or ``--reference FILE``), prints the Jensen-Shannon divergence
# between the two phi/psi histograms.

sci_moe("md", "analyse", str(out), "--bins", "32")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, name in zip(axes, ("traces.png", "ramachandran.png"), strict=True):
    ax.imshow(plt.imread(out / name))
    ax.set_axis_off()
fig.tight_layout()

# %%
# Python: many walkers with the torch integrator
# ----------------------------------------------
# The same machinery from Python. :func:`~sci_moe.sampling.md.build_system`
# gives the OpenMM system; :class:`~sci_moe.sampling.md.OpenMMForces` turns it into a
# force provider (energies in kJ/mol, forces in kJ/mol/nm); the torch integrators need
# no constraints, so we use a 1 fs timestep. Positions have shape ``(W, N, 3)``:
# ``W`` walkers of ``N`` atoms, in nm.

import torch

from sci_moe.sampling.md import LangevinBAOAB, OpenMMForces, build_system, phi_psi
from sci_moe.sampling.md.analysis import read_log
from sci_moe.sampling.md.reporters import (
    CheckpointReporter,
    LogReporter,
    Reporter,
    TrajectoryReporter,
)
from sci_moe.sampling.md.simulation import Simulation

topology, system, positions = build_system("amber99sbildn", implicit_solvent="obc")
provider = OpenMMForces(system, properties={"Threads": "1"})
walkers = 4
x0 = torch.as_tensor(positions, dtype=torch.float64)[None].repeat(walkers, 1, 1)
integrator = LangevinBAOAB(timestep_ps=0.001, temperature_k=300.0, friction_per_ps=1.0)


# %%
# A reporter is any object that says how many steps until it next wants data and which
# fields (OpenMM's ``describeNextReport``); the simulation steps exactly that far and
# hands every due reporter one :class:`~sci_moe.sampling.md.reporters.Snapshot`. This one
# keeps phi/psi of every walker in memory:


class PhiPsi(Reporter):
    include = frozenset({"positions"})

    def __init__(self, interval):
        super().__init__(interval)
        self.angles = []

    def report(self, simulation, snapshot):
        self.angles.append(phi_psi(snapshot.positions))  # (W, 2) radians


py_out = work / "python_run"
angles = PhiPsi(10)
sim = Simulation(
    provider,
    integrator,
    x0,
    [
        TrajectoryReporter(py_out / "trajectory.dcd", 50, topology),  # one file per walker
        LogReporter(py_out / "log.csv", 10),
        CheckpointReporter(py_out / "checkpoint.pt", 250),
        angles,
    ],
    seed=7,
)
result = sim.run(1000)
sim.close()
print(result)
print(sorted(p.name for p in py_out.iterdir()))

# %%
# The log holds walker means; the snapshot has per-walker values. The instantaneous
# temperature fluctuates around 300 K (66 degrees of freedom per walker), and the walkers,
# started together, spread over the phi/psi plane.

log = read_log(py_out / "log.csv")
traj = np.stack(angles.angles)  # (frames, W, 2)
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(log["time_ps"], log["temperature_k"])
axes[0].axhline(300, color="k", ls="--", lw=0.8)
axes[0].set(xlabel="time (ps)", ylabel="mean temperature of 4 walkers (K)")
for w in range(walkers):
    axes[1].plot(traj[:, w, 0], traj[:, w, 1], ".", ms=3, label=f"walker {w}")
axes[1].set(xlim=(-np.pi, np.pi), ylim=(-np.pi, np.pi), xlabel="phi (rad)", ylabel="psi (rad)")
axes[1].legend(fontsize=8)
fig.tight_layout()

# %%
# Resuming from Python
# --------------------
# :meth:`~sci_moe.sampling.md.Simulation.load_checkpoint` restores the state and the
# random generator and truncates every reporter's file back to the checkpoint; running
# on reproduces the uninterrupted trajectory bit for bit. Here we go back to step 750
# (the checkpoint before the last one is kept as ``checkpoint_prev.pt``) and rerun the
# last 250 steps:

final = sim.state.positions.clone()
again = Simulation(
    provider,
    integrator,
    x0,
    [
        TrajectoryReporter(py_out / "trajectory.dcd", 50, topology),
        LogReporter(py_out / "log.csv", 10),
        CheckpointReporter(py_out / "checkpoint.pt", 250),
    ],
)
again.load_checkpoint(py_out / "checkpoint_prev.pt")
print("resumed at step", again.current_step)
again.run(1000 - again.current_step)
again.close()
print("identical final positions:", torch.equal(again.state.positions, final))

# %%
# Instabilities stop the run with a message naming the step and the cause (here a far
# too large timestep), keeping the last good checkpoint and the frames written so far:

from sci_moe.sampling.md.simulation import SimulationFailure

unstable = Simulation(provider, LangevinBAOAB(0.02, 300.0, 1.0), x0[:1], seed=0)
try:
    unstable.run(200)
except SimulationFailure as err:
    print(err)

# %%
# The run folders of this tutorial were temporary:

import shutil

shutil.rmtree(work)
