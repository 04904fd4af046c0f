"""Train a sparse decomposition of an MLP on cached activations, on the shared engine.

Any of the three decompositions (:class:`~sci_moe.language.mxd.MixtureOfDecoders`,
:class:`~sci_moe.language.mxd.Transcoder`,
:class:`~sci_moe.language.mxd.SkipTranscoder`) is trained to map
the MLP input ``x`` to its output ``y`` by Adam on the per-token normalised MSE of the
public MxD code (:func:`~sci_moe.language.mxd.normalized_mse`), from the layers' own
initialisation (zero-initialised decoders). The loop is :class:`sci_moe.train.Trainer`
(schedule, checkpoints with exact resume, ``max_hours``, metrics, data parallelism);
the batches are tokens drawn uniformly with replacement from a generator seeded by
``(seed, step, rank)`` (:class:`~sci_moe.train.StreamBatches`). Unit-norm expert
vectors / decoder rows are kept unit-norm (the gradient component along them is removed
after the backward, which the loss then does itself, and the rows are projected back by
a hook after each step) when the layer was built with that option.

Dead units: the trainer records, per unit (expert or latent), the token count at which
it was last active (a coefficient > 0 in the top-k code; under data parallelism on any
rank). A unit is **dead** when it has not been active during the last ``dead_window``
training tokens; the fraction of dead units is logged, and with ``resample_every > 0``
dead units are re-initialised on inputs the layer reconstructs worst (the encoder/gate
row points at such an input, the decoder row / expert vector at its residual; their
Adam moments are reset). The resampling batch and draws come from a generator seeded by
``(seed, step)``, the same on every rank.

On a GPU (``config.device``: ``"cuda"``) the activations may stay where they are (the
CPU, for a large cache): the engine moves each training batch, the evaluation each
validation batch and the resampling its batch to the layer's device; the dead-unit
counters stay on the CPU and every draw is made with a CPU generator, as on the CPU.

The engine's checkpoint holds the layer, the optimiser, the step and (as ``stateful``)
the dead-unit counters, the resampling count and the loss history: a run resumed from a
checkpoint is bit-identical to an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..._util import check_int_attr, previous_path
from ...train import (
    CHECKPOINT_NAME,
    StepInfo,
    StreamBatches,
    Trainer,
    all_reduce_sum,
    current_context,
    derive_seed,
)
from ...train import TrainConfig as EngineConfig
from ...train import TrainResult as EngineResult
from .decoders import normalized_mse

__all__ = [
    "DecompositionTrainConfig",
    "TrainResult",
    "evaluate_decomposition",
    "output_bias",
    "resample_dead_units",
    "train_decomposition",
    "unit_parameters",
]


@dataclass
class DecompositionTrainConfig(EngineConfig):
    """Settings of :func:`train_decomposition`: the engine's
    (:class:`sci_moe.train.TrainConfig`) and these.

    The engine's defaults are changed to those of the MxD code: 1000 steps of 512
    tokens, Adam at a constant 1e-3 without warm-up, decay or clipping, the final (not
    the best) weights kept, ``monitor`` ``val_nmse`` (with validation activations) and a
    loss-history entry every 50 steps (``log_every``).

    Parameters
    ----------
    dead_window : int
        Tokens without activity after which a unit counts as dead.
    resample_every : int
        Resample dead units every this many steps (0: never).
    init_output_bias : bool
        Before the first step of a fresh run, set the layer's output bias (``bias`` of
        MxD, ``b_dec`` of the transcoders) to the mean MLP output over the training tokens
        (SAE practice; with few steps a zero bias otherwise dominates the error). Applied
        to every layer alike; a resumed run takes the bias of its checkpoint (the mean is
        then not computed).
    """

    steps: int = 1000
    batch_size: int = 512
    lr: float = 1e-3
    optimizer: str = "adam"
    schedule: str = "constant"
    warmup: float = 0.0
    grad_clip: float | None = None
    eval_every: int = 0
    monitor: str = "val_nmse"
    restore_best: bool = False
    log_every: int = 50
    dead_window: int = 100_000
    resample_every: int = 0
    init_output_bias: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int_attr(self, "dead_window", 1)
        check_int_attr(self, "resample_every", 0)
        if not isinstance(self.init_output_bias, bool):
            raise ValueError(
                f"init_output_bias must be true or false, got {self.init_output_bias!r}"
            )


@dataclass
class TrainResult:
    """What :func:`train_decomposition` returns.

    Attributes
    ----------
    step : int
        Steps done (equal to ``config.steps`` unless stopped by ``stop_after``, the
        budget or early stopping).
    tokens_seen : int
    history : list of (int, float)
        ``(step, mean training loss since the previous entry)``, every ``log_every``
        steps and at the last.
    dead_fraction : float
        Fraction of units inactive during the last ``dead_window`` tokens (0 before
        ``dead_window`` tokens were seen).
    resampled : int
        Units re-initialised in total.
    summary : sci_moe.train.TrainResult or None
        The engine's account of the run (evaluations, reason, time).
    """

    step: int
    tokens_seen: int
    history: list = field(default_factory=list)
    dead_fraction: float = 0.0
    resampled: int = 0
    summary: EngineResult | None = None


def _num_units(module: nn.Module) -> int:
    n = getattr(module, "num_experts", None) or getattr(module, "d_latent", None)
    if n is None:
        raise ValueError(
            f"{type(module).__name__} is not a sparse decomposition (no num_experts or "
            "d_latent); pass a MixtureOfDecoders, Transcoder or SkipTranscoder"
        )
    return int(n)


def _unit_norm(module: nn.Module) -> bool:
    return bool(
        getattr(module, "normalize_experts", False) or getattr(module, "normalize_decoder", False)
    )


def output_bias(module: nn.Module) -> nn.Parameter:
    """The output bias of a decomposition (``bias`` of MxD, ``b_dec`` of transcoders)."""
    b = getattr(module, "b_dec", None)
    b = getattr(module, "bias", None) if b is None else b
    if not isinstance(b, nn.Parameter):
        raise ValueError(f"{type(module).__name__} has no output bias (b_dec or bias)")
    return b


def unit_parameters(module: nn.Module) -> tuple[tuple[nn.Parameter, int], ...]:
    """Parameters that hold one slice per unit, with the axis of the unit.

    Returns
    -------
    tuple of (Parameter, int)
        For MxD ``gate.weight`` (axis 0), ``gate.bias`` (0), ``C`` (0); for transcoders
        ``W_enc`` (axis 1), ``b_enc`` (0), ``W_dec`` (0). The first entry is the
        encoder/gate direction, the last the decoder row / expert vector.
    """
    if hasattr(module, "num_experts"):
        return ((module.gate.weight, 0), (module.gate.bias, 0), (module.C, 0))
    if hasattr(module, "d_latent"):
        return ((module.W_enc, 1), (module.b_enc, 0), (module.W_dec, 0))
    _num_units(module)
    raise AssertionError  # pragma: no cover


@torch.no_grad()
def resample_dead_units(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    dead: torch.Tensor,
    x: torch.Tensor,
    target: torch.Tensor,
    generator: torch.Generator,
) -> int:
    """Re-initialise dead units on the inputs the layer reconstructs worst.

    For each dead unit an input ``x_t`` is drawn with probability proportional to its
    squared reconstruction error; the unit's encoder/gate row becomes
    ``0.2 * mean_alive_norm * x_t / ||x_t||`` with zero bias, and its decoder row /
    expert vector the unit direction of the residual ``target_t - y_t`` (for MxD the
    expert vector's scale is the unit norm it is kept at). Adam moments of the touched
    slices are zeroed. ``dead``, ``x`` and ``target`` may live on another device than the
    layer (they are moved to it); the draws use ``generator`` on the CPU, so they are the
    same on every device.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
    optimizer : torch.optim.Optimizer
        Adam-like (``exp_avg``/``exp_avg_sq`` state), over ``module``'s parameters.
    dead : Tensor, bool, shape (num_units,)
    x, target : Tensor, shape (T, d_in), (T, d_out)
        A batch of training inputs and MLP outputs.
    generator : torch.Generator

    Returns
    -------
    int
        Number of units resampled.
    """
    (enc, enc_axis), (bias, _), (dec, _) = unit_parameters(module)
    device = enc.device
    dead, x, target = dead.to(device), x.to(device), target.to(device)
    units = dead.nonzero().flatten()
    if units.numel() == 0:
        return 0
    residual = target - module(x).y
    err = residual.pow(2).sum(-1)
    if float(err.sum()) <= 0:
        return 0
    # drawn on the CPU with the CPU generator (a CUDA tensor needs a CUDA generator)
    picks = torch.multinomial(err.cpu(), units.numel(), replacement=True, generator=generator)
    picks = picks.to(device)
    alive = ~dead
    enc_rows = enc if enc_axis == 0 else enc.t()
    scale = enc_rows[alive].norm(dim=1).mean() if alive.any() else torch.tensor(1.0, device=device)
    xs = x[picks]
    new_enc = 0.2 * scale * xs / xs.norm(dim=1, keepdim=True).clamp_min(1e-12)
    enc_rows[units] = new_enc.to(enc.dtype)
    bias[units] = 0.0
    res = residual[picks]
    dec[units] = (res / res.norm(dim=1, keepdim=True).clamp_min(1e-12)).to(dec.dtype)
    for p, axis in unit_parameters(module):
        state = optimizer.state.get(p, {})
        for name in ("exp_avg", "exp_avg_sq"):
            if name in state:
                (state[name] if axis == 0 else state[name].t())[units] = 0.0
    return int(units.numel())


def _check_data(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and y must be (tokens, d) tensors with the same number of tokens, got "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.shape[1] != module.d_in or y.shape[1] != module.d_out:
        raise ValueError(
            f"the layer maps {module.d_in} -> {module.d_out} features but the activations are "
            f"{x.shape[1]} -> {y.shape[1]}; build it with the MLP's sizes"
        )


class _Units:
    """The dead-unit counters and the loss history (engine ``stateful``)."""

    def __init__(self, n_units: int) -> None:
        self.last_active = torch.zeros(n_units, dtype=torch.int64)
        self.resampled = 0
        self.history: list[tuple[int, float]] = []
        self.running, self.n_running = 0.0, 0

    def state_dict(self) -> dict:
        return {
            "last_active": self.last_active.clone(),
            "resampled": self.resampled,
            "history": [list(h) for h in self.history],
            "running": [self.running, self.n_running],
        }

    def load_state_dict(self, state: dict) -> None:
        self.last_active = state["last_active"].clone()
        self.resampled = int(state["resampled"])
        self.history = [(int(s), float(v)) for s, v in state["history"]]
        self.running, self.n_running = float(state["running"][0]), int(state["running"][1])

    def dead(self, tokens: int, window: int) -> torch.Tensor:
        return (tokens - self.last_active) >= window


_RESAMPLE = 0x5E5A  # generator key of the resampling draws


def train_decomposition(
    module: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    config: DecompositionTrainConfig | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    x_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Fit ``module`` to map MLP inputs ``x`` to MLP outputs ``y``.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
        Trained in place.
    x : Tensor, shape (T, d_in)
        MLP inputs (after the norm), e.g. :meth:`ActivationCache.load` ``["x"]``; may be
        stored in a lower precision (float16 / bfloat16), on the CPU or on the training
        device: each batch is cast to the layer's dtype and the engine moves it to
        ``config.device``.
    y : Tensor, shape (T, d_out)
        MLP outputs (the same storage as ``x``).
    config : DecompositionTrainConfig, optional
    out_dir : path-like, optional
        Where the engine writes ``checkpoint.pt`` and ``metrics.jsonl``.
    resume : bool
        Continue the run in ``out_dir`` (a fresh run when it holds no checkpoint).
    x_val, y_val : Tensor, optional
        Held-out activations: :func:`evaluate_decomposition` every ``eval_every`` steps
        and at the end (``val_nmse``, ``val_fvu``, ``val_dead_fraction``, ``val_l0``).
    stop_after : int, optional
        Return after this many steps of this call, checkpointed (an interruption on
        purpose; resume to continue).

    Returns
    -------
    TrainResult
    """
    cfg = config or DecompositionTrainConfig()
    if not isinstance(cfg, DecompositionTrainConfig):
        raise TypeError(f"config must be a DecompositionTrainConfig, got {type(cfg).__name__}")
    _check_data(module, x, y)
    if (x_val is None) != (y_val is None):
        raise ValueError("give both x_val and y_val, or neither")
    if x_val is not None:
        _check_data(module, x_val, y_val)
    n_units = _num_units(module)
    # a resumed run loads its checkpoint's bias: the mean over all training tokens (1.7 s
    # for 1.1M x 576 float16 on one thread) is only taken for a fresh run; the trainer
    # restores exactly when one of these files exists
    ckpt = None if out_dir is None else Path(out_dir) / CHECKPOINT_NAME
    restoring = resume and ckpt is not None and (ckpt.exists() or previous_path(ckpt).exists())
    if cfg.init_output_bias and not restoring:
        with torch.no_grad():
            output_bias(module).copy_(y.mean(0, dtype=torch.float32))
    unit_norm = _unit_norm(module)
    own_backward = unit_norm and hasattr(module, "remove_parallel_grad_")
    T = x.shape[0]
    ctx = current_context()
    units = _Units(n_units)
    params = [p for p in module.parameters() if p.requires_grad]

    dtype = output_bias(module).dtype

    def sample(gen: torch.Generator, n: int):
        idx = torch.randint(0, T, (n,), generator=gen).to(x.device)
        return x[idx].to(dtype), y[idx].to(dtype)

    def loss_fn(m, batch):
        out = m(batch[0])
        loss = normalized_mse(out.y, batch[1])
        if not own_backward:
            return loss, None, out
        # the projection acts between the backward and the step: the backward is ours
        for p in params:
            p.grad = None
        loss.backward()
        m.remove_parallel_grad_()
        return loss.detach(), None, out

    def on_step(info: StepInfo) -> None:
        if unit_norm:
            module.renormalize_()
        step, tokens = info.step, info.step * cfg.batch_size
        out = info.extra
        fired = torch.zeros(n_units, dtype=torch.bool)
        fired[out.indices[out.values > 0].unique().cpu()] = True
        if ctx.enabled:  # active on any rank
            fired = torch.tensor(all_reduce_sum(fired.double().tolist(), ctx)) > 0
        units.last_active[fired] = tokens
        units.running += float(info.metrics["loss"])
        units.n_running += 1
        if step % cfg.log_every == 0 or step == cfg.steps:
            units.history.append((step, units.running / units.n_running))
            units.running, units.n_running = 0.0, 0
        if cfg.resample_every and step % cfg.resample_every == 0 and tokens >= cfg.dead_window:
            dead = units.dead(tokens, cfg.dead_window)
            gen = torch.Generator().manual_seed(derive_seed(cfg.seed, step, _RESAMPLE))
            idx = torch.randint(0, T, (cfg.batch_size,), generator=gen).to(x.device)
            units.resampled += resample_dead_units(
                module, info.optimizer, dead, x[idx].to(dtype), y[idx].to(dtype), gen
            )
            units.last_active[dead] = tokens

    evaluate = None
    if x_val is not None:

        def evaluate(m) -> dict:
            ev = evaluate_decomposition(m, x_val, y_val)
            return {f"val_{k}": v for k, v in ev.items()}

    meta = {
        "layer": type(module).__name__,
        "d_in": int(module.d_in),
        "d_out": int(module.d_out),
        "units": n_units,
        "train_tokens": int(T),
        "val_tokens": None if x_val is None else int(x_val.shape[0]),
    }
    trainer = Trainer(
        module,
        loss_fn,
        StreamBatches(sample, cfg.batch_size, seed=cfg.seed),
        cfg,
        evaluate=evaluate,
        out_dir=out_dir,
        hooks=[on_step],
        stateful={"units": units},
        meta=meta,
        name="decomposition",
    )
    res = trainer.fit(resume=resume, stop_after=stop_after)
    tokens = res.step * cfg.batch_size
    dead_fraction = (
        float(units.dead(tokens, cfg.dead_window).float().mean())
        if tokens >= cfg.dead_window
        else 0.0
    )
    return TrainResult(res.step, tokens, list(units.history), dead_fraction, units.resampled, res)


@torch.no_grad()
def evaluate_decomposition(
    module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096
) -> dict[str, float]:
    """Reconstruction quality and unit usage on held-out activations.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
    x, y : Tensor, shape (T, d_in), (T, d_out)
        Any storage dtype and device (cast to the layer's dtype and moved to its device
        batch by batch).
    batch_size : int

    Returns
    -------
    dict
        ``"nmse"``: mean per-token normalised MSE (:func:`~sci_moe.language.mxd.normalized_mse`);
        ``"fvu"``: fraction of variance unexplained,
        ``sum ||y - y_hat||^2 / sum ||y - mean(y)||^2``; ``"dead_fraction"``: fraction of
        units never active (value > 0) on these tokens; ``"l0"``: mean active units per
        token.
    """
    _check_data(module, x, y)
    was = module.training
    module.eval()
    n_units = _num_units(module)
    dtype = output_bias(module).dtype
    device = output_bias(module).device
    used = torch.zeros(n_units, dtype=torch.bool, device=device)
    nmse, sse, l0, var = 0.0, 0.0, 0.0, 0.0
    mean = y.mean(0, dtype=torch.float32).to(device, dtype)
    try:
        for b in range(0, x.shape[0], batch_size):
            out = module(x[b : b + batch_size].to(device, dtype))
            yb = y[b : b + batch_size].to(device, dtype)
            var += float((yb - mean).pow(2).sum())
            nmse += float(normalized_mse(out.y, yb, reduction="sum"))
            sse += float((out.y - yb).pow(2).sum())
            active = out.values > 0
            used[out.indices[active]] = True
            l0 += float(active.sum())
    finally:
        module.train(was)
    T = x.shape[0]
    return {
        "nmse": nmse / T,
        "fvu": sse / var,
        "dead_fraction": float((~used).float().mean()),
        "l0": l0 / T,
    }
