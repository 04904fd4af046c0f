"""The training engine every method of sci-moe trains on.

:class:`Trainer` runs the loop: seeding of every generator from one ``seed``, the
optimiser and a warm-up + decay schedule that works for any number of steps, gradient
clipping, evaluation every ``eval_every`` steps with early stopping on a monitored metric,
a progress bar (plain lines in a log file), ``metrics.jsonl``, verified atomic
checkpoints with exact resume (also after SIGKILL), a wall-time budget (``max_hours``)
for runs in pieces, the thread count, and data parallelism under ``torchrun`` (gloo on
CPU, NCCL on GPUs). A method supplies only its model, loss, data and evaluation; its
config inherits :class:`TrainConfig`; a method that trains in phases (stages, tasks)
runs one :class:`Trainer` per phase under :class:`Phases`. See ``docs/training.rst``.

Examples
--------
>>> import torch
>>> from sci_moe.train import ShuffledBatches, TrainConfig, Trainer, seed_everything
>>> seed_everything(0)
>>> x = torch.randn(64, 3); y = x @ torch.tensor([1.0, -2.0, 0.5])
>>> model = torch.nn.Linear(3, 1)
>>> data = ShuffledBatches(64, 16, lambda idx: (x[idx], y[idx]))
>>> loss = lambda m, b: torch.nn.functional.mse_loss(m(b[0]).squeeze(-1), b[1])
>>> cfg = TrainConfig(steps=300, lr=0.05, batch_size=16, eval_every=0, progress=False)
>>> val = lambda m: {"val_loss": float(loss(m, (x, y)))}
>>> res = Trainer(model, loss, data, cfg, evaluate=val).fit()
>>> res.reason, res.best_metric < 1e-3
('completed', True)
"""

from .config import OPTIMIZERS, RESUMABLE_CHANGES, SCHEDULES, TrainConfig
from .convergence import is_flat, tail_gain
from .cycles import until_flat
from .data import Batch, BatchSource, ShuffledBatches, StreamBatches
from .distributed import (
    DistributedContext,
    all_reduce_sum,
    average_gradients,
    barrier,
    broadcast_object,
    current_context,
    init_distributed,
    run_device,
)
from .history import MetricHistory
from .metrics_log import MetricsLog, read_metrics
from .phases import Phases
from .result import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    METRICS_NAME,
    StepInfo,
    TrainingDiverged,
    TrainResult,
    run_files,
)
from .schedule import lr_factor, warmup_steps
from .seeding import derive_seed, get_rng_state, seed_everything, set_rng_state
from .trainer import Trainer

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "METRICS_NAME",
    "OPTIMIZERS",
    "RESUMABLE_CHANGES",
    "SCHEDULES",
    "Batch",
    "BatchSource",
    "DistributedContext",
    "MetricHistory",
    "MetricsLog",
    "Phases",
    "ShuffledBatches",
    "StepInfo",
    "StreamBatches",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "all_reduce_sum",
    "average_gradients",
    "barrier",
    "broadcast_object",
    "current_context",
    "derive_seed",
    "get_rng_state",
    "init_distributed",
    "is_flat",
    "lr_factor",
    "read_metrics",
    "run_device",
    "run_files",
    "seed_everything",
    "set_rng_state",
    "tail_gain",
    "until_flat",
    "warmup_steps",
]
