"""Statistics that several fields share: Gaussian mixtures and distribution discrepancies.

This floor sits beside :mod:`sci_moe.moe`, below the fields: a statistic used by more
than one paper lives here once (the mixtures of CoGaMiD's feature replay and of the
energy-diffusion toys, the MMD of MvCGE's view discrepancy, the Jensen-Shannon divergence
of MoME's and MvCGE's routing diagnostics); a statistic used by one paper lives with that
paper.

* :class:`GaussianMixture`, :func:`fit_gaussian_mixture`, :class:`GaussianMixtureFit`,
  :func:`gaussian_component_log_prob`, :func:`gaussian_mixture_log_prob`,
  :func:`sample_gaussian_mixture`: Gaussian mixtures (the density and sampler object, EM
  fit, densities, sampling);
* :func:`mmd2`, :func:`pairwise_discrepancy_loss`: the multi-kernel squared MMD and a loss
  keeping sets of embeddings apart;
* :func:`pairwise_js_divergence`: mean Jensen-Shannon divergence between distributions.
"""

from .discrepancy import mmd2, pairwise_discrepancy_loss, pairwise_js_divergence
from .mixtures import (
    GaussianMixture,
    GaussianMixtureFit,
    fit_gaussian_mixture,
    gaussian_component_log_prob,
    gaussian_mixture_log_prob,
    sample_gaussian_mixture,
)

__all__ = [
    "GaussianMixture",
    "GaussianMixtureFit",
    "fit_gaussian_mixture",
    "gaussian_component_log_prob",
    "gaussian_mixture_log_prob",
    "mmd2",
    "pairwise_discrepancy_loss",
    "pairwise_js_divergence",
    "sample_gaussian_mixture",
]
