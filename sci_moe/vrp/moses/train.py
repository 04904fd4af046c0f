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

Every stage is one run of the training engine (:class:`sci_moe.train.Trainer`: instances
drawn fresh every update from ``(seed, step)``, Adam, schedule, clipping, validation on
fixed instances, verified checkpoints with exact resume); the three stages of a run live
in subfolders of its folder (:class:`sci_moe.train.Phases`).

Device (``TrainConfig.device``): instances are drawn with the CPU generators as on the
CPU, and the engine moves each batch to the policy's device; the rollouts' actions are
sampled from the same CPU generator (the uniform numbers drawn on it, then moved), the
validation instances and :func:`solve`'s instances are moved to the
policy's device, so a GPU run sees the same instances and random numbers as a CPU run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from sci_moe._util import check_int_attr, module_device
from sci_moe.moe import GATE_SCORES
from sci_moe.train import Phases, StreamBatches, Trainer, TrainResult, derive_seed, seed_everything
from sci_moe.train import TrainConfig as _BaseConfig

from ..generator import MTVRPInstance, generate_instances
from ..variants import SEEN, VARIANTS
from .layers import ROUTINGS
from .model import MTVRPPolicy, PolicyConfig

__all__ = [
    "BASIS_VARIANTS",
    "STAGES",
    "MoSESConfig",
    "TrainConfig",
    "augment",
    "build_policy",
    "fit_moses",
    "reinforce_loss",
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
class TrainConfig(_BaseConfig):
    """One training stage on the engine (:class:`sci_moe.train.TrainConfig` plus the below).

    Parameters
    ----------
    steps : int
        Updates of the stage, >= 1.
    batch_size : int
        Instances per update (each rolled out from every customer, POMO).
    num_customers : int
        Customers per training (and validation) instance.
    min_customers : int
        0: every batch has ``num_customers``; else each batch draws its size uniformly
        from ``min_customers..num_customers`` (a size curriculum: smaller instances are
        cheaper updates; the policy is size-agnostic). Validation stays at
        ``num_customers``.
    val_instances : int
        Fixed validation instances of the stage's variants (drawn from ``seed``); the
        evaluation's ``val_cost`` is their mean best greedy multi-start cost. 0: no
        evaluation.
    """

    steps: int = 100
    batch_size: int = 32
    optimizer: str = "adam"
    eval_every: int = 50
    monitor: str = "val_cost"
    num_customers: int = 20
    min_customers: int = 0
    val_instances: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int_attr(self, "num_customers", 1)
        check_int_attr(self, "min_customers", 0)
        check_int_attr(self, "val_instances", 0)
        if self.min_customers > self.num_customers:
            raise ValueError(
                f"min_customers must be at most num_customers={self.num_customers}, "
                f"got {self.min_customers}"
            )


@dataclass
class MoSESConfig(TrainConfig):
    """A MoSES solver and its three training stages (``sci-moe train vrp``).

    Parameters
    ----------
    steps : int
        Updates of stage 1 (the whole network on CVRP), >= 1.
    expert_steps : int
        Updates of stage 2 (the basis LoRA experts on OVRP, VRPB, VRPL, VRPTW; 0 skips it).
    gate_steps : int
        Updates of stage 3 (the adaptive gate and residual LoRA on ``variants``; 0 skips
        it).
    variants : tuple of str
        The stage-3 training mixture (default: the variants with at most two constraints).
    d_model : int
        Embedding size.
    num_heads : int
        Attention heads (divides ``d_model``).
    num_layers : int
        Encoder layers.
    rank : int
        LoRA rank of the experts, >= 1.
    gate_score : str
        Gate activation: sigmoid, softmax or norm_softplus.
    routing : str
        exact (variant-aware) or dense.
    test_instances : int
        Fresh test instances per variant scored after training by ``sci-moe train vrp``
        (0: none).
    """

    steps: int = 200
    batch_size: int = 16
    expert_steps: int = 100
    gate_steps: int = 100
    variants: tuple[str, ...] = SEEN
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    rank: int = 8
    gate_score: str = "sigmoid"
    routing: str = "exact"
    test_instances: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        self.variants = tuple(self.variants)
        for name in ("expert_steps", "gate_steps", "test_instances"):
            check_int_attr(self, name, 0)
        if not self.variants:
            raise ValueError("variants must name at least one VRP variant")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(
                f"variants: unknown VRP variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}"
            )
        for name in ("d_model", "num_heads", "num_layers", "rank"):
            check_int_attr(self, name, 1)
        if self.d_model % self.num_heads:
            raise ValueError(f"num_heads must divide d_model={self.d_model}, got {self.num_heads}")
        if self.gate_score not in GATE_SCORES:
            raise ValueError(f"gate_score must be one of {GATE_SCORES}, got {self.gate_score!r}")
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {self.routing!r}")

    def policy_config(self) -> PolicyConfig:
        """The :class:`PolicyConfig` of the solver (``d_ff = 2 d_model``)."""
        return PolicyConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            d_ff=2 * self.d_model,
            rank=self.rank,
            gate_score=self.gate_score,
            routing=self.routing,
        )

    def stage_steps(self) -> tuple[int, int, int]:
        """Updates of the three stages."""
        return (self.steps, self.expert_steps, self.gate_steps)


