r""" "Optimal SD": tune :math:`\{\lambda_t, \beta_t\}` to minimise the final stage's test error.

Minimises :math:`\varepsilon_T(\lambda_1..\lambda_T, \beta_1..\beta_{T-1})` from
:func:`.solve_multistage` over :math:`\log_{10}\lambda_t` and :math:`\log_{10}\beta_t` in boxes
(a coarse scan, then bounded Brent for one parameter or bounded Nelder-Mead; hard labels fix
:math:`\beta = \infty`). Points where the saddle-point iteration does not converge are scored
``1.0`` (worse than chance) and counted in ``n_failed``; the Monte Carlo seed is fixed by the
:class:`.SolverConfig` (common random numbers), so the objective is deterministic.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from .model import SelfDistillationModel
from .multistage import MultiStageResult, solve_multistage
from .solver import ConvergenceError, SolverConfig

__all__ = ["OptimalSD", "optimize_sd", "sweep_alpha"]


@dataclass(frozen=True)
class OptimalSD:
    """Result of :func:`optimize_sd`.

    Attributes
    ----------
    lambdas, betas : tuple of float
        Optimal hyper-parameters (``betas`` are ``inf`` for hard labels).
    error : float
        Final-stage test error at the optimum.
    result : MultiStageResult
        Saddle point at the optimum (errors of every stage in ``result.errors``).
    n_evaluations, n_failed : int
        Objective evaluations, and how many of them did not converge.
    """

    lambdas: tuple[float, ...]
    betas: tuple[float, ...]
    error: float
    result: MultiStageResult
    n_evaluations: int
    n_failed: int


def optimize_sd(
    model: SelfDistillationModel,
    n_stages: int,
    hard_labels: bool = False,
    log10_lambda_bounds: tuple[float, float] = (-3.0, 4.0),
    log10_beta_bounds: tuple[float, float] = (-1.0, 2.0),
    x0: Sequence[float] | None = None,
    config: SolverConfig | None = None,
    maxiter: int = 200,
    n_scan: int = 8,
    max_full_scan: int = 64,
) -> OptimalSD:
    r"""Minimise the final-stage error over the stages' ridge strengths and temperatures.

    Parameters
    ----------
    model : SelfDistillationModel
    n_stages : int
        ``T >= 1``; ``T = 1`` is optimal 0-SD (ridge only).
    hard_labels : bool
        Use :math:`\beta_t = \infty`; only the :math:`\lambda_t` are tuned.
    log10_lambda_bounds, log10_beta_bounds : (float, float)
        Search boxes for :math:`\log_{10}\lambda_t` and :math:`\log_{10}\beta_t`.
    x0 : sequence of float, optional
        Starting point ``[log10 lambda_1..T, log10 beta_1..T-1]``; by default the best point
        of a coarse scan: the full grid with :math:`\lfloor`
        ``max_full_scan`` :math:`^{1/d}\rfloor` points per axis (``d`` tuned parameters)
        when that is at least ``max(n_scan, 6)`` (by default: two parameters, as in
        hard-label 1-SD, on an 8 x 8 grid), else ``n_scan`` values of a common
        :math:`\log_{10}\lambda` times ``n_scan`` values of a common
        :math:`\log_{10}\beta`. Ignored when only one parameter is tuned.
    config : SolverConfig, optional
    maxiter : int
        Optimiser iterations.
    n_scan : int
        Points per axis of the coarse scan (at least 15 for one parameter, where Brent then
        refines around the best scan point).
    max_full_scan : int
        Largest full scan grid; a diagonal scan only can miss a narrow basin (with a learned
        bias under imbalance, 1-SD collapses to the majority class, ``eps = rho``, over most
        of the ``(lambda_1, lambda_2)`` box).
    """
    if int(n_stages) != n_stages or n_stages < 1:
        raise ValueError(f"n_stages must be a positive integer, got {n_stages!r}")
    if int(max_full_scan) != max_full_scan or max_full_scan < 0:
        raise ValueError(f"max_full_scan must be an integer >= 0, got {max_full_scan!r}")
    if int(n_scan) != n_scan or n_scan < 2:
        raise ValueError(f"n_scan must be an integer >= 2, got {n_scan!r}")
    for name, (lo, hi) in (
        ("log10_lambda_bounds", log10_lambda_bounds),
        ("log10_beta_bounds", log10_beta_bounds),
    ):
        if not lo < hi:
            raise ValueError(f"{name} must be (low, high) with low < high, got {(lo, hi)!r}")
    config = config or SolverConfig()
    T = int(n_stages)
    n_beta = 0 if hard_labels else T - 1
    bounds = [log10_lambda_bounds] * T + [log10_beta_bounds] * n_beta
    counts = {"n": 0, "failed": 0}

    def unpack(p):
        lambdas = tuple(float(v) for v in 10.0 ** np.asarray(p[:T], dtype=float))
        if hard_labels:
            return lambdas, (math.inf,) * (T - 1)
        betas = tuple(float(v) for v in 10.0 ** np.asarray(p[T:], dtype=float))
        return lambdas, betas

    def objective(p):
        counts["n"] += 1
        try:
            return solve_multistage(model, *unpack(p), config=config).error
        except ConvergenceError:
            counts["failed"] += 1
            return 1.0

    # coarse scan first: the error can be flat (majority-class collapse, eps = rho) over part
    # of the box, which traps a purely local search
    axes = [np.linspace(lo, hi, n_scan) for lo, hi in bounds]
    n_full = int(max_full_scan ** (1 / len(bounds)) + 1e-9)
    if len(bounds) == 1:
        axes = [np.linspace(*bounds[0], max(n_scan, 15))]  # one parameter: scans are cheap
        values = [objective([v]) for v in axes[0]]
        i = int(np.argmin(values))
        step = axes[0][1] - axes[0][0]
        lo, hi = max(bounds[0][0], axes[0][i] - step), min(bounds[0][1], axes[0][i] + step)
        res = minimize_scalar(
            lambda v: objective([v]),
            bounds=(lo, hi),
            method="bounded",
            options={"maxiter": maxiter},
        )
        best = [res.x] if res.fun <= values[i] else [axes[0][i]]
    else:
        if x0 is not None:
            start = np.asarray(x0, dtype=float)
            if start.shape != (len(bounds),):
                raise ValueError(
                    f"x0 must have {len(bounds)} entries (log10 lambdas, then log10 betas)"
                )
        elif n_full >= max(n_scan, 6):
            grid = [np.linspace(lo, hi, n_full) for lo, hi in bounds]
            cands = [np.array(p, dtype=float) for p in itertools.product(*grid)]
            start = min(cands, key=objective)
        else:
            # scan the diagonal-in-lambda / each-beta grid: lambda_t equal, beta_t equal
            cands = [
                np.array([la] * T + [be] * n_beta)
                for la in axes[0]
                for be in (axes[-1] if n_beta else [None])
            ]
            cands = [c.astype(float) for c in cands]
            start = min(cands, key=objective)
        res = minimize(
            objective,
            start,
            method="Nelder-Mead",
            bounds=bounds,
            options={"maxiter": maxiter, "xatol": 1e-3, "fatol": 1e-7},
        )
        best = res.x if res.fun <= objective(start) else start
    lambdas, betas = unpack(best)
    result = solve_multistage(model, lambdas, betas, config=config)
    return OptimalSD(
        lambdas=lambdas,
        betas=betas,
        error=result.error,
        result=result,
        n_evaluations=counts["n"],
        n_failed=counts["failed"],
    )


def sweep_alpha(
    alphas: Sequence[float],
    model: SelfDistillationModel,
    n_stages: int,
    progress: bool = True,
    **kwargs,
) -> list[OptimalSD]:
    """Run :func:`optimize_sd` for every ``alpha`` (other model fields from ``model``).

    ``progress`` shows a ``tqdm`` bar; ``kwargs`` go to :func:`optimize_sd`.

    Returns
    -------
    list of OptimalSD, one per ``alpha``
    """
    from ..._util import progress_bar

    return [
        optimize_sd(dataclasses.replace(model, alpha=float(alpha)), n_stages, **kwargs)
        for alpha in progress_bar(
            list(alphas), disable=not progress, desc=f"optimal {n_stages - 1}-SD"
        )
    ]
