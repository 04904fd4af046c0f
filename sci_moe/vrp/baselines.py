"""Constructive baselines on :class:`~sci_moe.vrp.MTVRPEnv`: nearest neighbour."""

from __future__ import annotations

import torch

from .env import MTVRPEnv
from .generator import MTVRPInstance

__all__ = ["nearest_neighbour"]


@torch.no_grad()
def nearest_neighbour(instance: MTVRPInstance) -> tuple[torch.Tensor, torch.Tensor]:
    """Go to the nearest feasible customer; return to the depot when none is feasible.

    Returns
    -------
    cost : Tensor, shape (B,)
    actions : Tensor, shape (B, T), int64
    """
    env = MTVRPEnv(instance)
    N = instance.num_customers
    acts = []
    while not bool(env.done.all()):
        mask = env.action_mask()
        d = env.dist[env.rows, env.current].clone()
        cust = mask.clone()
        cust[:, 0] = False
        d = d.masked_fill(~cust, float("inf"))
        a = d.argmin(1)
        a = torch.where(cust.any(1), a, torch.zeros_like(a))
        acts.append(a)
        env.step(a)
        if env.steps > 2 * N + 2:
            raise RuntimeError("nearest neighbour did not finish; the instance is infeasible")
    return env.cost, torch.stack(acts, 1)