def build_policy(config: MoSESConfig) -> MTVRPPolicy:
    """The initial solver of ``config`` (weights from ``config.seed``)."""
    seed_everything(config.seed)
    return MTVRPPolicy(config.policy_config())


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


def reinforce_loss(policy: MTVRPPolicy, batch) -> tuple[torch.Tensor, dict]:
    """REINFORCE with the POMO shared baseline on one batch.

    Parameters
    ----------
    policy : MTVRPPolicy
    batch : (MTVRPInstance, torch.Generator)
        The instances and the generator of the action sampling (the one that drew them).

    Returns
    -------
    loss : Tensor, scalar
        ``mean_{b,p} (c_bp - mean_p c_bp) log p(tau_bp)`` (advantage detached).
    metrics : dict
        ``cost``: the mean rollout cost.
    """
    instances, generator = batch
    _, logp, cost = policy(instances, generator=generator)
    adv = cost - cost.mean(dim=1, keepdim=True)
    return (adv.detach() * logp).mean(), {"cost": float(cost.mean())}


def _stream(variants, config: TrainConfig) -> StreamBatches:
    lo, hi = config.min_customers or config.num_customers, config.num_customers

    def sample(gen: torch.Generator, n: int):
        size = hi if lo == hi else int(torch.randint(lo, hi + 1, (1,), generator=gen))
        ins = generate_instances(n, size, variants, generator=gen)
        return ins, gen  # the same generator then samples the rollouts' actions

    return StreamBatches(sample, config.batch_size, seed=config.seed)


def _validation(variants, config: TrainConfig, extra=None):
    if config.val_instances == 0:
        return None
    val = generate_instances(
        config.val_instances, config.num_customers, variants, seed=derive_seed(config.seed, 1)
    )

    def evaluate(policy: MTVRPPolicy) -> dict:
        # drawn on the CPU once; evaluated on the policy's device
        _, _, cost = policy(val.to(device=module_device(policy)), greedy=True)
        out = {"val_cost": float(cost.min(1).values.mean())}
        if extra is not None:
            out.update(extra(policy))
        return out

    return evaluate


def _stage_trainer(policy, stage, variants, config, out_dir, extra_eval=None) -> Trainer:
    params = stage_parameters(policy, stage)
    if not params:
        raise ValueError(f"stage {stage!r} has nothing to train (a policy without experts?)")
    names = [variants] if isinstance(variants, str) else list(variants)
    return Trainer(
        policy,
        reinforce_loss,
        _stream(names, config),
        config,
        evaluate=_validation(names, config, extra_eval),
        out_dir=out_dir,
        meta={"policy": asdict(policy.config), "stage": stage, "variants": names},
        name=f"vrp {stage}",
    )


def train_stage(
    policy: MTVRPPolicy,
    stage: str,
    variants,
    config: TrainConfig,
    progress: bool | None = None,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    extra_eval=None,
) -> TrainResult:
    """Train one stage with REINFORCE and the POMO shared baseline on the engine.

    Instances are drawn fresh every update (:class:`~sci_moe.train.StreamBatches`: the
    batch of step ``s`` comes from ``(seed, s)``, and the same generator samples the
    rollouts), so ``resume`` continues exactly.

    Parameters
    ----------
    policy : MTVRPPolicy
    stage : {"backbone", "expert", "gated"}
    variants : str or list of str
        Training variants (cycled through the batch).
    config : TrainConfig
    progress : bool, optional
        Overrides ``config.progress``.
    out_dir : path, optional
        Checkpoint and metrics folder of the stage.
    resume : bool
        Continue the checkpoint in ``out_dir``.
    stop_after : int, optional
        Return after this many updates (a deliberate interruption).
    extra_eval : callable, optional
        ``extra_eval(policy) -> dict`` of floats added to every evaluation (a learning
        curve on a fixed set shared by several models); ``val_cost`` stays the monitor.

    Returns
    -------
    TrainResult
        ``evals`` hold the validation cost (``val_cost``) and ``extra_eval``'s values.
    """
    if progress is not None:
        config = replace(config, progress=bool(progress))
    trainer = _stage_trainer(policy, stage, variants, config, out_dir, extra_eval)
    return trainer.fit(resume=resume, stop_after=stop_after)


