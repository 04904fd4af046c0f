"""Save and load a trained :class:`MTVRPPolicy` (plain tensors, ``weights_only``).

The ``format`` tag :data:`FORMAT` names the policy's input: ``sci_moe.vrp.policy/1``
policies read 8 node features, without the open-route flag and the length limit
(:func:`~sci_moe.vrp.moses.node_features`); they are refused with a message to retrain.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import torch

from sci_moe._util import atomic_torch_save

from .model import MTVRPPolicy, PolicyConfig

__all__ = ["FORMAT", "SHIPPED_POLICY", "load_policy", "save_policy", "shipped_policy"]

#: The ``format`` entry of a policy checkpoint.
FORMAT = "sci_moe.vrp.policy/2"
_OLD_FORMATS = ("sci_moe.vrp.policy/1",)
#: Where a trained MoSES policy ships with the package (package data; absent until a long
#: run has trained one: ``benchmarks/vrp/train_long.py --ship``).
SHIPPED_POLICY = Path(__file__).resolve().parent / "policies" / "moses.pt"


def shipped_policy() -> Path:
    """The trained MoSES policy that ships with the package, the default of ``sci-moe vrp solve``.

    Raises
    ------
    ValueError
        When this installation ships none (the message says how to train one).
    """
    if not SHIPPED_POLICY.is_file():
        raise ValueError(
            "no trained MoSES policy ships with this installation; train one with "
            "'sci-moe train vrp --out DIR' and pass --model DIR/model.pt"
        )
    return SHIPPED_POLICY


def save_policy(path: str | os.PathLike, policy: MTVRPPolicy, **meta) -> Path:
    """Write ``policy`` (config, mode, weights) atomically to ``path``.

    Parameters
    ----------
    path : path-like
    policy : MTVRPPolicy
    **meta
        Plain values stored beside (for example the training variants and steps).
    """
    layers = policy.moses_layers()
    obj = {
        "format": FORMAT,
        "config": asdict(policy.config),
        "mode": policy.mode,
        "routing": layers[0].routing if layers else policy.config.routing,
        "state_dict": {k: v.detach().cpu() for k, v in policy.state_dict().items()},
        "meta": dict(meta),
    }
    return atomic_torch_save(path, obj)


def load_policy(path: str | os.PathLike) -> tuple[MTVRPPolicy, dict]:
    """Load a policy written by :func:`save_policy`.

    Returns
    -------
    policy : MTVRPPolicy
        In evaluation mode, with the saved :attr:`~MTVRPPolicy.mode`.
    meta : dict

    Raises
    ------
    ValueError
        If the file is missing, unreadable or not a policy checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"model checkpoint {path} does not exist; train one with 'sci-moe vrp train'"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"cannot load the model checkpoint {path}: {exc}") from exc
    if isinstance(obj, dict) and obj.get("format") in _OLD_FORMATS:
        raise ValueError(
            f"{path} is a policy of format {obj['format']!r}, whose encoder does not read the "
            f"open-route flag and the length limit; retrain it (this version reads {FORMAT!r})"
        )
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ValueError(f"{path} is not a sci_moe.vrp policy checkpoint (format {FORMAT!r})")
    policy = MTVRPPolicy(PolicyConfig(**obj["config"]))
    try:
        policy.load_state_dict(obj["state_dict"])
    except RuntimeError as exc:
        raise ValueError(f"{path}: the weights do not match the saved config: {exc}") from exc
    policy.mode = obj["mode"]
    for m in policy.moses_layers():
        m.routing = obj["routing"]
    policy.eval()
    return policy, obj.get("meta", {})
