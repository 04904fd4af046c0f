"""El Nino sea-surface temperatures as a function-on-function regression task.

statsmodels ships ``datasets/elnino/elnino.csv`` in its wheel (no download): the monthly
Nino 1+2 sea-surface temperature (deg C) for 1950-2010, one curve of 12 values per year.
The task: predict next year's curve from this year's (60 input/output pairs). Times are
month mid-points ``0.5, ..., 11.5`` on the domain ``[0, 12]`` (months).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ELNINO_DOMAIN", "ELNINO_MONTHS", "elnino_next_year", "load_elnino"]

#: Observation times of the 12 monthly values (months from 1 January).
ELNINO_MONTHS = np.arange(12) + 0.5
#: Time domain of every curve (months).
ELNINO_DOMAIN = (0.0, 12.0)


def load_elnino() -> tuple[np.ndarray, np.ndarray]:
    """Years and monthly SST curves.

    Returns
    -------
    years : ndarray, shape (61,), int
    sst : ndarray, shape (61, 12), float64
        Degrees Celsius, January to December.

    Raises
    ------
    ImportError
        statsmodels is missing (install ``sci-moe[functional]``).
    """
    try:
        from statsmodels.datasets import elnino
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the El Nino data ship with statsmodels; install the extra: "
            "pip install 'sci-moe[functional]'"
        ) from err
    frame = elnino.load_pandas().data
    return frame["YEAR"].to_numpy().astype(int), frame.iloc[:, 1:].to_numpy(dtype=np.float64)


def elnino_next_year(
    observed: float = 1.0, seed: int = 0
) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Pairs (year ``y`` curve -> year ``y + 1`` curve) in the regressors' format.

    Parameters
    ----------
    observed : float
        Fraction of the 12 months observed per input curve (``1.0``: all; less: a random
        subset per year, at least 3 months), to test irregular sampling.
    seed : int
        Seeds the subsets.

    Returns
    -------
    inputs : list (60) of list (1) of (times, values)
    outputs : list (60) of (times, values)
        The full next-year curves.
    years : ndarray, shape (60,)
        The input year of each pair.
    targets : ndarray, shape (60, 12)
    """
    if not 0 < observed <= 1:
        raise ValueError(f"observed must be in (0, 1], got {observed}")
    years, sst = load_elnino()
    rng = np.random.default_rng(seed)
    n = max(3, round(observed * 12))
    inputs = []
    for row in sst[:-1]:
        keep = np.sort(rng.choice(12, n, replace=False)) if n < 12 else np.arange(12)
        inputs.append([(ELNINO_MONTHS[keep], row[keep])])
    outputs = [(ELNINO_MONTHS, row) for row in sst[1:]]
    return inputs, outputs, years[:-1], sst[1:]