def train_moses(
    policy: MTVRPPolicy,
    steps=(100, 50, 50),
    *,
    config: TrainConfig | None = None,
    batch_size: int = 16,
    num_customers: int = 20,
    variants=SEEN,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = True,
    out_dir: str | Path | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    extra_eval=None,
) -> dict[str, TrainResult]:
    """MoSES's three stages in turn: CVRP backbone, basis experts, adaptive gate.

    Each stage is one engine run in ``out_dir/<stage>``; with ``resume`` the finished
    stages restore their weights and the interrupted one continues exactly.

    Parameters
    ----------
    policy : MTVRPPolicy
        With experts (``rank > 0``).
    steps : tuple of 3 int
        Updates of stages 1 (CVRP), 2 (:data:`BASIS_VARIANTS`) and 3 (``variants``); a
        stage with 0 updates is skipped.
    config : TrainConfig, optional
        The options every stage shares (its ``steps`` is replaced by the stage's); without
        it one is built from ``batch_size``, ``num_customers``, ``lr``, ``seed`` and
        ``progress``.
    batch_size, num_customers : int
    variants : sequence of str
        The stage-3 training mixture (default :data:`~sci_moe.vrp.SEEN`).
    lr : float
    seed : int
        Stage ``k`` uses the seed ``seed * 100 + k`` (``config.seed`` when given).
    progress : bool
    out_dir : path, optional
        The run's folder (one subfolder per stage).
    resume : bool
    stop_after : int, optional
        Return after this many updates of this call (a deliberate interruption).
    extra_eval : callable, optional
        Added to every stage's evaluations (see :func:`train_stage`).

    Returns
    -------
    dict
        The :class:`~sci_moe.train.TrainResult` of each stage run, by stage name.
    """
    steps = tuple(steps)
    if len(steps) != 3 or min(steps) < 0:
        raise ValueError(f"steps must give the updates (>= 0) of the 3 stages, got {steps!r}")
    if config is None:
        config = TrainConfig(
            batch_size=batch_size,
            num_customers=num_customers,
            lr=lr,
            seed=seed,
            progress=progress,
        )
    run = _run_stages(policy, steps, config, variants, out_dir, resume, stop_after, extra_eval)
    return dict(run.results)


def fit_moses(
    config: MoSESConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    stop_after: int | None = None,
) -> tuple[MTVRPPolicy, dict]:
    """Build the solver of ``config`` and train its three stages (``sci-moe train vrp``).

    Parameters
    ----------
    config : MoSESConfig
    out_dir : path, optional
        The run's folder (one subfolder per stage).
    resume : bool
        Continue the run in ``out_dir`` exactly.
    stop_after : int, optional
        Return after this many updates of this call (a deliberate interruption).

    Returns
    -------
    policy : MTVRPPolicy
        In the last stage's mode.
    summary : dict
        :meth:`sci_moe.train.Phases.summary` of the run (``reason`` is
        ``"budget"`` or ``"interrupted"`` when it paused).
    """
    policy = build_policy(config)
    run = _run_stages(
        policy, config.stage_steps(), config, config.variants, out_dir, resume, stop_after
    )
    return policy, run.summary()


def _run_stages(
    policy, steps, config, variants, out_dir, resume, stop_after, extra_eval=None
) -> Phases:
    if policy.config.rank < 1:
        raise ValueError("train_moses needs a policy with experts (PolicyConfig.rank >= 1)")
    base = TrainConfig(**{k: getattr(config, k) for k in TrainConfig.field_names()})
    mixes = {"backbone": "CVRP", "expert": list(BASIS_VARIANTS), "gated": list(variants)}
    run = Phases(
        out_dir, resume=resume, max_hours=base.max_hours, stop_after=stop_after, name="vrp"
    )
    for k, (stage, n) in enumerate(zip(STAGES, steps, strict=True), 1):
        if n == 0:  # skipped (for example to branch copies before stage 3)
            continue
        if not run.can_start(stage):
            break
        cfg = run.config(base, steps=int(n), seed=100 * base.seed + k)
        trainer = _stage_trainer(policy, stage, mixes[stage], cfg, run.folder(stage), extra_eval)
        run.fit(stage, trainer)
        if run.paused:
            break
    return run


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

    The instances are decoded on the policy's device (moved there when they are
    elsewhere); the results come back on the instances' device.

    Returns
    -------
    cost : Tensor, shape (B,)
    actions : Tensor, shape (B, T), int64
    """
    policy.eval()
    B = instance.batch_size
    home, dev = instance.locs.device, module_device(policy)
    big = augment(instance if dev == home else instance.to(device=dev), augmentations)
    actions, _, cost = policy(big, greedy=True)
    P, T = actions.shape[1], actions.shape[2]
    cost = cost.view(augmentations, B, P).permute(1, 0, 2).reshape(B, -1)
    actions = actions.view(augmentations, B, P, T).permute(1, 0, 2, 3).reshape(B, -1, T)
    best = cost.argmin(1)
    rows = torch.arange(B, device=cost.device)
    return cost[rows, best].to(home), actions[rows, best].to(home)
