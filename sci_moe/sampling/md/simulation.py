"""The MD run loop: reporters, stability checks, checkpoints, exact resume, time limits.

Two engines behind one API (:meth:`run`, :meth:`save_checkpoint`, :meth:`load_checkpoint`):

* :class:`Simulation` drives the torch integrators of :mod:`sci_moe.sampling.md.integrators`
  (Langevin BAOAB, overdamped Euler-Maruyama) with any
  :class:`~sci_moe.sampling.md.forces.ForceProvider` (analytic potentials, learned energy
  models, OpenMM systems), ``W`` independent walkers in one batch. All randomness comes
  from one ``torch.Generator`` whose state is checkpointed, so a resumed run continues bit
  for bit.
* :class:`~sci_moe.sampling.md.openmm_engine.OpenMMSimulation` (in
  :mod:`~sci_moe.sampling.md.openmm_engine`) runs OpenMM's own ``LangevinMiddleIntegrator``
  on an ``openmm.System`` (one walker); its checkpoints embed OpenMM's binary context
  checkpoint (positions, velocities, integrator RNG), exact with ``deterministic=True``.

The loop follows OpenMM's ``Simulation._simulate``: ask every reporter how many steps until
its next report, step exactly that far (in chunks of at most ``check_interval`` steps,
checking after each chunk that the potential energy is finite and did not jump by more
than ``energy_jump_kj_mol``; a failed check inspects positions, velocities and energies to
name the cause, and stops the run with :class:`SimulationFailure`), build one
:class:`~sci_moe.sampling.md.reporters.Snapshot` with the union of the requested fields and
hand it to the due reporters, checkpoint reporters last.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..._util import BOLTZMANN_KJ_PER_MOL_K
from .checkpoint import load_checkpoint, save_checkpoint
from .reporters import CheckpointReporter, Reporter, Snapshot

__all__ = [
    "KB_KJ_PER_MOL_K",
    "RunResult",
    "Simulation",
    "SimulationFailure",
]

#: Boltzmann constant, kJ/(mol K) (the value OpenMM uses); alias of
#: ``sci_moe._util.BOLTZMANN_KJ_PER_MOL_K``.
KB_KJ_PER_MOL_K = BOLTZMANN_KJ_PER_MOL_K


class SimulationFailure(RuntimeError):
    """The dynamics became unstable; the message names the step and the cause.

    Attributes
    ----------
    step : int
        The step at which the problem was detected.
    cause : str
        What went wrong (non-finite positions or energy, energy jump, engine error).
    walker : int or None
        The first walker affected.
    checkpoint_step : int or None
        Step of the last good checkpoint written in this process (``None`` if none).
    """

    def __init__(self, step: int, cause: str, walker: int | None, checkpoint_step: int | None):
        self.step, self.cause, self.walker, self.checkpoint_step = (
            step,
            cause,
            walker,
            checkpoint_step,
        )
        where = "" if walker is None else f" (walker {walker})"
        kept = (
            f"The last good checkpoint (step {checkpoint_step}) and the frames written so far "
            "are kept; --resume restarts from that checkpoint"
            if checkpoint_step is not None
            else "No checkpoint was written in this run; the frames written so far are kept"
        )
        super().__init__(
            f"MD stopped at step {step}: {cause}{where}. {kept}. A smaller timestep "
            "(--timestep-fs) or larger friction usually helps."
        )


@dataclass
class RunResult:
    """What :meth:`Simulation.run` did.

    Attributes
    ----------
    status : str
        ``"completed"``, ``"time-limit"`` (stopped by ``max_hours``) or ``"stopped"``
        (:attr:`Simulation.stop_requested` was set, e.g. by SIGTERM); the last two after a
        checkpoint.
    steps : int
        Steps taken in this call.
    final_step : int
        :attr:`Simulation.current_step` at the end.
    wall_s : float
        Wall-clock seconds of this call.
    ns_per_day : float
        Simulated ns per wall-clock day in this call (per walker).
    """

    status: str
    steps: int
    final_step: int
    wall_s: float
    ns_per_day: float


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x)


class _RunLoop:
    """Shared loop; subclasses implement the engine hooks."""

    engine = "base"

    def _init_loop(self, reporters, check_interval, energy_jump_kj_mol, metadata):
        if int(check_interval) != check_interval or check_interval < 1:
            raise ValueError(f"check_interval must be a positive integer, got {check_interval}")
        if energy_jump_kj_mol is not None and not energy_jump_kj_mol > 0:
            raise ValueError(
                f"energy_jump_kj_mol must be positive or None, got {energy_jump_kj_mol}"
            )
        self.reporters: list[Reporter] = list(reporters)
        self.check_interval = int(check_interval)
        self.energy_jump_kj_mol = energy_jump_kj_mol
        self.metadata = dict(metadata or {})
        self.run_start_step = self.current_step
        self.run_start_wall = time.perf_counter()
        self.last_checkpoint_step: int | None = None
        self._last_checked_energy: np.ndarray | None = None
        #: Set (e.g. from a signal handler) to stop :meth:`run` cleanly after the current
        #: chunk of steps, with a checkpoint; :meth:`run` then returns ``status="stopped"``.
        self.stop_requested = False

    # -- engine hooks --------------------------------------------------------------
    def _advance(self, n: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """positions (W,N,D), energy (W,), velocities or None, as numpy (for checks)."""
        raise NotImplementedError  # pragma: no cover

    def snapshot(self, include=frozenset({"positions", "velocities", "energy", "temperature"})):
        """The current state as a :class:`~sci_moe.sampling.md.reporters.Snapshot`."""
        raise NotImplementedError  # pragma: no cover

    def _engine_state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _load_engine_state(self, state: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------
    @property
    def time_ps(self) -> float:
        """Simulated time, ps (continued from a checkpoint's time when the timestep changed
        on resume)."""
        step0, time0 = getattr(self, "_time_origin", (0, 0.0))
        return time0 + (self.current_step - step0) * self.timestep_ps

    def speed_ns_per_day(self) -> float | None:
        """Simulated ns per wall-clock day since the start of the current :meth:`run`."""
        steps = self.current_step - self.run_start_step
        wall = time.perf_counter() - self.run_start_wall
        if steps <= 0 or wall <= 0:
            return None
        return steps * self.timestep_ps * 1e-3 / (wall / 86400.0)

    def _kinetic(self, velocities: np.ndarray | None, masses: np.ndarray):
        if velocities is None:
            return None, None
        ke = 0.5 * np.einsum("n,wnd->w", masses, velocities**2)
        return ke, 2.0 * ke / (self.n_dof * KB_KJ_PER_MOL_K)

    def _check(self) -> None:
        positions, energy, velocities = self._check_state()
        step = self.current_step
        problems = [
            ("non-finite positions", ~np.isfinite(positions).reshape(len(positions), -1).all(1)),
            ("non-finite potential energy", ~np.isfinite(energy)),
        ]
        if velocities is not None:
            bad_v = ~np.isfinite(velocities).reshape(len(velocities), -1).all(1)
            problems.append(("non-finite velocities", bad_v))
        for cause, bad in problems:
            if bad.any():
                w = int(np.flatnonzero(bad)[0])
                if cause.endswith("energy"):
                    cause += f" ({energy[w]})"
                self._fail(step, cause, w)
        if self.energy_jump_kj_mol is not None and self._last_checked_energy is not None:
            jump = np.abs(energy - _numpy(self._last_checked_energy))
            if (jump > self.energy_jump_kj_mol).any():
                w = int(np.argmax(jump))
                self._fail(
                    step,
                    f"potential energy jumped by {jump[w]:.4g} kJ/mol in {self._last_check_gap} "
                    f"step(s), from {_numpy(self._last_checked_energy)[w]:.6g} to {energy[w]:.6g} "
                    f"(threshold {self.energy_jump_kj_mol:g} kJ/mol)",
                    w,
                )
        self._last_checked_energy = energy.copy()

    def _fail(self, step: int, cause: str, walker: int | None):
        self.close()
        raise SimulationFailure(step, cause, walker, self.last_checkpoint_step)

    def run(self, n_steps: int, *, max_hours: float | None = None) -> RunResult:
        """Advance ``n_steps`` steps, calling reporters when they are due.

        Parameters
        ----------
        n_steps : int
            Steps to take (>= 0).
        max_hours : float, optional
            Wall-clock limit for this call: once exceeded, write a checkpoint (to the first
            :class:`~sci_moe.sampling.md.reporters.CheckpointReporter`'s path) and return
            with ``status="time-limit"``.

        Raises
        ------
        SimulationFailure
            On non-finite positions/energies or an energy jump (files are closed first).
        """
        if int(n_steps) != n_steps or n_steps < 0:
            raise ValueError(f"n_steps must be a non-negative integer, got {n_steps!r}")
        if max_hours is not None and not max_hours > 0:
            raise ValueError(f"max_hours must be positive, got {max_hours}")
        target = self.current_step + int(n_steps)
        self.run_start_step = self.current_step
        self.run_start_wall = time.perf_counter()
        deadline = None if max_hours is None else self.run_start_wall + 3600.0 * max_hours
        order = sorted(self.reporters, key=lambda r: r.is_checkpoint)
        if self._last_checked_energy is None:
            self._last_check_gap = 0
            self._check()
        status = "completed"

        def ask(r):
            q = r.describe_next_report(self)
            return self.current_step + q.steps, q.include

        # A reporter's answer changes only when it reports, so each is asked once per report.
        pending = {r: ask(r) for r in order}
        try:
            while self.current_step < target:
                next_due = min((due for due, _ in pending.values()), default=math.inf)
                chunk = int(
                    min(
                        target - self.current_step,
                        next_due - self.current_step,
                        self.check_interval,
                    )
                )
                self._advance(chunk)
                self._last_check_gap = chunk
                self._check()
                if self.current_step == next_due:
                    due = [r for r in order if pending[r][0] == next_due]
                    include = frozenset().union(*(pending[r][1] for r in due))
                    snap = self.snapshot(include)
                    for r in due:
                        r.report(self, snap)
                    for r in due:
                        pending[r] = ask(r)
                if self.stop_requested:
                    status = "stopped"
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    status = "time-limit"
                    break
            self._final_checkpoint()
        except SimulationFailure:
            raise
        except BaseException:
            self.close()
            raise
        wall = time.perf_counter() - self.run_start_wall
        done = self.current_step - self.run_start_step
        speed = done * self.timestep_ps * 1e-3 / (wall / 86400.0) if wall > 0 else math.inf
        return RunResult(status, done, self.current_step, wall, speed)

    def _final_checkpoint(self) -> None:
        ckpt = [r for r in self.reporters if isinstance(r, CheckpointReporter)]
        if ckpt and self.last_checkpoint_step != self.current_step:
            self.save_checkpoint(ckpt[0].path)

    def close(self) -> None:
        """Close every reporter's files."""
        for r in self.reporters:
            r.close()

    def checkpoint_state(self) -> dict[str, Any]:
        """The checkpoint dictionary (see :mod:`~sci_moe.sampling.md.checkpoint`)."""
        for r in self.reporters:
            r.flush()
        return {
            "engine": self.engine,
            "step": self.current_step,
            "time_ps": self.time_ps,
            "engine_state": self._engine_state(),
            "reporters": {r.key: r.state_dict() for r in self.reporters},
            "metadata": self.metadata,
        }

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write an atomic checkpoint of the engine and the reporters' file positions."""
        out = save_checkpoint(path, self.checkpoint_state())
        self.last_checkpoint_step = self.current_step
        return out

    def load_checkpoint(self, path_or_state: str | Path | dict) -> dict[str, Any]:
        """Continue from a checkpoint: restore the engine, truncate reporter files back.

        Reporters are matched by :attr:`~sci_moe.sampling.md.reporters.Reporter.key`; a
        reporter the checkpoint does not know starts a new file.

        Returns
        -------
        dict
            The checkpoint (its ``"metadata"`` holds what was passed at construction,
            e.g. the resolved run configuration).
        """
        state = path_or_state if isinstance(path_or_state, dict) else load_checkpoint(path_or_state)
        if state.get("engine") != self.engine:
            raise ValueError(
                f"the checkpoint is from the {state.get('engine')!r} engine, this simulation "
                f"uses {self.engine!r}"
            )
        saved = state.get("reporters", {})
        for r in self.reporters:  # every file is checked before any is touched
            r.verify(saved.get(r.key))
        self._load_engine_state(state["engine_state"])
        self.current_step = int(state["step"])
        for r in self.reporters:
            r.restore(saved.get(r.key))
        self._time_origin = (self.current_step, float(state.get("time_ps", self.time_ps)))
        self.last_checkpoint_step = self.current_step
        self._last_checked_energy = None
        return state


class Simulation(_RunLoop):
    """Torch MD: ``W`` walkers, any force provider, a torch integrator.

    Parameters
    ----------
    provider : ForceProvider
        Energies (kJ/mol) and forces (kJ/mol/nm) of positions ``(W, N, D)``; ``masses``
        ``(N,)`` amu.
    integrator : LangevinBAOAB or OverdampedEulerMaruyama
        Its ``timestep_ps`` sets the time axis.
    state : MDState or Tensor
        A state from ``integrator.init_state`` or initial positions ``(W, N, D)`` (then
        ``init_state`` is called with ``generator``).
    reporters : sequence of Reporter
    generator : torch.Generator, optional
        The only source of randomness (default: seeded with ``seed``).
    seed : int
        Seed for the default generator.
    check_interval : int
        Stability checks every this many steps (default 1: the failing step is exact). A
        check compares the potential energy with the previous check (finite, no jump); when
        it fails, positions, velocities and energies are inspected to name the cause.
    energy_jump_kj_mol : float or None
        Stop if a walker's potential energy changes by more than this between two checks
        (default 1e4 kJ/mol); ``None`` disables the check.
    topology : openmm.app.Topology, optional
        Passed to reporters that need one.
    metadata : dict, optional
        Stored in every checkpoint (e.g. the resolved run configuration).

    Examples
    --------
    Four walkers in a 2-D double well (reduced units, ``kT = 1``), logged every 100 steps:

    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from sci_moe.sampling.md import DoubleWell, LangevinBAOAB, LogReporter, PotentialForces
    >>> log = Path(tempfile.mkdtemp()) / "log.csv"
    >>> sim = Simulation(PotentialForces(DoubleWell(dim=2)), LangevinBAOAB(0.01, kT=1.0),
    ...                  torch.zeros(4, 1, 2), [LogReporter(log, 100)], seed=1)
    >>> sim.run(500).status
    'completed'
    >>> sim.current_step, len(log.read_text().splitlines())  # header + 5 rows
    (500, 6)
    """

    engine = "torch"

    def __init__(
        self,
        provider,
        integrator,
        state,
        reporters=(),
        *,
        generator: torch.Generator | None = None,
        seed: int = 0,
        check_interval: int = 1,
        energy_jump_kj_mol: float | None = 1.0e4,
        topology=None,
        metadata: dict | None = None,
    ):
        self.provider = provider
        self.integrator = integrator
        if generator is None:
            device = state.device if isinstance(state, torch.Tensor) else state.positions.device
            generator = torch.Generator(device=device)
            generator.manual_seed(int(seed))
        self.generator = generator
        if isinstance(state, torch.Tensor):
            if state.dim() != 3:
                raise ValueError(f"positions must have shape (W, N, D), got {tuple(state.shape)}")
            state = integrator.init_state(provider, state, generator)
        self.state = state
        self.current_step = int(getattr(state, "step", 0))
        self.timestep_ps = float(integrator.timestep_ps)
        self.topology = topology
        w, n, d = state.positions.shape
        self.n_walkers, self.n_particles, self.dim = w, n, d
        self.n_dof = n * d
        self._masses = provider.masses.detach().cpu().double().numpy()
        # Overdamped dynamics has no velocities (the state keeps zeros): no temperature.
        self.has_velocities = type(integrator).__name__ != "OverdampedEulerMaruyama"
        self._init_loop(reporters, check_interval, energy_jump_kj_mol, metadata)

    def _advance(self, n: int) -> None:
        self.state = self.integrator.step(self.state, self.provider, self.generator, n_steps=n)
        self.current_step += n

    def _check(self) -> None:
        # Fast path, one reduction and one host sync per check: non-finite positions or
        # velocities make the energy non-finite by the next step at the latest, and NaN
        # fails the comparison. The generic check names the cause when this one fails.
        last = self._last_checked_energy
        if isinstance(last, torch.Tensor):
            e = self.state.energy.detach()
            if self.energy_jump_kj_mol is not None:
                ok = ((e - last).abs() <= self.energy_jump_kj_mol).all()
            else:
                ok = torch.isfinite(e).all()
            if bool(ok):
                self._last_checked_energy = e
                return
        super()._check()
        self._last_checked_energy = self.state.energy.detach()

    @staticmethod
    def _np(t):
        return None if t is None else t.detach().cpu().double().numpy()

    def _check_state(self):
        s = self.state
        v = self._np(s.velocities) if self.has_velocities else None
        return self._np(s.positions), self._np(s.energy), v

    def snapshot(self, include=frozenset({"positions", "velocities", "energy", "temperature"})):
        s = self.state
        snap = Snapshot(self.current_step, self.time_ps)
        if "positions" in include:
            snap.positions = self._np(s.positions)
        velocities = self._np(s.velocities) if self.has_velocities else None
        if "velocities" in include:
            snap.velocities = velocities
        if "energy" in include:
            snap.potential_energy = self._np(s.energy)
        if "temperature" in include or "energy" in include:
            snap.kinetic_energy, snap.temperature = self._kinetic(velocities, self._masses)
        return snap

    def _engine_state(self) -> dict[str, Any]:
        fields = {}
        for f in dataclasses.fields(self.state):
            v = getattr(self.state, f.name)
            fields[f.name] = v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v
        return {"state": fields, "generator": self.generator.get_state()}

    def _load_engine_state(self, state: dict[str, Any]) -> None:
        device = self.state.positions.device
        fields = {
            k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in state["state"].items()
        }
        shape = tuple(fields["positions"].shape)
        if shape != tuple(self.state.positions.shape):
            raise ValueError(
                f"the checkpoint holds positions of shape {shape}, this simulation "
                f"{tuple(self.state.positions.shape)} (different system or --walkers)"
            )
        self.state = type(self.state)(**fields)
        self.generator.set_state(state["generator"])
