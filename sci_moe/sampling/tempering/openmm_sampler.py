r"""The OpenMM simulated-tempering driver: OpenMM's ``ExpandedEnsembleSampler`` with our moves.

OpenMM 8.6 ships simulated tempering as ``openmm.app.ExpandedEnsembleSampler`` (states
``{"temperature": T}``; ``openmm.app.SimulatedTempering`` is now a deprecated thin wrapper
of it). This module drives it with sci-moe's ladders, weight schemes and diagnostics:

* **Ladder.** Levels are indexed as in :class:`~.tempering.SimulatedTempering`: level 0 is
  the hottest and level ``L-1`` the target temperature :math:`T_0`, with
  :math:`\beta_l = T_0/T_l` (so :func:`~.ladder.geometric_ladder` gives OpenMM's
  exponentially spaced temperatures). The OpenMM state index *is* the level.
* **Level moves**, every ``steps_per_iteration`` MD steps, on the joint target
  :math:`\pi(l, x) \propto \exp(g_l - u_l(x))`, :math:`u_l = E(x)/k_BT_l` (the OpenMM weights
  are our :math:`g`): ``move="gibbs"`` samples :math:`l` from :math:`\pi(l \mid x)` (OpenMM's
  independence sampling), ``move="neighbour"`` proposes :math:`l \pm 1` and accepts with
  :math:`\min\{1, e^{g_{l'} - u_{l'} - g_l + u_l}\}` (Marinari-Parisi, as the batched sampler).
* **Weights.** ``"given"`` (e.g. from an earlier run), ``"park-pande"`` (trapezoidal
  thermodynamic integration of pilot MD means :math:`\langle E\rangle_l`), ``"sams"`` /
  ``"wang-landau"`` (:class:`~.tempering.OnlineWeights`, Rao-Blackwellised), or
  ``"openmm"`` (OpenMM's own Wang-Landau -> 1/t rule, run by the parent class with its random
  numbers taken from this sampler's seeded generator).
* **Velocities** after a temperature change: ``"rescale"`` multiplies them by
  :math:`\sqrt{T_{l'}/T_l}` (OpenMM's default; exact: it maps Maxwell-Boltzmann at
  :math:`T_l` onto Maxwell-Boltzmann at :math:`T_{l'}` and its Jacobian cancels the kinetic
  normalisations, see :mod:`.langevin`); ``"resample"`` redraws them at :math:`T_{l'}`.
* **Trace and diagnostics.** Every iteration records the level, the potential energy and
  the weights; positions every ``record_positions`` iterations. :class:`OpenMMTemperingResult`
  gives the level histogram, round trips, level-move acceptance and the estimates at the
  target level, with :mod:`.diagnostics`.

Runs are reproducible: the integrator, the velocity draws and the level moves all take
their random numbers from ``seed`` (use the CPU platform with one thread, or
``DeterministicForces``, for bitwise-equal forces).

**Checkpoints.** :meth:`OpenMMSimulatedTempering.save_checkpoint` writes the whole chain
state atomically with the md run layer's checkpoint code (:mod:`.openmm_checkpoint`; one
``torch.save`` file of plain containers, read back with ``weights_only=True``): the OpenMM
context checkpoint
(``Context.createCheckpoint``, which, unlike positions and velocities alone, holds the
integrator's random-number state, so a resumed run is bitwise identical on the same
platform), the positions, velocities and box as a portable fallback, the level, the weights,
the online-weight (or OpenMM Wang-Landau) state, our random-generator states, the iteration
counters and the trace of an unfinished ``run``, and fingerprints of the config, system and
integrator. ``run(..., checkpoint_path=..., checkpoint_interval=k)`` writes one every ``k``
iterations (an md :class:`~sci_moe.sampling.md.CheckpointReporter`, beside an md
:class:`~sci_moe.sampling.md.ProgressReporter`, driven by the md reporter protocol with
iterations as steps), so a killed run loses at most ``k`` iterations::

    st = OpenMMSimulatedTempering.from_system(top, system, pos, cfg)
    if path.exists():
        st.load_checkpoint(path)  # refuses another config / system with a ValueError
    res = st.run(10_000, checkpoint_path=path, checkpoint_interval=500)  # finishes the run
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import torch
from openmm.app import expandedensemblesampler as _ees

from ..._util import BOLTZMANN_KJ_PER_MOL_K
from .. import md
from .level_moves import (
    gibbs_move,
    level_probabilities,
    neighbour_move,
    rao_blackwell_acceptance,
)
from .openmm_checkpoint import capture_state, restore_state, write_checkpoint
from .openmm_config import OpenMMTemperingConfig, config_dict
from .openmm_result import OpenMMTemperingResult
from .weights import OnlineWeights, park_pande_weights

__all__ = ["OpenMMSimulatedTempering"]

_CHUNK = 200  # iterations per simulation.step call at most (progress updates)


class _Sampler(_ees.ExpandedEnsembleSampler):
    """``ExpandedEnsembleSampler`` with seeded, configurable level moves and a trace."""

    def __init__(self, owner: OpenMMSimulatedTempering, states, simulation, g, update_weights):
        cfg = owner.config
        self._owner = owner
        super().__init__(
            states,
            simulation,
            cfg.steps_per_iteration,
            reinitializeVelocities=cfg.velocities == "resample",
            weights=None if update_weights else [float(v) for v in g],
            reportInterval=cfg.steps_per_iteration,
        )
        if update_weights:  # OpenMM's adaptation starts from our initial weights
            self._weights = [float(v) for v in g]
        self.currentStateIndex = len(states) - 1  # start at the target temperature
        self._sampler.applyState(self.currentStateIndex)

    def attemptStateChange(self, state):
        return self._owner._attempt(self, state)


class OpenMMSimulatedTempering:
    """Simulated tempering of an OpenMM ``Simulation`` over a temperature ladder.

    Parameters
    ----------
    simulation : openmm.app.Simulation
        Its integrator must have ``setTemperature`` (e.g. ``LangevinMiddleIntegrator``);
        its temperature is reset to the levels' temperatures by the sampler.
    config : OpenMMTemperingConfig

    Examples
    --------
    >>> top, system, pos = build_system()                       # doctest: +SKIP
    >>> cfg = OpenMMTemperingConfig(min_temperature_k=300, max_temperature_k=600)
    >>> st = OpenMMSimulatedTempering.from_system(top, system, pos, cfg)  # doctest: +SKIP
    >>> res = st.run(10_000)                                     # doctest: +SKIP
    >>> res.summary()["round_trips"]                             # doctest: +SKIP

    Long runs checkpoint atomically and resume exactly (see the module docs):

    >>> st = OpenMMSimulatedTempering.from_system(top, system, pos, cfg)  # doctest: +SKIP
    >>> st.load_checkpoint("st.npz")                                     # doctest: +SKIP
    >>> res = st.run(10_000, checkpoint_path="st.npz", checkpoint_interval=500)  # doctest: +SKIP
    """

    def __init__(self, simulation: app.Simulation, config: OpenMMTemperingConfig) -> None:
        if not isinstance(config, OpenMMTemperingConfig):
            raise TypeError("config must be an OpenMMTemperingConfig")
        if not hasattr(simulation.integrator, "setTemperature"):
            raise ValueError(
                "the simulation's integrator has no setTemperature(); use a thermostatted "
                "integrator such as openmm.LangevinMiddleIntegrator"
            )
        self.simulation = simulation
        self.config = config
        self._rng = np.random.default_rng(config.seed)
        self._py_rng = random.Random(config.seed)
        temps = config.temperatures
        self._kT = BOLTZMANN_KJ_PER_MOL_K * temps  # kJ/mol
        self._g = (
            np.zeros(config.n_levels)
            if config.log_weights is None
            else np.asarray(config.log_weights, dtype=np.float64).copy()
        )
        self._g = self._g - self._g[-1]
        self._online = None
        self._sampler: _Sampler | None = None
        self._iteration = 0  # total iterations over all run() calls (gain schedules)
        self._in_run: tuple[int, float, float] | None = None  # (n_iterations, t0, wall0)
        self._unfinished: tuple[int, float] | None = None  # restored run: (n_iterations, wall)
        self._reset_trace()

    @classmethod
    def from_system(
        cls,
        topology: app.Topology,
        system: openmm.System,
        positions,
        config: OpenMMTemperingConfig,
        *,
        timestep_ps: float = 0.002,
        friction_per_ps: float = 1.0,
        platform: str = "CPU",
        threads: int = 1,
        minimize: bool = True,
    ) -> OpenMMSimulatedTempering:
        """Build a ``LangevinMiddleIntegrator`` simulation at the target temperature.

        Parameters
        ----------
        topology, system
            OpenMM objects (e.g. from :func:`sci_moe.sampling.md.build_system`).
        positions : array-like, shape (N, 3)
            nm.
        timestep_ps, friction_per_ps : float
            Integrator settings (2 fs needs H-bond constraints).
        platform : str
            OpenMM platform name; ``"CPU"`` runs with ``Threads=threads`` and
            ``DeterministicForces=true``.
        minimize : bool
            Minimise the energy before drawing velocities.
        """
        if not (timestep_ps > 0 and friction_per_ps >= 0):
            raise ValueError("timestep_ps must be > 0 and friction_per_ps >= 0")
        t0 = float(config.temperatures[-1])
        integ = openmm.LangevinMiddleIntegrator(
            t0 * u.kelvin, friction_per_ps / u.picosecond, timestep_ps * u.picoseconds
        )
        integ.setRandomNumberSeed(int(config.seed) % (2**31 - 1) + 1)
        try:
            plat = openmm.Platform.getPlatformByName(platform)
        except openmm.OpenMMException as exc:
            raise ValueError(f"OpenMM platform {platform!r} is not available") from exc
        props = {"Threads": str(int(threads)), "DeterministicForces": "true"}
        props = props if platform == "CPU" else {}
        sim = app.Simulation(topology, system, integ, plat, props)
        pos = np.asarray(positions, dtype=np.float64)
        if pos.shape != (system.getNumParticles(), 3):
            raise ValueError(f"positions must have shape ({system.getNumParticles()}, 3) in nm")
        bad = np.flatnonzero(~np.isfinite(pos).all(1))
        if bad.size:
            raise ValueError(
                f"positions have NaN/Inf coordinates at atoms {bad[:10].tolist()}; "
                "pass finite positions in nm"
            )
        sim.context.setPositions(pos * u.nanometer)
        if minimize:
            sim.minimizeEnergy()
        sim.context.setVelocitiesToTemperature(t0 * u.kelvin, int(config.seed) + 1)
        return cls(sim, config)

    # ----------------------------------------------------------------------- internals

    def _reset_trace(self) -> None:
        L = self.config.n_levels
        self._trace = {"level": [], "sampled": [], "energy": [], "g": [], "pos": [], "pos_it": []}
        self._acc = np.zeros(L - 1)
        self._cnt = np.zeros(L - 1)

    def _start(self, pilot: bool = True) -> None:
        """Weights (Park-Pande pilot runs), online estimator and the OpenMM sampler."""
        cfg = self.config
        if pilot and cfg.weights == "park-pande":
            self._g = self._pilot_weights()
        if cfg.weights in ("sams", "wang-landau"):
            self._online = OnlineWeights(
                cfg.weights, cfg.n_levels, cfg.gain0, cfg.gain_exponent, cfg.flatness
            )
        states = [{"temperature": float(T) * u.kelvin} for T in cfg.temperatures]
        self._sampler = _Sampler(self, states, self.simulation, self._g, cfg.weights == "openmm")

    def _fingerprints(self) -> dict:
        """Config, system, integrator and platform this sampler runs with (JSON-ready)."""
        integ = self.simulation.integrator
        xml = openmm.XmlSerializer.serialize(self.simulation.system)
        integrator = {
            "class": type(integ).__name__,
            "step_size_ps": integ.getStepSize().value_in_unit(u.picosecond),
        }
        if hasattr(integ, "getFriction"):
            integrator["friction_per_ps"] = integ.getFriction().value_in_unit(u.picosecond**-1)
        return {
            "config": config_dict(self.config),
            "system_sha256": hashlib.sha256(xml.encode()).hexdigest(),
            "n_particles": int(self.simulation.system.getNumParticles()),
            "integrator": integrator,
            "platform": self.simulation.context.getPlatform().getName(),
        }

    def _potential_energy(self) -> float:
        st = self.simulation.context.getState(energy=True)
        return st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)

    def _pilot_weights(self) -> np.ndarray:
        """Park-Pande weights from ``n_pilot_steps`` of MD at every level."""
        cfg, ctx = self.config, self.simulation.context
        saved = ctx.getState(positions=True, velocities=True)
        integ = self.simulation.integrator
        means = []
        for T in cfg.temperatures:
            ctx.setState(saved)
            integ.setTemperature(T * u.kelvin)
            ctx.setVelocitiesToTemperature(T * u.kelvin, int(self._rng.integers(1, 2**31 - 1)))
            vals = []
            half = cfg.n_pilot_steps // 2
            chunk = max(1, min(50, half))
            done = 0
            while done < cfg.n_pilot_steps:
                n = min(chunk, cfg.n_pilot_steps - done)
                integ.step(n)
                done += n
                if done > half:
                    vals.append(self._potential_energy())
            means.append(np.mean(vals))
        ctx.setState(saved)
        integ.setTemperature(cfg.temperatures[-1] * u.kelvin)
        kT0 = self._kT[-1]
        lp = -torch.tensor(means, dtype=torch.float64) / kT0  # <log p>_l with log p = -E/kT0
        return park_pande_weights(torch.tensor(cfg.betas), lp).numpy()

    def _attempt(self, sampler: _Sampler, state) -> list[float]:
        cfg = self.config
        it = len(self._trace["level"])
        self._iteration += 1
        prev = sampler.currentStateIndex
        energy = self._potential_energy()
        u_red = energy / self._kT
        g_used = self._g
        if cfg.weights == "openmm":
            saved_random = _ees.random
            _ees.random = self._py_rng  # OpenMM's update, our seeded random numbers
            try:
                reduced = _ees.ExpandedEnsembleSampler.attemptStateChange(sampler, state)
            finally:
                _ees.random = saved_random
            w = np.asarray(sampler._weights, dtype=np.float64)
            self._g = w - w[-1]
            new = sampler.currentStateIndex
            self._gibbs_stats(g_used, u_red, prev)
        else:
            logp = g_used - u_red
            if cfg.move == "gibbs":
                new = gibbs_move(logp, self._rng)
                self._gibbs_stats(g_used, u_red, prev)
            else:
                new = neighbour_move(logp, prev, self._rng, self._acc, self._cnt)
            if self._online is not None:
                self._g = self._online.update(self._g, level_probabilities(logp), self._iteration)
            sampler.currentStateIndex = new
            sampler._sampler.applyState(new)
            if new != prev:
                ctx = self.simulation.context
                if cfg.velocities == "resample":
                    seed = int(self._rng.integers(1, 2**31 - 1))
                    ctx.setVelocitiesToTemperature(cfg.temperatures[new] * u.kelvin, seed)
                else:
                    scale = math.sqrt(cfg.temperatures[new] / cfg.temperatures[prev])
                    ctx.setVelocities(scale * state.getVelocities(asNumpy=True))
            reduced = list(u_red)
        tr = self._trace
        tr["sampled"].append(prev)
        tr["level"].append(new)
        tr["energy"].append(energy)
        tr["g"].append(self._g.copy())
        if cfg.record_positions and it % cfg.record_positions == 0:
            pos = self.simulation.context.getState(positions=True).getPositions(asNumpy=True)
            tr["pos"].append(np.asarray(pos.value_in_unit(u.nanometer), dtype=np.float32))
            tr["pos_it"].append(it)
        return reduced

    def _gibbs_stats(self, g: np.ndarray, u_red: np.ndarray, prev: int) -> None:
        rao_blackwell_acceptance(g - u_red, prev, self._acc, self._cnt)

    # -------------------------------------------------------------------------- public

    @property
    def log_weights(self) -> np.ndarray:
        """Current weights ``g`` (level order, ``g[-1] = 0``), shape (L,)."""
        return self._g.copy()

    @property
    def current_level(self) -> int:
        """Current level (``L-1`` is the target temperature)."""
        return (
            self.config.n_levels - 1 if self._sampler is None else self._sampler.currentStateIndex
        )

    def run(
        self,
        n_iterations: int,
        *,
        progress: bool | None = None,
        checkpoint_path: str | os.PathLike | None = None,
        checkpoint_interval: int | None = None,
    ) -> OpenMMTemperingResult:
        """Run ``n_iterations`` x ``steps_per_iteration`` MD steps with level moves.

        Repeated calls continue the same chain (weights, level, RNG); each returns the
        trace of its own iterations. After :meth:`load_checkpoint` of a checkpoint written
        part-way through ``run(n)``, calling ``run(n)`` again runs the remaining iterations
        and returns the trace of all ``n`` (identical to an uninterrupted run).

        Parameters
        ----------
        n_iterations : int
        progress : bool, optional
            tqdm bar; ``None`` shows it only on a terminal.
        checkpoint_path : path, optional
            Where :meth:`save_checkpoint` writes; always written at the end of the run.
        checkpoint_interval : int, optional
            Also write it every this many iterations (needs ``checkpoint_path``), so a
            killed run loses at most this many iterations.
        """
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        if checkpoint_interval is not None:
            if checkpoint_path is None:
                raise ValueError("checkpoint_interval needs a checkpoint_path to write to")
            if checkpoint_interval < 1:
                raise ValueError(f"checkpoint_interval must be >= 1, got {checkpoint_interval}")
        path = None if checkpoint_path is None else Path(checkpoint_path)
        if path is not None and not path.parent.is_dir():
            raise ValueError(f"checkpoint folder {path.parent} does not exist; create it first")
        cfg = self.config
        t0 = time.perf_counter()
        if self._unfinished is not None:
            total, wall0 = self._unfinished
            done = len(self._trace["level"])
            if n_iterations != total:
                raise ValueError(
                    f"the loaded checkpoint was written during run({total}) after {done} "
                    f"iterations; call run({total}) to finish that run first"
                )
            self._unfinished = None
        else:
            wall0, done = 0.0, 0
            if self._sampler is None:
                self._start()
            self._reset_trace()
        self._in_run = (n_iterations, t0, wall0)
        spi = cfg.steps_per_iteration
        # the md run layer's reporters, at the granularity of iterations
        reporters: list[md.Reporter] = [
            md.ProgressReporter(
                n_iterations,
                _CHUNK,
                disable=None if progress is None else not progress,
                unit="iteration",
                desc="openmm tempering",
                leave=False,
            )
        ]
        if checkpoint_interval is not None:
            reporters.append(md.CheckpointReporter(path, checkpoint_interval))
        try:
            self._drive(reporters, done, n_iterations)
        finally:
            self._in_run = None
            for r in reporters:
                r.close()
        if path is not None:
            self.save_checkpoint(path)
        tr = self._trace
        n_atoms = self.simulation.system.getNumParticles()
        pos = np.stack(tr["pos"]) if tr["pos"] else np.zeros((0, n_atoms, 3), np.float32)
        return OpenMMTemperingResult(
            temperatures_k=cfg.temperatures,
            levels=np.asarray(tr["level"], dtype=np.int64),
            sampled_levels=np.asarray(tr["sampled"], dtype=np.int64),
            energies=np.asarray(tr["energy"]),
            log_weights=np.stack(tr["g"]),
            positions=pos,
            position_iterations=np.asarray(tr["pos_it"], dtype=np.int64),
            level_acceptance=self._acc / np.maximum(self._cnt, 1),
            steps_per_iteration=spi,
            wall_time=wall0 + time.perf_counter() - t0,
        )

    def _drive(self, reporters: list, done: int, n_iterations: int) -> None:
        """Iterate from ``done`` to ``n_iterations``, calling reporters when they are due.

        The md run layer's protocol (:mod:`sci_moe.sampling.md.report_protocol`) with
        iterations as steps: each reporter says how many iterations until its next report,
        the simulation runs exactly that far (at most :data:`_CHUNK` iterations per call),
        and the due reporters get one :class:`~sci_moe.sampling.md.Snapshot`, checkpoint
        reporters last. The end-of-run checkpoint is written by :meth:`run` itself.
        """
        spi = self.config.steps_per_iteration
        order = sorted(reporters, key=lambda r: r.is_checkpoint)
        self.current_step = self.run_start_step = done

        def due_at(r):
            return self.current_step + r.describe_next_report(self).steps

        pending = {r: due_at(r) for r in order}
        while self.current_step < n_iterations:
            nxt = min(n_iterations, *pending.values())
            self.simulation.step((nxt - self.current_step) * spi)
            self.current_step = nxt
            due = [r for r in order if pending[r] == nxt or nxt == n_iterations]
            if not due:
                continue
            snap = md.Snapshot(nxt, self.simulation.context.getTime().value_in_unit(u.picosecond))
            for r in due:
                if r.is_checkpoint and nxt == n_iterations:
                    continue  # the final checkpoint is a finished run's, written by run()
                r.report(self, snap)
            for r in due:
                pending[r] = due_at(r)

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Write the chain state to ``path`` atomically (one file, nothing pickled).

        Holds the OpenMM context checkpoint (``Context.createCheckpoint``: positions,
        velocities, box, step count and the integrator's random-number state, for a bitwise
        resume on the same platform) plus positions (nm), velocities (nm/ps) and box (nm)
        as a portable fallback; the current level and weights; the SAMS / Wang-Landau
        estimator or OpenMM's own weight-update state; the numpy and Python generator
        states; the iteration counter; the trace and level-move counters of an unfinished
        :meth:`run`; and fingerprints of the config, system and integrator that
        :meth:`load_checkpoint` checks. Written through the md run layer's checkpoint code
        (:func:`~sci_moe.sampling.tempering.openmm_checkpoint.write_checkpoint`: plain
        tensors and JSON loaded with ``weights_only=True``; temporary file, ``fsync``,
        ``os.replace``), so a crash leaves either the previous checkpoint or the new one.

        Parameters
        ----------
        path : path
            File to write (the folder must exist); any name, e.g. ``"st.ckpt.pt"``.
        """
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(f"checkpoint folder {path.parent} does not exist; create it first")
        write_checkpoint(path, *capture_state(self))

    def load_checkpoint(self, path: str | os.PathLike, *, exact: bool = True) -> None:
        """Restore the chain state written by :meth:`save_checkpoint`.

        Call it on a freshly built sampler (same config, system and integrator settings,
        before :meth:`run`); the next :meth:`run` continues the chain exactly. A checkpoint
        written part-way through ``run(n)`` is finished by calling ``run(n)``.

        Parameters
        ----------
        path : path
        exact : bool
            ``True``: restore the OpenMM context checkpoint (bitwise continuation; needs the
            platform it was written on). ``False``: restore positions, velocities, box, time
            and step count only, e.g. on another platform (a statistically equivalent
            continuation; the integrator's random numbers differ).

        Raises
        ------
        ValueError
            If the file is not such a checkpoint, was written with another config, system,
            integrator (or, with ``exact``, platform), or this sampler has already run.
        FileNotFoundError
            If there is no file at ``path``.
        """
        restore_state(self, path, exact=exact)
