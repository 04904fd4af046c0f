"""Moved into the core: the Gaussian-mixture utilities now live in :mod:`sci_moe.moe`.

This shim keeps the old import path working; import from :mod:`sci_moe.moe` instead
(:func:`~sci_moe.moe.fit_gaussian_mixture`, :func:`~sci_moe.moe.gaussian_component_log_prob`,
:class:`~sci_moe.moe.GaussianMixtureFit`; new there: :func:`~sci_moe.moe.gaussian_mixture_log_prob`
and :func:`~sci_moe.moe.sample_gaussian_mixture`).
"""

from __future__ import annotations

from sci_moe.moe import GaussianMixtureFit, fit_gaussian_mixture, gaussian_component_log_prob

__all__ = ["GaussianMixtureFit", "fit_gaussian_mixture", "gaussian_component_log_prob"]
