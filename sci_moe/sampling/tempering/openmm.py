r"""Simulated tempering of an OpenMM system, through OpenMM's ``ExpandedEnsembleSampler``.

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
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import torch
from openmm.app import expandedensemblesampler as _ees
from tqdm.auto import tqdm

from .diagnostics import level_histogram, masked_mean, round_trips
from .tempering import OnlineWeights, park_pande_weights

__all__ = [
    "MOLAR_GAS_CONSTANT",
    "OpenMMSimulatedTempering",
    "OpenMMTemperingConfig",
    "OpenMMTemperingResult",
]

MOLAR_GAS_CONSTANT = 0.00831446261815324  # kJ/mol/K
_MOVES = ("gibbs", "neighbour")
_WEIGHTS = ("given", "park-pande", "sams", "wang-landau", "openmm")
_VELOCITIES = ("rescale", "resample")


@dataclass
class OpenMMTemperingConfig:
    """Settings of :class:`OpenMMSimulatedTempering`.

    Parameters
    ----------
    temperatures_k : sequence of float, optional
        Explicit temperatures in K, **hottest first**, ending at the target temperature
        (level ``L-1``). Default: ``n_temperatures`` geometric between
        ``max_temperature_k`` and ``min_temperature_k``.
    min_temperature_k, max_temperature_k : float
        Target (coldest) and hottest temperature, K.
    n_temperatures : int
        Number of levels ``L`` for the geometric ladder.
    steps_per_iteration : int
        MD steps between level moves.
    move : {"gibbs", "neighbour"}
        Level-move scheme (see module docs).
    weights : {"given", "park-pande", "sams", "wang-landau", "openmm"}, optional
        Default ``"given"`` when ``log_weights`` is passed, else ``"sams"``.
    log_weights : sequence of float, optional
        Level weights :math:`g_l` (dimensionless, level order; ``-log Z_l`` up to a constant
        gives a flat level histogram). Required for ``"given"``; starting point for
        ``"sams"``/``"wang-landau"``.
    velocities : {"rescale", "resample"}
        Velocity update after a temperature change. (With ``weights="openmm"`` and
        ``"resample"``, OpenMM redraws the velocities with its own, unseeded generator.)
    gain0, gain_exponent, flatness : float
        Online adaptation settings, as in :class:`~.tempering.TemperingConfig`.
    n_pilot_steps : int
        MD steps per level for Park-Pande means (the second half is averaged).
    record_positions : int
        Record positions every this many iterations (0: never).
    seed : int
        Seed of the integrator, velocity draws and level moves.
    """

    temperatures_k: Sequence[float] | None = None
    min_temperature_k: float = 300.0
    max_temperature_k: float = 450.0
    n_temperatures: int = 8
    steps_per_iteration: int = 25
    move: str = "gibbs"
    weights: str | None = None
    log_weights: Sequence[float] | None = None
    velocities: str = "rescale"
    gain0: float = 1.0
    gain_exponent: float = 0.8
    flatness: float = 0.2
    n_pilot_steps: int = 2000
    record_positions: int = 1
    seed: int = 0
    _temps: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.temperatures_k is None:
            if not 0 < self.min_temperature_k < self.max_temperature_k:
                raise ValueError(
                    "need 0 < min_temperature_k < max_temperature_k, got "
                    f"{self.min_temperature_k}, {self.max_temperature_k}"
                )
            if self.n_temperatures < 2:
                raise ValueError(f"n_temperatures must be >= 2, got {self.n_temperatures}")
            frac = np.linspace(0.0, 1.0, self.n_temperatures)
            ratio = self.max_temperature_k / self.min_temperature_k
            temps = self.min_temperature_k * ratio ** (1 - frac)
            temps[-1] = self.min_temperature_k
        else:
            temps = np.asarray(
                [t.value_in_unit(u.kelvin) if u.is_quantity(t) else t for t in self.temperatures_k],
                dtype=np.float64,
            )
            if temps.ndim != 1 or temps.size < 2:
                raise ValueError("temperatures_k must list at least 2 temperatures")
            if not (np.all(temps > 0) and np.all(np.diff(temps) < 0)):
                raise ValueError(
                    "temperatures_k must be positive and strictly decreasing: hottest first, "
                    "the target temperature last"
                )
        self._temps = temps
        if self.steps_per_iteration < 1:
            raise ValueError(f"steps_per_iteration must be >= 1, got {self.steps_per_iteration}")
        if self.move not in _MOVES:
            raise ValueError(f"move must be one of {_MOVES}, got {self.move!r}")
        if self.weights is None:
            self.weights = "sams" if self.log_weights is None else "given"
        if self.weights not in _WEIGHTS:
            raise ValueError(f"weights must be one of {_WEIGHTS}, got {self.weights!r}")
        if self.weights == "given" and self.log_weights is None:
            raise ValueError("weights='given' needs log_weights (g_l = -log Z_l), or pick 'sams'")
        if self.weights == "openmm" and self.move != "gibbs":
            raise ValueError("weights='openmm' runs OpenMM's own update, which needs move='gibbs'")
        if self.log_weights is not None:
            g = np.asarray(self.log_weights, dtype=np.float64)
            if g.shape != temps.shape or not np.isfinite(g).all():
                raise ValueError(f"log_weights must be {temps.size} finite numbers (one per level)")
            self.log_weights = g
        if self.velocities not in _VELOCITIES:
            raise ValueError(f"velocities must be one of {_VELOCITIES}, got {self.velocities!r}")
        if not self.gain0 > 0:
            raise ValueError(f"gain0 must be positive, got {self.gain0}")
        if not 0.5 < self.gain_exponent <= 1:
            raise ValueError(f"gain_exponent must lie in (0.5, 1], got {self.gain_exponent}")
        if not 0 < self.flatness < 1:
            raise ValueError(f"flatness must lie in (0, 1), got {self.flatness}")
        if self.n_pilot_steps < 2:
            raise ValueError(f"n_pilot_steps must be >= 2, got {self.n_pilot_steps}")
        if self.record_positions < 0:
            raise ValueError(f"record_positions must be >= 0, got {self.record_positions}")

    @property
    def temperatures(self) -> np.ndarray:
        """Temperatures in K, shape (L,), hottest first."""
        return self._temps.copy()

    @property
    def betas(self) -> np.ndarray:
        """:math:`\\beta_l = T_0/T_l`, shape (L,), increasing to 1."""
        return self._temps[-1] / self._temps

    @property
    def n_levels(self) -> int:
        return int(self._temps.size)


@dataclass
class OpenMMTemperingResult:
    r"""Trace of an OpenMM simulated-tempering run (``T`` iterations, ``L`` levels).

    Attributes
    ----------
    temperatures_k : numpy.ndarray, shape (L,)
        Hottest first; level ``L-1`` is the target.
    levels : numpy.ndarray, shape (T,), int
        Level after each iteration's move (the level the next MD segment runs at).
    sampled_levels : numpy.ndarray, shape (T,), int
        Level during each iteration's MD segment (the level ``positions`` were sampled at).
    energies : numpy.ndarray, shape (T,)
        Potential energy at the end of each MD segment, kJ/mol.
    log_weights : numpy.ndarray, shape (T, L)
        Weights ``g`` after each iteration's move and update (constant unless adapted).
    positions : numpy.ndarray, shape (P, N, 3)
        nm, recorded every ``record_positions`` iterations (at ``position_iterations``).
    position_iterations : numpy.ndarray, shape (P,), int
        Iteration index (0-based) of each recorded frame.
    level_acceptance : numpy.ndarray, shape (L-1,)
        Neighbour moves: accepted / proposed between ``l`` and ``l+1``. Gibbs moves: the
        Rao-Blackwellised acceptance :math:`\min\{1, \pi(l' \mid x)/\pi(l \mid x)\}`
        a neighbour move would have had, averaged over visits (a ladder-spacing check).
    steps_per_iteration : int
    wall_time : float
        Seconds of MD and level moves (pilot runs included).
    """

    temperatures_k: np.ndarray
    levels: np.ndarray
    sampled_levels: np.ndarray
    energies: np.ndarray
    log_weights: np.ndarray
    positions: np.ndarray
    position_iterations: np.ndarray
    level_acceptance: np.ndarray
    steps_per_iteration: int
    wall_time: float

    @property
    def n_levels(self) -> int:
        return int(self.temperatures_k.size)

    def log_z_estimate(self) -> np.ndarray:
        """Final :math:`\\log Z_l - \\log Z_{L-1}` implied by the weights, shape (L,)."""
        g = self.log_weights[-1]
        return -(g - g[-1])

    def target_frames(self) -> np.ndarray:
        """Boolean mask over recorded frames sampled at the target level, shape (P,)."""
        return self.sampled_levels[self.position_iterations] == self.n_levels - 1

    def summary(self, burn_in: int = 0) -> dict:
        """Level histogram, round trips, level-move acceptance and target-level fraction.

        Parameters
        ----------
        burn_in : int
            Iterations to drop from the start (weights still adapting).
        """
        if not 0 <= burn_in < self.levels.size:
            raise ValueError(f"burn_in must lie in [0, {self.levels.size - 1}]")
        lv = self.sampled_levels[burn_in:]
        L = self.n_levels
        return {
            "level_histogram": level_histogram(lv, L),
            "round_trips": int(round_trips(lv[:, None], L).sum()),
            "level_acceptance": self.level_acceptance.copy(),
            "target_fraction": float(np.mean(lv == L - 1)),
            "log_z_estimate": self.log_z_estimate(),
        }

    def target_mean(self, values: np.ndarray, burn_in_frames: int = 0) -> tuple[float, float]:
        """Mean of a per-frame observable over target-level frames, with a standard error.

        Parameters
        ----------
        values : numpy.ndarray, shape (P,)
            Observable of each recorded frame (e.g. an indicator of a phi/psi basin).
        burn_in_frames : int
            Frames to drop from the start.

        Returns
        -------
        (mean, stderr) : tuple of float
            From :func:`~.diagnostics.masked_mean` (Sokal IAT of the masked series).
        """
        v = np.asarray(values, dtype=float)
        if v.shape != self.position_iterations.shape:
            raise ValueError(f"values must have shape {self.position_iterations.shape}")
        m = self.target_frames()
        return masked_mean(v[burn_in_frames:], m[burn_in_frames:])


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
        self._kT = MOLAR_GAS_CONSTANT * temps  # kJ/mol
        self._g = (
            np.zeros(config.n_levels)
            if config.log_weights is None
            else np.asarray(config.log_weights, dtype=np.float64).copy()
        )
        self._g = self._g - self._g[-1]
        self._online = None
        self._sampler: _Sampler | None = None
        self._iteration = 0  # total iterations over all run() calls (gain schedules)
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
            OpenMM objects (e.g. from :func:`sci_moe.data.alanine_dipeptide.build_system`).
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
        L = cfg.n_levels
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
                p = np.exp(logp - logp.max())
                p /= p.sum()
                new = int(self._rng.choice(L, p=p))
                self._gibbs_stats(g_used, u_red, prev)
            else:
                prop = prev + (1 if self._rng.random() < 0.5 else -1)
                new = prev
                r = self._rng.random()  # drawn always: fixed random-number consumption
                if 0 <= prop < L:
                    lo = min(prev, prop)
                    self._cnt[lo] += 1
                    if math.log(max(r, 1e-300)) < logp[prop] - logp[prev]:
                        new = prop
                        self._acc[lo] += 1
            if self._online is not None:
                p_rb = np.exp(logp - logp.max())
                self._g = self._online.update(self._g, p_rb / p_rb.sum(), self._iteration)
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
        # Rao-Blackwellised acceptance min(1, pi(l'|x)/pi(l|x)) that a neighbour move from
        # the current level would have had (comparable across move schemes)
        logp = g - u_red
        for nb, lo in ((prev - 1, prev - 1), (prev + 1, prev)):
            if 0 <= nb < logp.size:
                self._acc[lo] += math.exp(min(0.0, logp[nb] - logp[prev]))
                self._cnt[lo] += 1

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

    def run(self, n_iterations: int, *, progress: bool | None = None) -> OpenMMTemperingResult:
        """Run ``n_iterations`` x ``steps_per_iteration`` MD steps with level moves.

        Repeated calls continue the same chain (weights, level, RNG); each returns the
        trace of its own iterations.

        Parameters
        ----------
        n_iterations : int
        progress : bool, optional
            tqdm bar; ``None`` shows it only on a terminal.
        """
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        cfg = self.config
        t0 = time.perf_counter()
        if self._sampler is None:
            if cfg.weights == "park-pande":
                self._g = self._pilot_weights()
            if cfg.weights in ("sams", "wang-landau"):
                self._online = OnlineWeights(
                    cfg.weights, cfg.n_levels, cfg.gain0, cfg.gain_exponent, cfg.flatness
                )
            states = [{"temperature": float(T) * u.kelvin} for T in cfg.temperatures]
            self._sampler = _Sampler(
                self, states, self.simulation, self._g, cfg.weights == "openmm"
            )
        self._reset_trace()
        spi = cfg.steps_per_iteration
        chunk = max(1, min(n_iterations, 200))
        done = 0
        with tqdm(
            total=n_iterations,
            disable=None if progress is None else not progress,
            desc="openmm tempering",
            leave=False,
        ) as bar:
            while done < n_iterations:
                n = min(chunk, n_iterations - done)
                self.simulation.step(n * spi)
                done += n
                bar.update(n)
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
            wall_time=time.perf_counter() - t0,
        )
