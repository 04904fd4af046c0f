"""Per-class feature memories for replay: Gaussian mixtures (CoGaMiD) and prototypes (STAR-like).

CoGaMiD (Zhu et al., NeurIPS 2025) keeps, for every old class :math:`c`, a Gaussian mixture
of penultimate pixel features

.. math::

    p(f \\mid c) = \\sum_{k=1}^{K} \\pi_{ck}\\, N(f; \\mu_{ck}, \\Sigma_{ck})

fitted by EM (:func:`sci_moe.moe.fit_gaussian_mixture`); the density and
sampler are :class:`sci_moe.sampling.md.GaussianMixture`. The single-prototype baseline
keeps only the class mean (STAR replays the prototype itself).
"""

from __future__ import annotations

import torch
from torch import Tensor

from sci_moe.moe import fit_gaussian_mixture
from sci_moe.sampling.md import GaussianMixture

__all__ = ["GaussianMixtureMemory", "PrototypeMemory"]


def _check(features: Tensor, labels: Tensor) -> None:
    if features.dim() != 2 or labels.shape != features.shape[:1]:
        raise ValueError(
            f"features must be (N, D) and labels (N,), got {tuple(features.shape)} and "
            f"{tuple(labels.shape)}"
        )


class GaussianMixtureMemory:
    """One Gaussian mixture of features per class.

    Parameters
    ----------
    n_components : int
        ``K`` (the paper uses 3; ``K = 1`` is a single Gaussian per class).
    covariance_type : {"full", "diag"}
    max_iter : int
        EM iterations (the third-party port uses 30).
    reg_covar : float
        Variance floor added by EM.
    max_points : int
        At most this many features per class are used for a fit (random subset).
    """

    def __init__(
        self,
        n_components: int = 3,
        covariance_type: str = "full",
        max_iter: int = 30,
        reg_covar: float = 1e-4,
        max_points: int = 20000,
    ) -> None:
        if n_components < 1 or max_points < 1:
            raise ValueError("n_components and max_points must be >= 1")
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.max_iter = max_iter
        self.reg_covar = reg_covar
        self.max_points = max_points
        self.mixtures: dict[int, GaussianMixture] = {}

    @property
    def classes(self) -> list[int]:
        """Classes with a stored mixture, sorted."""
        return sorted(self.mixtures)

    def fit(
        self,
        features: Tensor,
        labels: Tensor,
        classes,
        generator: torch.Generator | None = None,
    ) -> GaussianMixtureMemory:
        """Fit (or refit) the mixture of each class in ``classes``.

        Parameters
        ----------
        features : Tensor, shape (N, D)
        labels : Tensor, shape (N,), int
        classes : iterable of int
        generator : torch.Generator, optional
        """
        _check(features, labels)
        for c in classes:
            x = features[labels == c].detach()
            if x.shape[0] > self.max_points:
                idx = torch.randperm(x.shape[0], generator=generator)[: self.max_points]
                x = x[idx]
            k = min(self.n_components, x.shape[0])
            if k < 1:
                raise ValueError(f"class {c} has no features to fit; drop it from classes")
            fit = fit_gaussian_mixture(
                x,
                k,
                self.covariance_type,
                max_iter=self.max_iter,
                reg_covar=self.reg_covar,
                generator=generator,
            )
            self.mixtures[int(c)] = GaussianMixture(
                fit.means, fit.full_covariances(), fit.weights, dtype=x.dtype
            )
        return self

    def adjust(
        self,
        features: Tensor,
        labels: Tensor,
        n_replay: int = 2000,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Dynamic Adjustment: refit stored mixtures with new features of their classes.

        For every stored class :math:`c` present in ``labels``, the mixture is refitted by
        EM on ``n_replay`` samples of the stored mixture together with the new features
        (pixels of new data confidently predicted as :math:`c`), so the memory follows the
        drifting feature space. The paper's exact update rule is not published; this is
        one reading of it.

        Parameters
        ----------
        features : Tensor, shape (N, D)
        labels : Tensor, shape (N,)
            Pseudo-labels (stored classes) of the features.
        n_replay : int
        generator : torch.Generator, optional

        Returns
        -------
        list of int
            The classes that were adjusted.
        """
        _check(features, labels)
        done = []
        for c in self.classes:
            new = features[labels == c].detach()
            if new.shape[0] == 0:
                continue
            old = self.mixtures[c].sample(n_replay, generator=generator).to(new.dtype)
            x = torch.cat([old, new])
            fit = fit_gaussian_mixture(
                x,
                min(self.n_components, x.shape[0]),
                self.covariance_type,
                max_iter=self.max_iter,
                reg_covar=self.reg_covar,
                generator=generator,
            )
            self.mixtures[c] = GaussianMixture(
                fit.means, fit.full_covariances(), fit.weights, dtype=x.dtype
            )
            done.append(c)
        return done

    def component_means(self) -> Tensor:
        """Means of every stored component of every class, shape (sum_c K_c, D)."""
        return torch.cat([self.mixtures[c].means for c in self.classes])

    def sample(
        self, n_per_class: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """Pseudo-features of every stored class: ``(n_classes * n, D)`` features and labels."""
        feats, labs = [], []
        for c in self.classes:
            feats.append(self.mixtures[c].sample(n_per_class, generator=generator))
            labs.append(torch.full((n_per_class,), c, dtype=torch.long))
        return torch.cat(feats), torch.cat(labs)

    def log_prob(self, features: Tensor, c: int) -> Tensor:
        """``log p(f | c)`` of features ``(N, D)``, shape (N,)."""
        return self.mixtures[int(c)].log_prob(features)

    def state_dict(self) -> dict[str, Tensor]:
        """Plain tensors (loadable with ``torch.load(weights_only=True)``)."""
        out = {}
        for c, m in self.mixtures.items():
            out[f"{c}.weights"] = m.weights
            out[f"{c}.means"] = m.means
            out[f"{c}.covs"] = m.covs
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore the mixtures written by :meth:`state_dict`."""
        self.mixtures = {}
        for c in sorted({int(k.split(".")[0]) for k in state}):
            mixture = GaussianMixture(
                state[f"{c}.means"],
                state[f"{c}.covs"],
                state[f"{c}.weights"],
                dtype=state[f"{c}.means"].dtype,
            )
            # The constructor renormalises the weights; dividing weights that were already
            # normalised by their float sum can move them by an ulp, so a resumed run would
            # drift from an uninterrupted one. Keep the stored (validated) weights exactly.
            mixture.weights = state[f"{c}.weights"].to(mixture.means.dtype).clone()
            self.mixtures[c] = mixture


class PrototypeMemory:
    """One prototype (the mean feature) per class; replay repeats the prototype (STAR-like).

    For the held-out likelihood comparison, :meth:`log_prob` scores features under the
    isotropic Gaussian :math:`N(\\mu_c, s_c^2 I)` with :math:`s_c^2` the class's mean
    per-dimension variance (the best a prototype plus one radius can say).
    """

    def __init__(self) -> None:
        self.prototypes: dict[int, Tensor] = {}
        self.variances: dict[int, Tensor] = {}

    @property
    def classes(self) -> list[int]:
        """Classes with a stored prototype, sorted."""
        return sorted(self.prototypes)

    def fit(self, features: Tensor, labels: Tensor, classes, generator=None) -> PrototypeMemory:
        """Store the mean (and mean variance) of each class's features."""
        _check(features, labels)
        for c in classes:
            x = features[labels == c].detach()
            if x.shape[0] < 1:
                raise ValueError(f"class {c} has no features to fit; drop it from classes")
            self.prototypes[int(c)] = x.mean(0)
            self.variances[int(c)] = x.var(0, unbiased=False).mean().clamp_min(1e-6)
        return self

    def sample(self, n_per_class: int, generator=None) -> tuple[Tensor, Tensor]:
        """The prototypes, each repeated ``n_per_class`` times, with their labels."""
        feats = [self.prototypes[c].expand(n_per_class, -1) for c in self.classes]
        labs = [torch.full((n_per_class,), c, dtype=torch.long) for c in self.classes]
        return torch.cat(feats), torch.cat(labs)

    def log_prob(self, features: Tensor, c: int) -> Tensor:
        """``log N(f; mu_c, s_c^2 I)``, shape (N,)."""
        mu, s2 = self.prototypes[int(c)], self.variances[int(c)]
        d = features.shape[1]
        return -0.5 * ((features - mu).pow(2).sum(-1) / s2 + d * torch.log(2 * torch.pi * s2))

    def state_dict(self) -> dict[str, Tensor]:
        """Plain tensors."""
        out = {f"{c}.proto": p for c, p in self.prototypes.items()}
        out.update({f"{c}.var": v for c, v in self.variances.items()})
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore what :meth:`state_dict` wrote."""
        self.prototypes = {int(k.split(".")[0]): v for k, v in state.items() if k.endswith("proto")}
        self.variances = {int(k.split(".")[0]): v for k, v in state.items() if k.endswith("var")}
