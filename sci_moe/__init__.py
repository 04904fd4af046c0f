"""sci-moe: Mixture-of-Experts for molecules and samplers.

The core lives in :mod:`sci_moe.moe`; :mod:`sci_moe.testing` holds the naive references
and assertions every fast path is checked against.

``import sci_moe`` is light (it does not import torch): the core names below are loaded
from :mod:`sci_moe.moe` on first use, so ``from sci_moe import MoE`` works as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = ["MoE", "MoEConfig", "Router", "RouterConfig", "Routing", "__version__"]

# Public names loaded lazily from sci_moe.moe (importing it imports torch).
_LAZY_FROM_MOE = ("MoE", "MoEConfig", "Router", "RouterConfig", "Routing")

if TYPE_CHECKING:  # pragma: no cover
    from .moe import MoE, MoEConfig, Router, RouterConfig, Routing


def __getattr__(name: str):
    if name in _LAZY_FROM_MOE:
        value = getattr(importlib.import_module(".moe", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
