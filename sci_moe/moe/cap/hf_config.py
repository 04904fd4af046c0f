"""Shipped model configurations -> :class:`~sci_moe.moe.cap.ModelSpec`.

The shipped configurations (``configs/*.json`` in this package) were transcribed by hand
from the models' public ``config.json`` files; nothing is downloaded. They are read by
:meth:`~sci_moe.moe.cap.ModelSpec.from_config` (:func:`~sci_moe.moe.cap.model.spec_from_dict`).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .model import ModelSpec

__all__ = ["available_models", "load_model"]

_BUILTIN = {
    "mixtral-8x7b": "mixtral-8x7b.json",
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",
    "deepseek-v3": "deepseek-v3.json",
    "olmoe-1b-7b": "olmoe-1b-7b.json",
}


def available_models() -> list[str]:
    """Names of the shipped model configurations."""
    return sorted(_BUILTIN)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A shipped model (:func:`available_models`) or a ``config.json`` path.

    Parameters
    ----------
    name_or_path : str or Path
        ``"mixtral-8x7b"``, ``"qwen3-30b-a3b"``, ``"deepseek-v3"``, ``"olmoe-1b-7b"``
        (case-insensitive), or a path to a transformers-style JSON config.

    Returns
    -------
    ModelSpec
    """
    key = str(name_or_path).strip().lower()
    if key in _BUILTIN:
        text = resources.files(__package__).joinpath("configs").joinpath(_BUILTIN[key]).read_text()
        return ModelSpec.from_config(json.loads(text), name=key)
    path = Path(name_or_path)
    if path.suffix.lower() == ".json" or path.exists():
        return ModelSpec.from_config(path)
    raise ValueError(
        f"unknown model {str(name_or_path)!r}; use one of {available_models()} "
        "or the path of a config.json"
    )
