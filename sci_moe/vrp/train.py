"""REINFORCE with the POMO shared baseline, MoSES's three training stages, inference.

Loss (Kwon et al. 2020): for ``P`` rollouts of each instance,


.. math::

    \\nabla J = \\frac{1}{BP}\\sum_{b,p} (c_{bp} - \\bar c_b)\\,
        \\nabla \\log p_\\theta(\\tau_{bp})

with :math:`\\bar c_b` the mean cost of instance ``b``'s rollouts.

Stages (Pan et al. 2025): (1) ``"backbone"``: the whole network on CVRP;
(2) ``"expert"``: only the basis LoRA experts and their gates, each expert on its
single-constraint variant (OVRP, VRPB, VRPL, VRPTW; trained together in one mixed
batch, every instance routed to its own expert); (3) ``"gated"``: only the adaptive
gate and the residual LoRA, on a mixture of variants.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sci_moe._util import progress_bar

from .generator import MTVRPInstance, generate_instances
from .model import MTVRPPolicy
from .variants import SEEN

__all__ = [
    "BASIS_VARIANTS",
    "STAGES",
    "TrainConfig",
    "augment",
    "solve",
    "stage_parameters",
    "train_moses",
    "train_stage",
]

#: The three training stages, in order (also the :attr:`MTVRPPolicy.mode` they set).
STAGES = ("backbone", "expert", "gated")
#: The single-constraint variants that train the basis experts (stage 2), in expert order.
BASIS_VARIANTS = ("OVRP", "VRPB", "VRPL", "VRPTW")


@dataclass
class TrainConfig:
    """One training stage.

    Parameters
    ----------
    steps, batch_size, num_customers : int
    lr : float
        Adam learning rate.
    seed : int
        Seeds the instance generator and the action sampling.
    """

    steps: int = 100
    batch_size: int = 32
    num_customers: int = 20
    lr: float = 1e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.steps, self.batch_size, self.num_customers) < 1:
            raise ValueError("steps, batch_size and num_customers must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def stage_parameters(policy: MTVRPPolicy, stage: str) -> list[torch.nn.Parameter]:
    """Set ``requires_grad`` for ``stage`` and return the trainable parameters."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    moses = {}
    for m in policy.moses_layers():
        for name, mod in (("expert", m.experts), ("expert", m.expert_gate)):
            if mod is not None:
                moses.update({id(p): name for p in mod.parameters() if p is not m.base.weight})
        for mod in (m.router, m.residual):
            if mod is not None:
                moses.update({id(p): "gated" for p in mod.parameters()})
        for p in m.base.parameters():
            moses[id(p)] = "backbone"
    out = []
    for p in policy.parameters():
        owner = moses.get(id(p), "backbone")  # LayerNorms belong to the backbone
        p.requires_grad_(owner == stage)
        if owner == stage:
            out.append(p)
    policy.mode = stage
    return out


def train_stage(
    policy: MTVRPPolicy, stage: str, variants, config: TrainConfig, progress: bool = True
) -> list[float]:
    """Train one stage with REINFORCE and the POMO shared baseline.

    Parameters
    ----------
    policy : MTVRPPolicy
    stage : {"backbone", "expert", "gated"}
    variants : str or list of str
        Training variants (cycled through the batch).
    config : TrainConfig
    progress : bool
        Show a tqdm bar.

    Returns
    -------
    list of float
        Mean rollout cost per step.
    """
    params = stage_parameters(policy, stage)
    if not params:
        raise ValueError(f"stage {stage!r} has nothing to train (a policy without experts?)")
    opt = torch.optim.Adam(params, lr=config.lr)
    g = torch.Generator().manual_seed(config.seed)
    policy.train()
    costs = []
    for _ in progress_bar(range(config.steps), desc=f"stage {stage}", disable=not progress):
        ins = generate_instances(config.batch_size, config.num_customers, variants, generator=g)
        _, logp, cost = policy(ins, generator=g)
        adv = cost - cost.mean(dim=1, keepdim=True)
        loss = (adv.detach() * logp).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        costs.append(float(cost.mean()))
    return costs


def train_moses(
    policy: MTVRPPolicy,
    steps=(100, 50, 50),
    *,
    batch_size: int = 16,
    num_customers: int = 20,
    variants=SEEN,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, list[float]]:
    """MoSES's three stages in turn: CVRP backbone, basis experts, adaptive gate.

    Parameters
    ----------
    policy : MTVRPPolicy
        With experts (``rank > 0``).
    steps : tuple of 3 int
        Updates of stages 1 (CVRP), 2 (:data:`BASIS_VARIANTS`) and 3 (``variants``); a
        stage with 0 updates is skipped.
    batch_size, num_customers : int
    variants : sequence of str
        The stage-3 training mixture (default :data:`~sci_moe.vrp.SEEN`).
    lr : float
    seed : int
        Stage ``k`` uses the generator seed ``seed * 100 + k``.
    progress : bool

    Returns
    -------
    dict
        Mean rollout cost per step of each stage.
    """
    if len(steps) != 3 or min(steps) < 0:
        raise ValueError(f"steps must give the updates (>= 0) of the 3 stages, got {steps!r}")
    if policy.config.rank < 1:
        raise ValueError("train_moses needs a policy with experts (PolicyConfig.rank >= 1)")
    mixes = {"backbone": "CVRP", "expert": list(BASIS_VARIANTS), "gated": list(variants)}
    out = {}
    for k, (stage, n) in enumerate(zip(STAGES, steps, strict=True), 1):
        if n == 0:  # skipped (for example to branch copies before stage 3)
            out[stage] = []
            continue
        cfg = TrainConfig(int(n), batch_size, num_customers, lr, 100 * seed + k)
        out[stage] = train_stage(policy, stage, mixes[stage], cfg, progress=progress)
    return out


def augment(instance: MTVRPInstance, k: int = 8) -> MTVRPInstance:
    """The ``k <= 8`` symmetries of the unit square applied to every instance (``B -> k B``).

    Distances, hence costs and feasibility, are unchanged; instance ``b`` of copy ``a``
    sits at row ``a B + b``.
    """
    if not 1 <= k <= 8:
        raise ValueError(f"k must be in [1, 8], got {k}")
    x, y = instance.locs[..., 0], instance.locs[..., 1]
    maps = [
        (x, y),
        (y, x),
        (1 - x, y),
        (y, 1 - x),
        (x, 1 - y),
        (1 - y, x),
        (1 - x, 1 - y),
        (1 - y, 1 - x),
    ]
    parts = []
    for a, b in maps[:k]:
        cp = instance.index(slice(None))
        cp.locs = torch.stack([a, b], -1)
        parts.append(cp)
    return MTVRPInstance.cat(parts)


@torch.no_grad()
def solve(policy: MTVRPPolicy, instance: MTVRPInstance, augmentations: int = 8):
    """Greedy multi-start decoding with augmentation; the best rollout per instance.

    Returns
    -------
    cost : Tensor, shape (B,)
    actions : Tensor, shape (B, T), int64
    """
    policy.eval()
    B = instance.batch_size
    big = augment(instance, augmentations)
    actions, _, cost = policy(big, greedy=True)
    P, T = actions.shape[1], actions.shape[2]
    cost = cost.view(augmentations, B, P).permute(1, 0, 2).reshape(B, -1)
    actions = actions.view(augmentations, B, P, T).permute(1, 0, 2, 3).reshape(B, -1, T)
    best = cost.argmin(1)
    rows = torch.arange(B)
    return cost[rows, best], actions[rows, best]
