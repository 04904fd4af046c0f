"""Part (c) of ``--theory``: simulated tempering (ST-MH) vs RWMH (MH), the paper's simulation.

:func:`sim_run` runs :data:`SIM_CHAINS` chains of RWMH alone and inside ST with SAMS
weights on ``0.3 N(-D/2 e_1, I) + 0.7 N(D/2 e_1, I)`` (``D =`` :data:`SIM_D`) and returns
the absolute errors of the mode weight. A helper module: ``_tempering_theory.py`` imports
it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = [
    "SIM_CHAINS",
    "SIM_D",
    "SIM_W",
    "sim_run",
]


SIM_D, SIM_W, SIM_CHAINS = 8.0, (0.3, 0.7), 32


# ------------------------------------------------------------------- (c) simulation


def sim_run(d: int, n_iter: int, seed: int) -> dict:
    from sci_moe.sampling.tempering import (
        RWMH,
        SimulatedTempering,
        TemperingConfig,
        masked_mean,
        sample,
    )
    from sci_moe.sampling.tempering import geometric_ladder as torch_ladder

    mu = torch.zeros(2, d, dtype=torch.float64)
    mu[0, 0], mu[1, 0] = -SIM_D / 2, SIM_D / 2
    logw = torch.log(torch.tensor(SIM_W, dtype=torch.float64))

    def log_prob(x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(logw - 0.5 * ((x[:, None, :] - mu[None]) ** 2).sum(-1), dim=1)

    gen = torch.Generator().manual_seed(seed)
    x0 = mu[torch.arange(SIM_CHAINS) % 2] + 0.1 * torch.randn(SIM_CHAINS, d, generator=gen)
    kernel = RWMH(step_size=2.38 / math.sqrt(d))
    burn = n_iter // 5
    xs, _ = sample(kernel, log_prob, x0, n_iter, seed=seed, progress=False)
    ind = (xs[burn:, :, 0] > 0).double().numpy()
    m_mh, se_mh = masked_mean(ind, np.ones(ind.shape, bool))
    L = 7 if d <= 2 else 10
    cfg = TemperingConfig(
        torch_ladder(1.0 / SIM_D**2, L, dtype=torch.float64), kernel=kernel, weights="sams"
    )
    res = SimulatedTempering(log_prob, cfg).run(x0, n_iter, seed=seed + 1000, progress=False)
    ind = (res.x[burn:, :, 0] > 0).double().numpy()
    m_st, se_st = masked_mean(ind, (res.levels[burn:] == L - 1).numpy())
    return {
        "d": d,
        "seed": seed,
        "err_mh": abs(m_mh - SIM_W[1]),
        "se_mh": se_mh,
        "err_st": abs(m_st - SIM_W[1]),
        "se_st": se_st,
    }
