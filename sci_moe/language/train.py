"""Training of the MoE language model on the shared engine (:class:`sci_moe.train.Trainer`).

:func:`train` (and :func:`finetune`, :func:`run_training`) build a
:class:`~sci_moe.language.MoETransformerLM` after :func:`~sci_moe.train.seed_everything`,
draw random byte windows of the corpus as a :class:`~sci_moe.train.StreamBatches` (the
windows of step ``s`` come from a generator seeded by ``(seed, s, rank)``, so a resumed
run sees exactly the batches of an uninterrupted one) and hand the loop to the engine:
AdamW, warm-up + cosine schedule, clipping, evaluation every ``eval_every`` steps,
``metrics.jsonl``, verified checkpoints with exact resume, ``max_hours``, threads and
data parallelism under ``torchrun``. Routing Mamba, Default MoE and the orthogonality /
variance specialisation losses are options of the model (:class:`MoELMConfig`); the
auxiliary-loss-free bias balancing (:class:`~sci_moe.moe.BiasBalancer`) runs as an engine
hook after each optimiser step.

Data and expert parallelism
---------------------------
Under ``torchrun`` every process is a data-parallel rank: it draws its share of the
``batch_size`` windows of a step and the engine averages the gradients
(:func:`~sci_moe.train.average_gradients`). With ``expert_parallel=True`` every MoE FFN is
in addition sharded over the same processes (:func:`~sci_moe.moe.parallel.expert_parallel`:
rank ``r`` of ``W`` holds experts ``[r E/W, (r + 1) E/W)``); each rank still routes its
own windows, whose token rows travel to the experts' owners by all-to-all. The two
compose through the engine's ``grad_sync``: after ``backward`` an expert slice holds the
gradient of the **sum** of the ranks' losses (the reverse all-to-all delivers every
rank's contribution) while the replicated parameters (embeddings, attention, routers,
norms) hold only their rank's, so :func:`expert_data_parallel_sync` calls
:func:`~sci_moe.moe.parallel.sync_replicated_grads` with ``reduction="mean"``: replicated
gradients are averaged over the ranks and expert gradients divided by ``W``. With equal
shares (``batch_size`` divisible by ``W``, checked) both become the gradient of the mean
loss over the global batch, the same step as the data-parallel run without expert
parallelism. Batch statistics are those of the global batch in both modes, so the
replicas stay equal: the selection-bias updates and Default MoE's EMA sum their
per-expert counts over the ranks (the expert-parallel dispatcher's ``reduce_batch``, or
that of the replicated layers' dispatcher under plain data parallelism). With expert
parallelism each rank writes its own checkpoint (its expert slices and their Adam
moments): rank 0 ``OUT/checkpoint.pt``, rank ``r`` ``OUT/expert_rank{r}/checkpoint.pt``;
a resume needs the same number of processes, and the ranks' checkpoints must be at the
same step (else the resume is refused). :meth:`LMRun.full_state_dict` gathers the
single-process weights.

Two processes on one machine, experts sharded over both::

    torchrun --standalone --nproc_per_node 2 -m sci_moe.cli.main \\
        train lm --out runs/ep --expert-parallel --batch-size 16
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .._util import CheckpointError, load_latest, module_device, previous_path
from ..moe import BiasBalancer, MoE, dispatch, routing_diagnostics
from ..train import (
    CHECKPOINT_NAME,
    StepInfo,
    StreamBatches,
    Trainer,
    TrainResult,
    current_context,
    get_rng_state,
    run_device,
    seed_everything,
    set_rng_state,
)
from .checkpoint import MODEL_FORMAT, _History, _history, load_checkpoint, save_model
from .data import TextCorpus, load_corpus, random_windows, validation_windows
from .expert_parallel import (
    ExpertParallelTrainer,
    ReplicatedDispatch,
    expert_data_parallel_sync,
)
from .model import MoELMConfig, MoETransformerLM
from .train_config import LMConfig, TrainConfig

__all__ = [
    "CHECKPOINT_NAME",
    "MODEL_FORMAT",
    "LMConfig",
    "LMRun",
    "TrainConfig",
    "evaluate",
    "expert_data_parallel_sync",
    "finetune",
    "load_checkpoint",
    "run_training",
    "save_model",
    "train",
]


# ---------------------------------------------------------------------- evaluation


@torch.no_grad()
def evaluate(model: MoETransformerLM, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> dict:
    """Validation loss, perplexity and routing diagnostics on fixed windows ``x, y``.

    Runs in eval mode (Default MoE's default term is off at inference). Per MoE layer:
    ``load`` (fraction of assignments per expert over all windows), ``max_violation``
    (MaxVio of that global load), ``max_violation_batch`` (mean per-batch MaxVio),
    ``entropy``, ``score_variance`` and ``overlap`` (means over batches; see
    :func:`~sci_moe.moe.routing_diagnostics`). With expert-parallel layers it is a
    collective: call it on every rank with the same windows.
    ``x, y`` may live anywhere: each batch goes to the model's device
    (:func:`~sci_moe._util.module_device`).
    """
    was_training = model.training
    model.eval()
    device = module_device(model)
    layers = model.moe_layers()
    records: dict[int, list] = {i: [] for i in range(len(layers))}
    counts = [torch.zeros(m.num_experts) for m in layers]
    handles = []

    def hook_for(i: int, layer: MoE):
        def hook(_module, args, output):
            _, info = output
            ys = info.expert_outputs
            if ys is None:
                x2 = args[0].reshape(-1, layer.d_model)
                if layer.dispatcher.shards_experts:  # the experts live on their owners
                    _, ys = layer.dispatcher(x2, info.routing, layer.experts, True)
                else:
                    _, ys = dispatch(x2, info.routing, layer.experts, return_expert_outputs=True)
            records[i].append(routing_diagnostics(info.routing, ys))
            counts[i] += info.routing.load.float().cpu()

        return hook

    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_hook(hook_for(i, layer)))
    try:
        total, n = 0.0, 0
        for s in range(0, x.shape[0], batch_size):
            xb, yb = x[s : s + batch_size].to(device), y[s : s + batch_size].to(device)
            ce, _, _ = model.loss(xb, yb)
            total += float(ce) * yb.numel()
            n += yb.numel()
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    loss = total / n
    layer_stats = []
    for i in range(len(layers)):
        recs = records[i]
        c = counts[i]
        mean = c.mean().clamp_min(1e-12)

        def avg(key, recs=recs):
            return float(sum(r[key] for r in recs) / len(recs))

        layer_stats.append(
            {
                "load": (c / c.sum().clamp_min(1)).tolist(),
                "max_violation": float((c.max() - mean) / mean),
                "max_violation_batch": avg("max_violation"),
                "entropy": avg("entropy"),
                "score_variance": avg("score_variance"),
                "overlap": avg("overlap"),
            }
        )
    return {"loss": loss, "ppl": math.exp(loss), "layers": layer_stats}


def _config_defaults(cls) -> dict:
    """Default values of a config dataclass's fields (those that have one)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


# ------------------------------------------------------------------- engine extras


class _Balancing:
    """:class:`~sci_moe.moe.BiasBalancer` as an engine hook (and ``stateful``).

    After each optimiser step it feeds the step's per-layer loads to the balancer and
    applies one update. Under data (or expert) parallelism the balancer sums the loads
    over the ranks through each layer's dispatcher (``reduce_batch``), so every rank
    applies the same update and the biases stay equal.
    """

    def __init__(self, model: MoETransformerLM, rate: float | None) -> None:
        self.model = model
        self.balancer = BiasBalancer(model, rate=rate)

    def __call__(self, info: StepInfo) -> None:
        for layer, inf in zip(self.model.moe_layers(), info.extra, strict=True):
            self.balancer.observe(layer, inf.routing)
        self.balancer.step()

    def state_dict(self) -> dict:
        return {"frozen": self.balancer.frozen}

    def load_state_dict(self, state: dict) -> None:
        self.balancer.frozen = bool(state["frozen"])


# -------------------------------------------------------------------------- training


@dataclass
class LMRun:
    """What :func:`run_training` returns.

    Attributes
    ----------
    history : dict
        As :func:`train` returns it.
    model : MoETransformerLM
        The trained model (expert-parallel layers hold this rank's experts).
    result : TrainResult
        The engine's summary (``to_dict()`` for JSON).
    """

    history: dict
    model: MoETransformerLM
    result: TrainResult

    def full_state_dict(self) -> dict:
        """Single-process weights (all-gathers expert-parallel layers: a collective)."""
        from ..moe.parallel import full_state_dict

        if any(m.dispatcher.shards_experts for m in self.model.moe_layers()):
            return full_state_dict(self.model)
        return self.model.state_dict()


def _resume_meta(out: Path, meta: dict, model_cfg: MoELMConfig) -> dict:
    """The checkpoint's ``meta`` when it describes this model (keys added to
    :class:`MoELMConfig` since it was written take their defaults), else ``meta``."""
    path = out / CHECKPOINT_NAME
    if not path.exists() and not previous_path(path).exists():
        return meta
    try:
        state, used, _ = load_latest(path, what="training checkpoint")
    except CheckpointError:
        return meta  # the engine reports it
    saved = state.get("meta") if isinstance(state, dict) else None
    if not isinstance(saved, dict) or "model" not in saved:
        return meta
    filled = {**_config_defaults(MoELMConfig), **saved["model"]}
    if filled != asdict(model_cfg):
        raise ValueError(
            f"checkpoint {used} was written for a different model config: {saved['model']}; "
            "resume with that model or start a new run in another folder"
        )
    return {**meta, "model": saved["model"]}


def run_training(
    model_cfg: MoELMConfig,
    train_cfg: TrainConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    init_from: str | Path | None = None,
    corpus: TextCorpus | None = None,
    callback: Callable[[int, MoETransformerLM, dict], None] | None = None,
    stop_after: int | None = None,
) -> LMRun:
    """Train an MoE language model on the engine; :func:`train` with every output.

    Parameters are those of :func:`train`.

    Returns
    -------
    LMRun
    """
    if not isinstance(model_cfg, MoELMConfig):
        raise TypeError(f"model_cfg must be a MoELMConfig, got {type(model_cfg).__name__}")
    if not isinstance(train_cfg, TrainConfig):
        raise TypeError(
            f"train_cfg must be a sci_moe.language.TrainConfig, got {type(train_cfg).__name__}"
        )
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (where the checkpoint is)")
    ctx = current_context()
    device = run_device(train_cfg.device, ctx)
    corpus = corpus if corpus is not None else load_corpus(train_cfg.val_fraction)
    if train_cfg.expert_parallel:
        if not ctx.enabled:
            raise ValueError(
                "expert_parallel needs >= 2 processes: run under torchrun "
                "(torchrun --nproc_per_node N -m sci_moe.cli.main train lm ...)"
            )
        if train_cfg.batch_size % ctx.world_size:
            raise ValueError(
                f"batch_size must be divisible by the {ctx.world_size} processes with "
                f"expert_parallel, got {train_cfg.batch_size}"
            )

    seed_everything(train_cfg.seed)
    model = MoETransformerLM(model_cfg)
    if init_from is not None:
        state = load_checkpoint(init_from)["model"]
        missing, unexpected = model.load_state_dict(state, strict=False)
        bad = [k for k in missing if not k.endswith(".default.ema")]
        bad += [k for k in unexpected if not k.endswith(".default.ema")]
        if bad:
            raise ValueError(f"checkpoint {init_from} does not fit this model: {bad[:5]}")
    model.to(device)
    grad_sync = None
    trainer_cls = Trainer
    if train_cfg.expert_parallel:
        from ..moe.parallel import expert_parallel

        for block in model.blocks:
            if block.is_moe:
                block.ffn = expert_parallel(block.ffn)
        grad_sync = expert_data_parallel_sync(model, train_cfg.grad_clip)
        trainer_cls = ExpertParallelTrainer
    elif ctx.enabled:
        for layer in model.moe_layers():  # replicas: batch statistics over all ranks
            layer.dispatcher = ReplicatedDispatch()

    seq_len = model_cfg.seq_len
    train_tokens = corpus.train

    def sample(gen: torch.Generator, n: int):
        # drawn on the CPU (the same windows on every device); the engine moves them
        return random_windows(train_tokens, seq_len, n, gen)

    data = StreamBatches(sample, train_cfg.batch_size, seed=train_cfg.seed)
    vx, vy = validation_windows(corpus.val, seq_len, train_cfg.eval_batches * train_cfg.batch_size)
    vx, vy = vx.to(device), vy.to(device)

    def val(m) -> dict:
        ev = evaluate(m, vx, vy, train_cfg.batch_size)
        return {"val_loss": ev["loss"], "val_ppl": ev["ppl"], "val_layers": ev["layers"]}

    record = _History()
    clock = {"t0": 0.0}

    def loss_fn(m, batch):
        clock["t0"] = time.perf_counter()
        ce, aux, infos = m.loss(*batch)
        return ce + aux, {"ce": ce.detach(), "aux": aux.detach()}, infos

    hooks: list = []
    stateful: dict = {"history": record}
    if any(m.router.config.selection_bias for m in model.moe_layers()):
        balancing = _Balancing(model, train_cfg.bias_balancing)
        hooks.append(balancing)
        stateful["bias_balancer"] = balancing
    elif train_cfg.bias_balancing is not None:
        raise ValueError(
            "bias_balancing needs MoE layers with selection_bias=True "
            "(MoELMConfig(moe={'selection_bias': True}))"
        )
    trainer: Trainer | None = None

    def current_history() -> dict:
        return _history(record.state_dict(), trainer.evals, train_cfg.batch_size, seq_len)

    def on_step(info: StepInfo) -> None:
        record.train_loss.append(float(info.metrics["ce"]))
        record.aux_loss.append(float(info.metrics["aux"]))
        record.step_time.append(time.perf_counter() - clock["t0"])
        if callback is not None:
            callback(info.step, info.model, current_history())

    hooks.append(on_step)
    meta = {
        "model": asdict(model_cfg),
        "corpus": {
            "train_tokens": int(corpus.train.numel()),
            "val_tokens": int(corpus.val.numel()),
        },
    }
    if resume and out_dir is not None:
        meta = _resume_meta(Path(out_dir), meta, model_cfg)
    trainer = trainer_cls(
        model,
        loss_fn,
        data,
        train_cfg,
        evaluate=val,
        out_dir=out_dir,
        hooks=hooks,
        stateful=stateful,
        meta=meta,
        name="lm",
        grad_sync=grad_sync,
    )
    ck = Path(out_dir) / CHECKPOINT_NAME if out_dir is not None else None
    if not (resume and ck is not None and (ck.exists() or previous_path(ck).exists())):
        # the evaluation before the first step (a resumed run has it in its checkpoint)
        rng = get_rng_state()
        with torch.no_grad():
            model.eval()
            record.initial = {"step": 0, **val(model)}
            model.train()
        set_rng_state(rng)
    result = trainer.fit(resume=resume, stop_after=stop_after)
    return LMRun(current_history(), model, result)


def train(
    model_cfg: MoELMConfig,
    train_cfg: TrainConfig,
    out_dir: str | Path | None = None,
    resume: bool = False,
    *,
    init_from: str | Path | None = None,
    corpus: TextCorpus | None = None,
    callback: Callable[[int, MoETransformerLM, dict], None] | None = None,
    return_model: bool = False,
    stop_after: int | None = None,
) -> dict | tuple[dict, MoETransformerLM]:
    """Train an MoE language model on the byte-level corpus.

    Parameters
    ----------
    model_cfg : MoELMConfig
    train_cfg : TrainConfig
    out_dir : path, optional
        Where the engine writes ``checkpoint.pt`` (verified, atomic; every
        ``eval_every`` steps unless ``checkpoint_every`` says otherwise) and
        ``metrics.jsonl``.
    resume : bool
        Continue the run in ``out_dir`` exactly: a run that is killed and resumed ends
        with bit-identical weights to an uninterrupted one (same machine, same thread
        count). The settings must be the run's (only ``max_hours``, ``threads``,
        ``progress`` and the log/checkpoint intervals may change).
    init_from : path, optional
        Start from the model weights of this checkpoint (fresh optimiser and step 0):
        fine-tuning, see :func:`finetune`.
    corpus : TextCorpus, optional
        Defaults to :func:`load_corpus` ``(train_cfg.val_fraction)``.
    callback : callable, optional
        ``callback(step, model, history)`` after every optimiser step (``step`` counts
        completed steps).
    return_model : bool
        Also return the trained model.
    stop_after : int, optional
        Return after this many steps of this call, checkpointed (an interruption on
        purpose; resume to continue).

    Returns
    -------
    history : dict
        Per evaluation (the first before any step): ``step``, ``tokens`` (training tokens
        seen), ``val_loss``, ``val_ppl``, ``diagnostics`` (see :func:`evaluate`); per
        step: ``train_loss`` (cross-entropy), ``aux_loss``, ``step_time`` (seconds of the
        step's computation).
    """
    run = run_training(
        model_cfg,
        train_cfg,
        out_dir,
        resume,
        init_from=init_from,
        corpus=corpus,
        callback=callback,
        stop_after=stop_after,
    )
    return (run.history, run.model) if return_model else run.history


def finetune(
    checkpoint: str | Path,
    train_cfg: TrainConfig,
    moe_overrides: dict | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    **kwargs,
) -> dict | tuple[dict, MoETransformerLM]:
    """Fine-tune the model of ``checkpoint`` with changed MoE options.

    The model config is the checkpoint's with ``moe`` updated by ``moe_overrides``
    (e.g. ``{"orthogonality_coef": 0.01, "variance_coef": 0.01}`` for the expert
    specialisation losses, or ``{"default_moe": False}``); the weights are loaded, the
    optimiser starts afresh and the step count at 0. Other keywords go to :func:`train`.
    """
    ck = load_checkpoint(checkpoint)
    cfg = dict(ck["model_config"])
    cfg["moe"] = {**cfg["moe"], **(moe_overrides or {})}
    return train(MoELMConfig(**cfg), train_cfg, out_dir, resume, init_from=checkpoint, **kwargs)
