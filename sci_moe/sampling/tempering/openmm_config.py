"""Settings of OpenMM simulated tempering (:class:`OpenMMTemperingConfig`); no OpenMM import.

The ladder (hottest first, the target temperature last), the level-move scheme, the
weight scheme and its adaptation settings, the velocity rule and the recording interval,
validated in ``__post_init__``. :func:`config_dict` gives the effective settings as
JSON-ready data (the fingerprint that checkpoints compare).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from .weights import check_weight_adaptation, resolve_weight_mode

__all__ = ["OpenMMTemperingConfig", "config_dict"]

MOVES = ("gibbs", "neighbour")
WEIGHTS = ("given", "park-pande", "sams", "wang-landau", "openmm")
VELOCITIES = ("rescale", "resample")


def _kelvin(t) -> float:
    """A temperature in K from a float or an ``openmm.unit`` quantity (duck-typed)."""
    if hasattr(t, "value_in_unit"):
        from openmm import unit

        return t.value_in_unit(unit.kelvin)
    return t


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
                [_kelvin(t) for t in self.temperatures_k],
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
        if self.move not in MOVES:
            raise ValueError(f"move must be one of {MOVES}, got {self.move!r}")
        self.weights = resolve_weight_mode(self.weights, self.log_weights, WEIGHTS)
        if self.weights == "openmm" and self.move != "gibbs":
            raise ValueError("weights='openmm' runs OpenMM's own update, which needs move='gibbs'")
        if self.log_weights is not None:
            g = np.asarray(self.log_weights, dtype=np.float64)
            if g.shape != temps.shape or not np.isfinite(g).all():
                raise ValueError(f"log_weights must be {temps.size} finite numbers (one per level)")
            self.log_weights = g
        if self.velocities not in VELOCITIES:
            raise ValueError(f"velocities must be one of {VELOCITIES}, got {self.velocities!r}")
        check_weight_adaptation(self.gain0, self.gain_exponent, self.flatness, self.n_pilot_steps)
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


def json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot write {type(obj).__name__} to a checkpoint")


def config_dict(cfg: OpenMMTemperingConfig) -> dict:
    """Effective settings of a config, JSON-ready (the ladder as resolved temperatures)."""
    out = {}
    for f in fields(cfg):
        if f.init and f.name not in ("min_temperature_k", "max_temperature_k", "n_temperatures"):
            v = getattr(cfg, f.name)
            out[f.name] = v.item() if isinstance(v, np.generic) else v
    out["temperatures_k"] = cfg.temperatures.tolist()
    if cfg.log_weights is not None:
        out["log_weights"] = np.asarray(cfg.log_weights, dtype=np.float64).tolist()
    return json.loads(json.dumps(out, default=json_default))  # as read back from a file
