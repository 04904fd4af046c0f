"""sci-moe: Mixture-of-Experts for molecules and samplers.

The core lives in :mod:`sci_moe.moe` (``from sci_moe.moe import MoE, MoEConfig``);
:mod:`sci_moe.testing` holds the naive references and assertions every fast path is checked
against. Each name has one import path: this package exports only ``__version__``, so
``import sci_moe`` is light (it imports no subpackage and no torch).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
