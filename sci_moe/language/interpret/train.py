"""Train a sparse decomposition of an MLP on cached activations, with exact resume.

Any of the core's three decompositions (:class:`~sci_moe.moe.MixtureOfDecoders`,
:class:`~sci_moe.moe.Transcoder`, :class:`~sci_moe.moe.SkipTranscoder`) is trained to map
the MLP input ``x`` to its output ``y`` by Adam on the per-token normalised MSE of the
public MxD code (:func:`~sci_moe.moe.normalized_mse`), from the layers' own
initialisation (zero-initialised decoders). Unit-norm expert vectors / decoder rows are
kept unit-norm (gradient component along them removed before the step, rows projected
after it) when the layer was built with that option.

Dead units: the trainer records, per unit (expert or latent), the token count at which
it was last active (a coefficient > 0 in the top-k code). A unit is **dead** when it has
not been active during the last ``dead_window`` training tokens; the fraction of dead
units is logged, and with ``resample_every > 0`` dead units are re-initialised on
inputs the layer reconstructs worst (the encoder/gate row points at such an input, the
decoder row / expert vector at its residual; their Adam moments are reset).

Checkpoints (``torch.save`` of plain containers, written atomically, read with
``weights_only=True``) hold the layer, the optimiser, the step, the batch sampler's RNG
state and the dead-unit counters: a run resumed from a checkpoint is bit-identical to
an uninterrupted one.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..._util import atomic_torch_save, progress_bar
from ...moe import normalized_mse

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
class DecompositionTrainConfig:
    """Settings of :func:`train_decomposition`.

    Attributes
    ----------
    steps : int
        Optimiser steps; the run sees ``steps * batch_size`` tokens.
    batch_size : int
        Tokens per step (drawn uniformly with replacement from the training tokens).
    lr : float
        Adam learning rate.
    seed : int
        Seed of the batch sampler (the layer's initialisation is the caller's).
    dead_window : int
        Tokens without activity after which a unit counts as dead.
    resample_every : int
        Resample dead units every this many steps (0: never).
    checkpoint_every : int
        Write the checkpoint every this many steps (0: only at the end).
    log_every : int
        Record the training loss every this many steps.
    init_output_bias : bool
        Before the first step, set the layer's output bias (``bias`` of MxD, ``b_dec`` of
        the transcoders) to the mean MLP output over the training tokens (SAE practice;
        with few steps a zero bias otherwise dominates the error). Applied to every layer
        alike; not repeated on resume.
    show_progress : bool
    """

    steps: int = 1000
    batch_size: int = 512
    lr: float = 1e-3
    seed: int = 0
    dead_window: int = 100_000
    resample_every: int = 0
    checkpoint_every: int = 0
    log_every: int = 50
    init_output_bias: bool = True
    show_progress: bool = True

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "dead_window", "log_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("resample_every", "checkpoint_every", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not (isinstance(self.lr, int | float) and self.lr > 0 and self.lr < float("inf")):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")

    def _identity(self) -> dict:
        """Fields a resumed run must share (progress and checkpoint cadence may change)."""
        d = asdict(self)
        for name in ("steps", "checkpoint_every", "show_progress"):
            d.pop(name)
        return d


@dataclass
class TrainResult:
    """What :func:`train_decomposition` returns.

    Attributes
    ----------
    step : int
        Steps done (equal to ``config.steps`` unless stopped early by ``stop_at``).
    tokens_seen : int
    history : list of (int, float)
        ``(step, mean training loss since the previous entry)``.
    dead_fraction : float
        Fraction of units inactive during the last ``dead_window`` tokens (0 before
        ``dead_window`` tokens were seen).
    resampled : int
        Units re-initialised in total.
    """

    step: int
    tokens_seen: int
    history: list = field(default_factory=list)
    dead_fraction: float = 0.0
    resampled: int = 0


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
    slices are zeroed.

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
    units = dead.nonzero().flatten()
    if units.numel() == 0:
        return 0
    residual = target - module(x).y
    err = residual.pow(2).sum(-1)
    if float(err.sum()) <= 0:
        return 0
    picks = torch.multinomial(err, units.numel(), replacement=True, generator=generator)
    (enc, enc_axis), (bias, _), (dec, _) = unit_parameters(module)
    alive = ~dead
    enc_rows = enc if enc_axis == 0 else enc.t()
    scale = enc_rows[alive].norm(dim=1).mean() if alive.any() else torch.tensor(1.0)
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


def _state(module, opt, step, tokens, gen, last_active, history, resampled, cfg, running) -> dict:
    return {
        "module": module.state_dict(),
        "optimizer": opt.state_dict(),
        "step": step,
        "tokens_seen": tokens,
        "generator": gen.get_state(),
        "last_active": last_active,
        "history": [list(h) for h in history],
        "resampled": resampled,
        "running": list(running),
        "config": cfg._identity(),
    }


def train_decomposition(
    module: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    config: DecompositionTrainConfig | None = None,
    checkpoint: str | os.PathLike | None = None,
    stop_at: int | None = None,
) -> TrainResult:
    """Fit ``module`` to map MLP inputs ``x`` to MLP outputs ``y``.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
        Trained in place.
    x : Tensor, shape (T, d_in)
        MLP inputs (after the norm), e.g. :meth:`ActivationCache.load` ``["x"]``.
    y : Tensor, shape (T, d_out)
        MLP outputs.
    config : DecompositionTrainConfig, optional
    checkpoint : path-like, optional
        Checkpoint file: resumed from if it exists, written every
        ``config.checkpoint_every`` steps and at the end.
    stop_at : int, optional
        Stop (after checkpointing) once this many steps are done, as an interruption
        would; rerun with the same checkpoint to continue.

    Returns
    -------
    TrainResult
    """
    cfg = config or DecompositionTrainConfig()
    _check_data(module, x, y)
    n_units = _num_units(module)
    opt = torch.optim.Adam(module.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    step, tokens, resampled, history = 0, 0, 0, []
    running, n_running = 0.0, 0
    last_active = torch.zeros(n_units, dtype=torch.int64)
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.is_file():
        state = torch.load(path, weights_only=True)
        if state["config"] != cfg._identity():
            raise ValueError(
                f"{path} was written with another configuration ({state['config']}); "
                "use the same settings to resume or another checkpoint path"
            )
        module.load_state_dict(state["module"])
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        step, tokens = int(state["step"]), int(state["tokens_seen"])
        last_active = state["last_active"].clone()
        history = [tuple(h) for h in state["history"]]
        resampled = int(state["resampled"])
        running, n_running = float(state["running"][0]), int(state["running"][1])
    elif cfg.init_output_bias:
        with torch.no_grad():
            output_bias(module).copy_(y.mean(0))
    end = cfg.steps if stop_at is None else min(cfg.steps, stop_at)
    unit_norm = _unit_norm(module)
    module.train()
    bar = progress_bar(
        total=cfg.steps,
        initial=step,
        desc="decomposition",
        unit="step",
        disable=not cfg.show_progress,
    )
    T = x.shape[0]

    def save() -> None:  # the whole training state, read by the resume branch above
        state = _state(
            module, opt, step, tokens, gen, last_active, history, resampled, cfg,
            (running, n_running),
        )  # fmt: skip
        atomic_torch_save(path, state)

    try:
        while step < end:
            idx = torch.randint(0, T, (cfg.batch_size,), generator=gen)
            xb, yb = x[idx], y[idx]
            out = module(xb)
            loss = normalized_mse(out.y, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if unit_norm and hasattr(module, "remove_parallel_grad_"):
                module.remove_parallel_grad_()
            opt.step()
            if unit_norm:
                module.renormalize_()
            tokens += cfg.batch_size
            step += 1
            fired = out.indices[out.values > 0].unique()
            last_active[fired] = tokens
            running += float(loss.detach())
            n_running += 1
            if step % cfg.log_every == 0 or step == cfg.steps:
                history.append((step, running / n_running))
                bar.set_postfix(loss=f"{running / n_running:.4g}")
                running, n_running = 0.0, 0
            if cfg.resample_every and step % cfg.resample_every == 0 and tokens >= cfg.dead_window:
                dead = (tokens - last_active) >= cfg.dead_window
                got = resample_dead_units(module, opt, dead, xb, yb, gen)
                last_active[dead] = tokens
                resampled += got
            if path is not None and cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                save()
            bar.update(1)
    finally:
        bar.close()
    if path is not None:
        save()
    dead_fraction = (
        float(((tokens - last_active) >= cfg.dead_window).float().mean())
        if tokens >= cfg.dead_window
        else 0.0
    )
    return TrainResult(step, tokens, history, dead_fraction, resampled)


@torch.no_grad()
def evaluate_decomposition(
    module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096
) -> dict[str, float]:
    """Reconstruction quality and unit usage on held-out activations.

    Parameters
    ----------
    module : MixtureOfDecoders or Transcoder or SkipTranscoder
    x, y : Tensor, shape (T, d_in), (T, d_out)
    batch_size : int

    Returns
    -------
    dict
        ``"nmse"``: mean per-token normalised MSE (:func:`~sci_moe.moe.normalized_mse`);
        ``"fvu"``: fraction of variance unexplained,
        ``sum ||y - y_hat||^2 / sum ||y - mean(y)||^2``; ``"dead_fraction"``: fraction of
        units never active (value > 0) on these tokens; ``"l0"``: mean active units per
        token.
    """
    _check_data(module, x, y)
    was = module.training
    module.eval()
    n_units = _num_units(module)
    used = torch.zeros(n_units, dtype=torch.bool)
    nmse, sse, l0 = 0.0, 0.0, 0.0
    mean = y.mean(0)
    try:
        for b in range(0, x.shape[0], batch_size):
            out = module(x[b : b + batch_size])
            yb = y[b : b + batch_size]
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
        "fvu": sse / float((y - mean).pow(2).sum()),
        "dead_fraction": float((~used).float().mean()),
        "l0": l0 / T,
    }
