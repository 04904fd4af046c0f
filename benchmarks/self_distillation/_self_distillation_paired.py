"""Per-seed simulation errors of the main sweep: what pairs the variants over seeds.

The replica theory of ``run.py`` is exact as N grows and has no seeds; its finite-N
simulation has: seed ``s`` draws one data set, and every variant (0-SD, 1-SD and 2-SD,
hard and soft labels) at every alpha trains on the set its seed draws, so the variants'
errors pair by seed. :func:`seed_rows` writes a case's per-seed errors
(``sim_error_seed<s>``, one row per seed); :func:`paired_rows` adds them to a stored run
by simulating its stored optimal hyper-parameters again (no solving), and checks that
their mean is the stored ``sim_error``; :func:`seed_errors` reads them back for the
verdicts. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import math

import numpy as np
from _common import Row, cpu_model, git_revision, row_from_dict
from tqdm.auto import tqdm

from sci_moe.theory.self_distillation import SelfDistillationModel, simulate

__all__ = [
    "SEED_METRIC",
    "main_sweep_cases",
    "paired_rows",
    "run_seeds",
    "seed_errors",
    "seed_rows",
]

#: The metric prefix of a per-seed simulation error (``sim_error_seed3``).
SEED_METRIC = "sim_error_seed"
#: Largest relative difference between a re-simulated mean and the stored ``sim_error``
#: (the same seeds give the same draws; BLAS on another CPU moves the last digits only).
_RTOL = 1e-6


def seed_rows(case: str, seeds: list[int], errors: np.ndarray) -> list[Row]:
    """Rows ``case | sim_error_seed<s>``, one per seed, for errors of shape (n_seeds,)."""
    if len(seeds) != len(errors):
        raise ValueError(f"{len(seeds)} seeds but {len(errors)} errors for {case!r}")
    return [
        Row(case, f"{SEED_METRIC}{s}", float(e), "1") for s, e in zip(seeds, errors, strict=True)
    ]


def seed_errors(val: dict, case: str, seeds: list[int]) -> list[float] | None:
    """The per-seed errors of ``case`` in the order of ``seeds``, from ``val`` ((case,
    metric) -> value); ``None`` when the run stored none (run ``--paired-only``)."""
    got = [val.get((case, f"{SEED_METRIC}{s}")) for s in seeds]
    if all(v is None for v in got):
        return None
    if any(v is None for v in got):
        raise ValueError(f"{case!r} has per-seed errors for some seeds of {seeds} only")
    return [float(v) for v in got]


def run_seeds(machine: dict) -> list[int]:
    """The simulation seeds of a stored run (``seed``, ``seed + 1``, ...; ``seed`` 0 when
    the record has none)."""
    return [int(machine.get("seed", 0)) + s for s in range(int(machine["seeds"]))]


def main_sweep_cases(doc: dict) -> list[str]:
    """The main sweep's cases (``"<loss> <variant> alpha=<a>"``, no ``rho=``), in order."""
    seen = []
    for r in doc["rows"]:
        c = r["case"]
        if r["metric"] == "lambda_0" and " alpha=" in c and "rho=" not in c and c not in seen:
            seen.append(c)
    return seen


def _hyper(val: dict, case: str) -> tuple[list[float], list[float]]:
    """The stored optimal lambdas and betas of ``case`` (a hard label's beta is inf)."""
    lambdas, t = [], 0
    while (case, f"lambda_{t}") in val:
        lambdas.append(float(val[(case, f"lambda_{t}")]))
        t += 1
    soft = " soft " in f" {case} "
    betas = []
    for i in range(len(lambdas) - 1):
        b = val.get((case, f"beta_{i}"))
        if b is None and soft:
            raise ValueError(f"{case!r}: a soft-label case without its beta_{i} row")
        betas.append(math.inf if b is None else float(b))
    return lambdas, betas


def paired_rows(doc: dict) -> list[Row]:
    """The rows of results JSON ``doc`` with every main-sweep case's per-seed errors.

    Re-simulates each case at its stored ``lambda_t`` / ``beta_t`` with the run's seeds
    and ``n_features`` (``machine``); earlier per-seed rows are replaced, so the rule can be
    applied again. For ``run.py --paired-only JSON``.

    Raises
    ------
    ValueError
        When a re-simulated mean differs from the stored ``sim_error`` (the stored run is
        not the one these hyper-parameters and seeds give).
    """
    m = doc["machine"]
    seeds = run_seeds(m)
    m["paired_rows"] = {
        "command": "run.py --paired-only JSON (re-simulated from the stored hyper-parameters)",
        "cpu": cpu_model(),
        "git": git_revision(),
    }
    keep = [r for r in doc["rows"] if not r["metric"].startswith(SEED_METRIC)]
    val = {(r["case"], r["metric"]): r["value"] for r in keep}
    rows = [row_from_dict(r) for r in keep]
    for case in tqdm(main_sweep_cases(doc), desc="re-simulating", unit="case"):
        loss = case.split(" ", 1)[0]
        alpha = float(case.rsplit("alpha=", 1)[1])
        lambdas, betas = _hyper(val, case)
        model = SelfDistillationModel(
            alpha=alpha, theta=m["theta"], delta=m["delta"], loss=loss, learn_bias=False
        )
        sim = simulate(model, lambdas, betas, n_features=int(m["n_features"]), seeds=seeds)
        errors = sim.errors[:, -1]
        stored = float(val[(case, "sim_error")])
        if abs(errors.mean() - stored) > _RTOL * max(abs(stored), 1e-12):
            raise ValueError(
                f"{case!r}: the re-simulated mean {errors.mean():.10g} is not the stored "
                f"sim_error {stored:.10g}; the JSON's seeds, n_features or hyper-parameters "
                "do not describe its simulation (rerun run.py instead)"
            )
        rows += seed_rows(case, seeds, errors)
    return rows
