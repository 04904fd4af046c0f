"""The trace of an OpenMM simulated-tempering run and its diagnostics (no OpenMM import)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .diagnostics import level_histogram, masked_mean, round_trips

__all__ = ["OpenMMTemperingResult"]


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
