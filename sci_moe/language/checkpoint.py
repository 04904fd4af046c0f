"""Checkpoint and model files of the MoE language model, and the run's history records.

:func:`load_checkpoint` reads a training checkpoint of :func:`~sci_moe.language.train`
(the engine's ``checkpoint.pt``) or a model file of ``sci-moe train lm`` (``model.pt``,
written by :func:`save_model`, format :data:`MODEL_FORMAT`), verified, and gives both in
one shape: the weights, the model config and the history up to that step. The history is
rebuilt from the per-step records the training run checkpoints (``_History``, an engine
``stateful``) and the engine's evaluations (``_history``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from .._util import CheckpointError, load_verified
from .model import MoELMConfig

__all__ = ["MODEL_FORMAT", "load_checkpoint", "save_model"]

#: ``format`` of the model files :func:`save_model` writes (``sci-moe train lm``'s model.pt).
MODEL_FORMAT = "sci-moe-lm/1"


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint of :func:`train` (``checkpoint.pt``) or a model file of
    ``sci-moe train lm`` (``model.pt``), verified, CPU tensors.

    Returns
    -------
    dict
        At least ``model`` (state dict), ``model_config`` (the :class:`MoELMConfig` as a
        dict), ``step`` and ``history`` (as :func:`train` returns it, up to that step);
        a training checkpoint also holds the engine's keys (``optimizer``, ``rng``,
        ``config``, ``stateful``, ...).
    """
    state = load_verified(path, what="language-model checkpoint")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a language-model checkpoint")
    if state.get("format") == MODEL_FORMAT:
        return state
    if "meta" not in state or "model" not in state.get("meta", {}):
        raise CheckpointError(
            f"{path} is not a checkpoint of sci_moe.language.train or a model file of "
            "sci-moe train lm"
        )
    out = dict(state)
    out["model_config"] = state["meta"]["model"]
    hist = state.get("stateful", {}).get("history", _History().state_dict())
    cfg = state.get("config", {})
    out["history"] = _history(
        hist, state.get("evals", []), cfg.get("batch_size", 0), out["model_config"]["seq_len"]
    )
    return out


def save_model(
    path: str | Path,
    model_cfg: MoELMConfig,
    state_dict: dict,
    step: int = 0,
    history: dict | None = None,
) -> Path:
    """Write single-process weights and their config, checksummed and atomically.

    :func:`load_checkpoint` reads the file (``init_from`` of :func:`train` too). Under
    expert parallelism pass :meth:`LMRun.full_state_dict` (gathered on every rank, a
    collective) and write from rank 0.
    """
    from .._util import save_verified

    return save_verified(
        path,
        {
            "format": MODEL_FORMAT,
            "model": state_dict,
            "model_config": asdict(model_cfg),
            "step": int(step),
            "history": history or {},
        },
        keep_previous=False,
    )


class _History:
    """Per-step records of the run (engine ``stateful``: a resumed history is whole)."""

    def __init__(self) -> None:
        self.train_loss: list[float] = []
        self.aux_loss: list[float] = []
        self.step_time: list[float] = []
        self.initial: dict | None = None  # the evaluation before the first step

    def state_dict(self) -> dict:
        return {
            "train_loss": list(self.train_loss),
            "aux_loss": list(self.aux_loss),
            "step_time": list(self.step_time),
            "initial": self.initial,
        }

    def load_state_dict(self, state: dict) -> None:
        self.train_loss = list(state["train_loss"])
        self.aux_loss = list(state["aux_loss"])
        self.step_time = list(state["step_time"])
        self.initial = state["initial"]


def _history(hist: dict, evals: list[dict], batch_size: int, seq_len: int) -> dict:
    """The history dict of :func:`train` from the records and the engine's evaluations."""
    evs = ([hist["initial"]] if hist.get("initial") else []) + [e for e in evals if "val_loss" in e]
    return {
        "step": [int(e["step"]) for e in evs],
        "tokens": [int(e["step"]) * batch_size * seq_len for e in evs],
        "val_loss": [float(e["val_loss"]) for e in evs],
        "val_ppl": [float(e["val_ppl"]) for e in evs],
        "diagnostics": [e["val_layers"] for e in evs],
        "train_loss": list(hist["train_loss"]),
        "aux_loss": list(hist["aux_loss"]),
        "step_time": list(hist["step_time"]),
    }
