"""sci-moe: Mixture-of-Experts for molecules and samplers.

The core lives in :mod:`sci_moe.moe`; :mod:`sci_moe.testing` holds the naive references
and assertions every fast path is checked against.
"""

__version__ = "0.1.0"

from .moe import MoE, MoEConfig, Router, RouterConfig, Routing

__all__ = ["MoE", "MoEConfig", "Router", "RouterConfig", "Routing", "__version__"]
