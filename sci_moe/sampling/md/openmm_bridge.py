"""Drive OpenMM with a learned sci-moe energy model, so OpenMM's integrators and reporters work.

A learned model is any ``torch.nn.Module`` mapping positions ``(W, N, 3)`` in nm to
energies ``(W,)`` in kJ/mol. :func:`model_force` wraps it in an ``openmm.PythonForce``
(OpenMM >= 8.3) whose callback evaluates the model on the one configuration of the
Context and returns forces :math:`-\\nabla E` by autograd. :func:`model_system` builds a
System holding only that force (masses from the caller), and :func:`model_simulation` an
``openmm.app.Simulation`` with a Langevin integrator, ready for ``DCDReporter``,
``StateDataReporter``, ``CheckpointReporter`` and the rest of OpenMM's app layer.

The callback runs once per force evaluation on the host; it costs a Python round trip per
step, so it suits small molecules (alanine dipeptide: thousands of steps per second on the
Reference platform). Many walkers of a learned model are faster with
:class:`~sci_moe.sampling.md.forces.ModelForces` and the torch integrators.
"""

from __future__ import annotations

import numpy as np
import torch

from .potentials import autograd_energy_and_forces

__all__ = ["ModelComputation", "model_force", "model_simulation", "model_system"]


class ModelComputation:
    """Callable for ``openmm.PythonForce``: ``state -> (energy kJ/mol, forces (N, 3) kJ/mol/nm)``.

    Parameters
    ----------
    energy_model : torch.nn.Module
        ``(W, N, 3)`` nm -> ``(W,)`` kJ/mol.
    dtype : torch.dtype
        Precision of the model evaluation (float64 by default; the model's parameters are
        used as they are, so pass a model in the same dtype).
    device : str or torch.device
        Where the model runs.

    Raises
    ------
    ValueError
        From the callback (and so from ``Simulation.step``) when the model returns a
        non-finite energy or forces, naming the cause.
    """

    def __init__(self, energy_model: torch.nn.Module, dtype=torch.float64, device="cpu") -> None:
        if not callable(energy_model):
            raise TypeError("energy_model must be a callable torch.nn.Module")
        self.model = energy_model
        self.dtype = dtype
        self.device = torch.device(device)
        self.n_calls = 0

    def __call__(self, state):
        import openmm.unit as u

        pos = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        x = torch.as_tensor(np.asarray(pos), dtype=self.dtype, device=self.device)[None]
        energy, forces = autograd_energy_and_forces(self.model, x)
        self.n_calls += 1
        e = float(energy[0])
        f = forces[0].to("cpu", torch.float64).numpy()
        if not np.isfinite(e) or not np.isfinite(f).all():
            what = "energy" if not np.isfinite(e) else "force"
            raise ValueError(
                f"the energy model returned a non-finite {what}"
                f" (call {self.n_calls}); the simulation has probably exploded: reduce the "
                "timestep or check the model"
            )
        return e, f


def model_force(
    energy_model: torch.nn.Module,
    particles: list[int] | None = None,
    dtype=torch.float64,
    device="cpu",
):
    """An ``openmm.PythonForce`` computing energy and forces of ``energy_model``.

    Parameters
    ----------
    energy_model : torch.nn.Module
        ``(W, N, 3)`` nm -> ``(W,)`` kJ/mol.
    particles : list of int, optional
        Apply to these particles only (the model then sees ``N = len(particles)``).
    dtype, device
        See :class:`ModelComputation`.

    Returns
    -------
    openmm.PythonForce
    """
    import openmm

    if not hasattr(openmm, "PythonForce"):
        raise RuntimeError(
            f"OpenMM {openmm.__version__} has no PythonForce (needs >= 8.3); use the torch "
            "integrators with ModelForces instead"
        )
    force = openmm.PythonForce(ModelComputation(energy_model, dtype, device))
    if particles is not None:
        force.setParticles(list(particles))
    return force


def model_system(energy_model: torch.nn.Module, masses, dtype=torch.float64, device="cpu"):
    """An ``openmm.System`` whose only force is the learned model (no constraints, no box).

    Parameters
    ----------
    energy_model : torch.nn.Module
    masses : array-like, shape (N,)
        amu.

    Returns
    -------
    openmm.System
    """
    import openmm

    m = np.asarray(masses, dtype=np.float64)
    if m.ndim != 1 or len(m) == 0 or not (m > 0).all() or not np.isfinite(m).all():
        raise ValueError(f"masses must be a non-empty (N,) array of positive amu, got {m.shape}")
    system = openmm.System()
    for mass in m:
        system.addParticle(float(mass))
    system.addForce(model_force(energy_model, dtype=dtype, device=device))
    return system


def model_simulation(
    energy_model: torch.nn.Module,
    topology,
    masses,
    positions,
    temperature_k: float = 300.0,
    friction_per_ps: float = 1.0,
    timestep_fs: float = 2.0,
    seed: int = 0,
    platform: str = "Reference",
    dtype=torch.float64,
):
    """An ``openmm.app.Simulation`` of ``energy_model`` with ``LangevinMiddleIntegrator``.

    Parameters
    ----------
    energy_model : torch.nn.Module
        ``(W, N, 3)`` nm -> ``(W,)`` kJ/mol.
    topology : openmm.app.Topology
        For reporters (e.g. from the PDB the model was trained on).
    masses : array-like, shape (N,)
        amu.
    positions : array-like, shape (N, 3)
        Initial positions, nm.
    temperature_k, friction_per_ps, timestep_fs : float
        K, 1/ps, fs.
    seed : int
        Non-negative; the integrator's seed is ``seed + 1`` (OpenMM treats 0 as random) and
        velocities are drawn at ``temperature_k`` with seed ``seed + 1``.
    platform : str
        ``"Reference"`` (default; fastest for a Python force on a small molecule) or ``"CPU"``.

    Returns
    -------
    openmm.app.Simulation
    """
    import openmm
    import openmm.app as app
    import openmm.unit as u

    for name, v in (
        ("temperature_k", temperature_k),
        ("friction_per_ps", friction_per_ps),
        ("timestep_fs", timestep_fs),
    ):
        if not (float(v) > 0 and np.isfinite(v)):
            raise ValueError(f"{name} must be positive, got {v}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    pos = np.asarray(positions, dtype=np.float64)
    n = len(np.asarray(masses))
    if pos.shape != (n, 3) or not np.isfinite(pos).all():
        raise ValueError(f"positions must be finite with shape ({n}, 3) nm, got {pos.shape}")
    if topology.getNumAtoms() != n:
        raise ValueError(f"topology has {topology.getNumAtoms()} atoms, masses {n}")
    system = model_system(energy_model, masses, dtype=dtype)
    integrator = openmm.LangevinMiddleIntegrator(
        temperature_k * u.kelvin, friction_per_ps / u.picosecond, timestep_fs * u.femtosecond
    )
    integrator.setRandomNumberSeed(int(seed) + 1)
    sim = app.Simulation(topology, system, integrator, openmm.Platform.getPlatformByName(platform))
    sim.context.setPositions(pos)
    sim.context.setVelocitiesToTemperature(temperature_k * u.kelvin, int(seed) + 1)
    return sim
