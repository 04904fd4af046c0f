r"""Exact spectral tools for finite reversible chains and simulated-tempering decompositions.

Issue 8, theory part (``papers/sampling-theory.md`` section B). Garg, Balasubramanian and
Zhou (NeurIPS 2025, arXiv:2505.15059) lower-bound the restricted spectral gap of simulated
tempering through projection and restriction chains; their constants were not available as
text, so the bounds here are the classical ones (Martin–Randall 2000,
Jerrum–Son–Tetali–Vigoda 2004) plus a JSTV-type bound for soft (component) decompositions
in the spirit of Ge–Lee–Risteski 2018, with its proof sketched in
:func:`soft_decomposition_bound`.

Modules: :mod:`.chains` (validation, lazy chains), :mod:`.gaps` (spectral, restricted
gaps, total variation), :mod:`.decomposition` (projection / restriction chains, bounds,
:func:`check_bound`), :mod:`.builders` (discretised RWMH and ST chains on mixtures),
:mod:`.st_bound` (issue 47: the restricted-gap decomposition in the paper's form, components
:math:`p_i = \sum_j w_{ij} p_{ij}` at every level and a projected chain on (level, component),
with constants derived and proved here, :func:`st_decomposition`).
"""

from .builders import (
    TemperingChain,
    bimodal_means,
    gaussian_mixture_rwmh,
    geometric_ladder,
    make_grid,
    mixture_log_density,
    mixture_responsibilities,
    rwmh_chain,
    simulated_tempering_chain,
)
from .chains import ReversibleChain, dirichlet_form, lazy, validate_chain
from .decomposition import (
    BoundCheck,
    check_bound,
    escape_probability,
    jstv_bound,
    martin_randall_bound,
    projection_chain,
    restriction_chain,
    soft_decomposition_bound,
    soft_overlap_constant,
    soft_projection_chain,
    soft_restriction_chain,
)
from .gaps import exit_probability, restricted_spectral_gap, spectral_gap, symmetrised, tv_distance
from .st_bound import STDecomposition, st_decomposition, st_gap_bound, tempering_decomposition

__all__ = [
    "BoundCheck",
    "ReversibleChain",
    "STDecomposition",
    "TemperingChain",
    "bimodal_means",
    "check_bound",
    "dirichlet_form",
    "escape_probability",
    "exit_probability",
    "gaussian_mixture_rwmh",
    "geometric_ladder",
    "jstv_bound",
    "lazy",
    "make_grid",
    "martin_randall_bound",
    "mixture_log_density",
    "mixture_responsibilities",
    "projection_chain",
    "restricted_spectral_gap",
    "restriction_chain",
    "rwmh_chain",
    "simulated_tempering_chain",
    "soft_decomposition_bound",
    "soft_overlap_constant",
    "soft_projection_chain",
    "soft_restriction_chain",
    "spectral_gap",
    "st_decomposition",
    "st_gap_bound",
    "symmetrised",
    "tempering_decomposition",
    "tv_distance",
    "validate_chain",
]
